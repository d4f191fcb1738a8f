"""The dataset's metadata as a lazy Dask DataFrame: one partition per shard, read from that
shard's parquet only when something computes it.

The frame's index is the record number (record ``i`` of the dataset is row ``i``), so its
divisions are known from the shards' row counts, which the parquet footers give without
reading any row.
"""
from collections.abc import Sequence

import dask
import dask.dataframe as dd
import pandas as pd

from .._core.wording import plural
from ..shards.files import Shard
from ..shards.parquet import open_parquet, read_table

__all__ = ['count_records', 'read_parquet', 'lazy_metadata', 'pandas_dtypes',
           'checked_metadata']


def count_records(shards: Sequence[Shard], id_col: str) -> pd.DataFrame:
    """Set each shard's ``start`` and ``stop`` (its records in the dataset) from its parquet
    footer; returns the frame's meta (the first shard's columns, no rows)."""
    meta, start = None, 0
    for shard in shards:
        with open_parquet(shard, id_col) as source:
            shard.start, start = start, start + source.metadata.num_rows
            shard.stop = start
            if meta is None:
                meta = source.schema_arrow.empty_table().to_pandas()
    if meta is None:
        meta = pd.DataFrame({id_col: pd.Series([], dtype=object)})
    return meta.set_axis(pd.RangeIndex(0, 0), axis=0)


def read_parquet(shard: Shard, id_col: str, columns: Sequence[str] | None = None,
                 expect_columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A shard's metadata as a pandas DataFrame (``columns`` only, if given, and the id
    column), rows sorted by id and numbered from 0, with
    :func:`~gluonbatch.shards.parquet.read_table`'s checks; ``expect_columns`` are the
    columns the file must have (all of them, in order)."""
    with open_parquet(shard, id_col) as source:
        if expect_columns is not None:
            # the columns as pandas reads them (a stored index is not a column)
            names = list(source.schema_arrow.empty_table().to_pandas().columns)
            if names != list(expect_columns):
                raise ValueError('%s has columns %s; the dataset\'s first shard has %s'
                                 % (shard.parquet, names, list(expect_columns)))
        frame = read_table(shard, id_col, columns, source).to_pandas()
    frame.index = pd.RangeIndex(len(frame))
    return frame


class ReadShardMetadata:
    """One partition: a shard's parquet rows sorted by id, indexed by record number.

    Checked against what the dataset was opened with, naming the file: the same columns
    as the first shard's and the same number of rows. Dask passes ``columns`` when a
    computation needs only some of them, and only those are read.
    """

    def __init__(self, id_col, columns):
        self.id_col, self.columns = id_col, list(columns)

    def __call__(self, shard, columns=None):
        frame = read_parquet(shard, self.id_col, columns, expect_columns=self.columns)
        if len(frame) != shard.stop - shard.start:
            raise ValueError('%s has %s; it had %d when the dataset was opened'
                             % (shard.parquet, plural(len(frame), 'row'),
                                shard.stop - shard.start))
        if columns is not None:
            frame = frame[list(columns)]
        return frame.set_axis(pd.RangeIndex(shard.start, shard.stop), axis=0)


def pandas_dtypes() -> dask.config.set:
    """The Dask configuration under which the metadata is built and lowered: columns keep
    the dtypes pandas reads (Dask would turn object columns into its string dtype, and with
    them the arrays of an embedding column into strings)."""
    return dask.config.set({'dataframe.convert-string': False})


def lazy_metadata(shards: Sequence[Shard], id_col: str, meta: pd.DataFrame) -> dd.DataFrame:
    """The Dask DataFrame of ``shards``' metadata, nothing read yet.

    Divisions are known (record numbers) unless a shard is empty.
    """
    with pandas_dtypes():
        if not shards:
            return dd.from_pandas(meta, npartitions=1)
        divisions = None
        if all(shard.stop > shard.start for shard in shards):
            divisions = tuple(shard.start for shard in shards) + (shards[-1].stop - 1,)
        return dd.from_map(ReadShardMetadata(id_col, meta.columns), shards, meta=meta,
                           divisions=divisions, label='read-shard-metadata')


def checked_metadata(frame: dd.DataFrame, id_col: str, shards: Sequence[Shard],
                     path: str) -> dd.DataFrame:
    """``frame``, a dataset's metadata (of the ``shards`` of directory ``path``) before it
    is written, checked as far as it can be without computing it: its rows are checked
    per shard when the writer computes them."""
    if not isinstance(frame, dd.DataFrame):
        raise TypeError('metadata must be a Dask DataFrame (one partition per shard), got '
                        '%s; assign columns to it rather than replacing it'
                        % type(frame).__name__)
    if id_col not in frame.columns:
        raise ValueError('metadata lost its id column %r' % id_col)
    if frame.npartitions != max(1, len(shards)):
        raise ValueError('metadata has %s but %s has %s: keep one partition per shard '
                         '(add columns, but keep the rows)'
                         % (plural(frame.npartitions, 'partition'), path,
                            plural(len(shards), 'shard')))
    return frame
