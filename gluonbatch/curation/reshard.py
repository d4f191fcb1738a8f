"""Resharding: the writer behind ``to_webdataset``, on whatever Dask scheduler is active.

Two passes, and the metadata is computed once. The first is one task per input shard: it
computes the shard's partition (the whole pipeline, embedders included), checks its rows
against the shard's records, and writes the rows the filter keeps, every column, to an
Arrow file in the run's hidden staging directory; it returns their row numbers. Once the
driver knows how many records each shard keeps, it numbers the output shards, and the
second pass is one task per output shard, reading the kept rows it needs from those files
and the records from the source tars. Output shards are renamed into place only when
every task has succeeded, together, in one journaled commit
(:mod:`~gluonbatch.shards.commit`): a run killed during the renames leaves files that
the next read or write of the directory removes.

A source with a manifest (a detection dataset's ``detection.json``,
:mod:`~gluonbatch.shards.manifest`) gives the new dataset its manifest: the same, but for
the shard list, moved last in the same commit.
"""
import logging
import os
import time
from collections.abc import Sequence

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from .._core.checks import check_int, check_str
from .._core.heap import heap_for_large_arrays
from .._core.typing import PathLike
from .._core.wording import plural
from ..shards.commit import BACK, recover, staging
from ..shards.copier import RecordCopier
from ..shards.files import SHARD_FILE, Shard, examples, shard_files
from ..shards.manifest import (MANIFEST, MANIFEST_TMP, hinted, load_manifest,
                               manifest_problems, with_shards, write_manifest)
from ..shards.reader import RecordReader
from ..shards.writer import ShardWriter, commit_shards, id_digits
from .metadata_writer import arrow_table, check_rows, compute, partition_tasks

__all__ = ['reshard']

_LOG = logging.getLogger(__name__)


def _kept_path(stage, shard, ext='arrow'):
    """Where the first pass stages ``shard``'s kept rows (``'arrow'``: Arrow's IPC file,
    uncompressed, a few times faster to write and read than parquet) and their row numbers
    in the shard (``'npy'``)."""
    return os.path.join(stage, 'kept-%s.%s' % (shard.stem, ext))


def _stage_kept_rows(frame, shard, id_col, filter_column, reader, stage):
    """First pass, one input shard: check the computed partition ``frame`` against the
    shard's records, write the rows ``filter_column`` keeps (all of them if None) to the
    staging directory with their row numbers within the shard, and return how many there
    are: all the driver needs, so its memory does not grow with the records."""
    with heap_for_large_arrays():
        check_rows(frame, shard, id_col, reader.shard_ids(shard))
        if filter_column is None:
            rows = np.arange(len(frame))
        else:
            column = frame[filter_column]
            if column.isna().any():
                raise TypeError('to_webdataset: filter column %r of %s holds missing values; '
                                'it must be True or False for every record'
                                % (filter_column, shard.parquet))
            rows = np.flatnonzero(column.to_numpy(dtype=bool))
        if len(rows):
            feather.write_feather(arrow_table(frame.iloc[rows]), _kept_path(stage, shard),
                                  compression='uncompressed')
            np.save(_kept_path(stage, shard, 'npy'), rows)
    return len(rows)


def _write_output_shard(reader, stage, stem, first_id, width, pieces, id_col, old_id_col,
                        mtime):
    """Second pass, one output shard, written under temporary names in ``stage``.

    ``pieces`` are ``(input shard, begin, end)``: this shard takes kept rows
    ``begin:end`` of that input shard, in order. The records' new ids are
    consecutive from ``first_id``.
    """
    with heap_for_large_arrays():  # numpy temporaries on a distributed worker
        writer = ShardWriter(stage, stem, mtime)
        try:
            copier, tables, ids = RecordCopier(writer, id_col, old_id_col), [], []
            for shard, begin, end in pieces:
                rows = np.load(_kept_path(stage, shard, 'npy'), mmap_mode='r')
                # the kept rows as staged, in pyarrow's types (embeddings included)
                tables.append(feather.read_table(_kept_path(stage, shard), memory_map=False)
                              .slice(begin, end - begin))
                new_ids = ['%0*d' % (width, n) for n in range(first_id + len(ids),
                                                              first_id + len(ids) + end - begin)]
                copier.copy(shard, reader.records(shard), reader.fd(shard),
                            np.array(rows[begin:end]), new_ids)
                ids += new_ids
            meta = _concatenated(tables)
            if old_id_col is not None:
                meta = meta.append_column(old_id_col, meta.column(id_col).cast(pa.string()))
            writer.finish(meta.set_column(meta.schema.get_field_index(id_col), id_col,
                                          pa.array(ids, pa.string())))
        except BaseException:
            writer.abort()
            raise
    return stem


def _concatenated(tables):
    """The kept rows of several input shards as one table. Each shard's rows were staged
    from pandas in types of their own (a column of nulls in one shard, strings in another;
    integers beside floats where one has nulls): the common type of each column is taken,
    and where pyarrow finds none, pandas joins them as it did the frames."""
    try:
        return pa.concat_tables(tables, promote_options='permissive')
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        frame = pd.concat([table.to_pandas() for table in tables], ignore_index=True)
        return pa.Table.from_pandas(frame, preserve_index=False)


def _output_tasks(shards, kept, samples_per_shard, max_shards, reader, stage, id_col,
                  old_id_col):
    """One Dask task per output shard; ``kept`` holds how many rows each input shard keeps.
    The kept records, numbered through the input shards in order, fill the output shards
    in turn: each task gets the ranges of input shards it takes (arithmetic on the counts,
    nothing per record)."""
    digits = id_digits(samples_per_shard)
    ends = np.cumsum(kept)
    starts = ends - np.asarray(kept)
    mtime = int(time.time())
    tasks = []
    for shard_number, begin in enumerate(range(0, int(ends[-1]), samples_per_shard)):
        end = min(begin + samples_per_shard, int(ends[-1]))
        pieces = [(shards[n], max(begin, int(starts[n])) - int(starts[n]),
                   min(end, int(ends[n])) - int(starts[n]))
                  for n in np.flatnonzero((starts < end) & (ends > begin)
                                          & (ends > starts)).tolist()]
        tasks.append(dask.delayed(_write_output_shard)(
            reader, stage, '%0*d' % (max_shards, shard_number), 10 ** digits * shard_number,
            max_shards + digits, pieces, id_col, old_id_col, mtime))
    return tasks


def _check_arguments(frame, id_col, source, destination, filter_column, old_id_col):
    if filter_column is not None:
        if filter_column not in frame.columns:
            raise ValueError('to_webdataset: no filter column %r in the metadata; it has %s'
                             % (filter_column, list(map(str, frame.columns))))
        dtype = frame[filter_column].dtype
        if not pd.api.types.is_bool_dtype(dtype):
            raise TypeError('to_webdataset: filter column %r must be bool (True keeps a '
                            'record), got dtype %s' % (filter_column, dtype))
    if old_id_col is not None:
        check_str(old_id_col, 'old_id_col')
        if old_id_col == id_col or old_id_col in frame.columns:
            raise ValueError('to_webdataset: old_id_col %r is already a column of the '
                             'metadata; choose a new name' % old_id_col)
    if os.path.realpath(destination) == os.path.realpath(source):
        raise ValueError('to_webdataset: %s is the source directory; write the new '
                         'dataset somewhere else' % destination)
    if os.path.isdir(destination):
        recover(destination)  # what a killed run left is undone first
        existing = sorted(n for n in os.listdir(destination)
                          if SHARD_FILE.match(n) or n == MANIFEST)
        if existing:
            raise ValueError('to_webdataset: %s already holds a dataset (%s); write into '
                             'an empty directory' % (destination, examples(existing)))


def _source_manifest(source):
    """The source's manifest (None without one), checked against the shard files there
    (their parquet footers), as verify checks it: resharding a dataset whose files
    disagree with its manifest (a shard missing, say) would write a part of it as if it
    were whole."""
    try:
        manifest = load_manifest(source)
        if manifest is None:
            return None
        found = shard_files(source)
        counts = {}
        for stem in found['tar'] & found['parquet']:
            try:
                counts[stem] = pq.ParquetFile(os.path.join(source, stem + '.parquet')
                                              ).metadata.num_rows
            except (OSError, pa.ArrowException):
                counts[stem] = None  # reading the shard says what is wrong with it
        problems = manifest_problems(source, counts)
        if problems:
            raise ValueError('to_webdataset: %s' % problems[0][1])
    except ValueError as err:
        raise hinted(err, source) from None
    return manifest


def reshard(frame: dd.DataFrame, shards: Sequence[Shard], reader: RecordReader, source: str,
            id_col: str, path: PathLike, filter_column: str | None, samples_per_shard: int,
            max_shards: int, old_id_col: str | None) -> list[str]:
    """Write the records of ``frame`` kept by ``filter_column`` as a new, renumbered dataset.

    The work of :meth:`.ImageTextPairDataset.to_webdataset` (which documents the arguments):
    ``frame`` is the dataset's Dask metadata (one partition per shard of ``shards``),
    ``reader`` the dataset's :class:`~gluonbatch.shards.reader.RecordReader` and
    ``source`` the source directory.
    """
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    max_shards = check_int(max_shards, 'max_shards', minimum=1)
    destination = os.path.abspath(os.fspath(path))
    _check_arguments(frame, id_col, source, destination, filter_column, old_id_col)
    manifest = _source_manifest(source)
    created = not os.path.isdir(destination)
    os.makedirs(destination, exist_ok=True)
    written = []
    try:
        with staging(destination) as stage:
            # one node of the graph: a cluster sends the reader (every shard) to each worker
            # once, not with every task
            reader = dask.delayed(reader, traverse=False)
            kept = list(compute(partition_tasks(
                frame, lambda part, number: dask.delayed(_stage_kept_rows)(
                    part, shards[number], id_col, filter_column, reader, stage.path)),
                'selecting records'))
            total = sum(kept)
            num_shards = -(-total // samples_per_shard)
            if num_shards > 10 ** max_shards:
                raise ValueError('to_webdataset: %d records at %d per shard need %d shards, '
                                 'more than max_shards=%d digits can number; raise max_shards '
                                 'or samples_per_shard' % (total, samples_per_shard,
                                                           num_shards, max_shards))
            if total:
                stems = compute(_output_tasks(shards, kept, samples_per_shard, max_shards,
                                              reader, stage.path, id_col, old_id_col),
                                'writing shards', holds_the_gil=True)
                last = []
                if manifest is not None:
                    counts = [min(samples_per_shard, total - n * samples_per_shard)
                              for n in range(len(stems))]
                    write_manifest(stage.file(MANIFEST_TMP),
                                   with_shards(manifest, list(zip(stems, counts))))
                    last = [(MANIFEST_TMP, MANIFEST)]
                # all shards or none: a kill during the moves is undone by the next read
                # or write of the directory
                written = commit_shards(stage, stems, BACK, last=last)
    finally:
        if created and not written:
            # a run that writes nothing leaves nothing, not even the directory it made
            try:
                os.rmdir(destination)
            except OSError:
                pass  # something else was put there meanwhile
    if not total:
        _LOG.info('to_webdataset: no record of %s has %r True; nothing written',
                  source, filter_column)
        return []
    _LOG.info('to_webdataset: wrote %d of %s of %s into %s in %s', total,
              plural(shards[-1].stop, 'record'), source, plural(num_shards, 'shard'),
              destination)
    return written
