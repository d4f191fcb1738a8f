"""The dataset: :class:`ImageTextPairDataset`, random access to a sharded image-text dataset."""
import os
from collections.abc import Sequence
from typing import Any, Self

from .._core.checks import check_str
from .._core.typing import NDArray, PathLike
from ..shards.commit import reading
from ..shards.dataset import ShardDataset
from ..shards.files import Shard, find_shards
from ..shards.reader import RecordReader
from .metadata import checked_metadata, count_records, lazy_metadata
from .metadata_writer import save_metadata
from .reshard import reshard

__all__ = ['ImageTextPairDataset']


# --------------------------------------------------------------------------- the dataset

class ImageTextPairDataset(ShardDataset):
    """Random access to a sharded image-text dataset: ``ds[i] -> (image, caption, metadata)``.

    Open one with :meth:`from_webdataset`. ``image`` is an ``mx.nd.NDArray`` (H, W, 3)
    uint8 (RGB, decoded by ``mx.image.imdecode``; WebP by Pillow), ``caption`` the
    ``.txt`` member as a ``str`` and ``metadata`` the ``.json`` member as a ``dict``.
    Member extensions are matched case-insensitively. Record ``i`` is row ``i`` of
    :attr:`metadata`: shards in numeric order, each shard's rows sorted by id.

    Opening reads only the parquet footers. Reading a record reads only its bytes (usually
    one ``pread`` for all its members), and checks each member's tar header on the way, so
    a stale ``.idx`` cannot return another member's bytes. With ``.idx`` files a shard's
    first reads find their record's line by lookup, and its whole table (ids and offsets,
    checked against each other) is read after some reads, per process; without, on its
    first record (see ``RecordReader``). File handles are opened lazily, per process:
    DataLoader worker processes each open their own.

    Attributes
    ----------
    metadata : dask.dataframe.DataFrame
        One row per record, in record order (the index is the record number), one
        partition per shard, read from the parquet files only when computed. Columns added
        here (``ds.metadata['keep'] = ...``) are used by :meth:`to_webdataset` and saved by
        :meth:`save_metadata`; rows must stay as they are.
    path : str
        The dataset directory (absolute).
    id_col : str
        The id column of the parquet files.
    tar_files : list of str
        The tar of every shard of this dataset.

    Examples
    --------
    >>> import tempfile
    >>> import mxnet as mx
    >>> from gluonbatch.curation import make_example_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = make_example_dataset(tmp.name, num_shards=3, samples_per_shard=2)
    >>> ds = ImageTextPairDataset.from_webdataset(path, 'key')
    >>> list(ds.metadata['key'])
    ['000000', '000001', '000010', '000011', '000020', '000021']
    >>> resized = ds.transform_first(lambda image: mx.image.imresize(image, 8, 8))
    >>> resized[0][0].shape
    (8, 8, 3)
    >>> sorted(ds.read_raw(0))
    ['jpg', 'json', 'txt']
    >>> tmp.cleanup()
    """

    def __init__(self, path: PathLike, id_col: str, *, use_index: bool = True) -> None:
        check_str(id_col, 'id_col')
        self.path = os.path.abspath(os.fspath(path))
        self.id_col = id_col
        # between commits: one a killed run left half done is settled first
        with reading(self.path):
            stems, indexed = find_shards(self.path)
            self._shards = [Shard(self.path, stem, use_index and stem in indexed)
                            for stem in stems]
            self._open_metadata()  # counts each shard's records, which the reader needs
        super().__init__(self._shards, RecordReader(self._shards, id_col))

    @classmethod
    def from_webdataset(cls, path: PathLike, id_col: str, *, use_index: bool = True) -> Self:
        """Open the dataset in directory ``path``.

        In data-parallel training every rank opens the whole dataset (opening reads only
        the parquet footers, records are read as they are used) and takes its part with a
        sampler: ``ShardWindowSampler(ds, num_parts=..., part_index=...)``, or a
        ``SplitSampler`` (see :mod:`gluonbatch.samplers.ranks`).

        Parameters
        ----------
        path : str or os.PathLike
            Directory of ``NNNNN.tar`` shards, each with its ``NNNNN.parquet`` and
            optionally ``NNNNN.idx``.
        id_col : str
            The parquet column holding the record ids (string ids, e.g. ``'key'``).
        use_index : bool, default True
            Use the ``.idx`` files present. Without one (or with ``False``) a shard's tar
            headers are scanned once, when the shard is first used (one of its records
            read, or its metadata checked against them); no file is written either way.

        Raises
        ------
        FileNotFoundError
            No such directory, no shards, or a tar without its parquet (or the reverse).
        ValueError
            A parquet file that cannot be read, or has no ``id_col``.

        Notes
        -----
        Each shard's other errors are raised when it is first used, each naming the file
        and record. Computing its metadata reads only its parquet: ``TypeError`` for ids
        that are not strings, ``ValueError`` for repeated ids or columns unlike the first
        shard's. Reading one of its records (``ds[i]``, an embedder, ``to_webdataset``)
        also reads its tar or index: ``ValueError`` for ids or records that do not match
        between the parquet and the tar, a truncated or corrupt tar, an index that does not
        match its tar, or member names with path components. Ids are not compared across
        shards.

        Examples
        --------
        Two ranks, each with the whole dataset and its part of an epoch:

        >>> import tempfile
        >>> from gluonbatch.curation import make_example_dataset
        >>> from gluonbatch.samplers import ShardWindowSampler
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = make_example_dataset(tmp, num_shards=3, samples_per_shard=2)
        ...     ds = ImageTextPairDataset.from_webdataset(path, 'key')
        ...     parts = [list(ShardWindowSampler(ds, seed=0, num_parts=2, part_index=rank))
        ...              for rank in (0, 1)]
        >>> len(ds), [len(part) for part in parts], sorted(parts[0] + parts[1])
        (6, [3, 3], [0, 1, 2, 3, 4, 5])
        """
        return cls(path, id_col, use_index=use_index)

    # ---------------------------------------------------------------- properties

    def __repr__(self):
        return ('%s(%r, id_col=%r, shards=%d, records=%d)'
                % (type(self).__name__, self.path, self.id_col, len(self._shards), len(self)))

    def __getitem__(self, idx: int) -> tuple[NDArray, str, dict[str, Any]]:
        return self._reader.record(self._index(idx))

    # ---------------------------------------------------------------- writing

    def _open_metadata(self):
        """The lazy metadata of the shards' parquet files, and its id column as opened
        (kept apart: assigning to ``metadata`` changes that frame, not this column)."""
        self.metadata = lazy_metadata(self._shards, self.id_col,
                                      count_records(self._shards, self.id_col))
        self._opened_ids = self.metadata[self.id_col]

    def _checked_metadata(self):
        return checked_metadata(self.metadata, self.id_col, self._shards, self.path)

    def save_metadata(self, path: PathLike | None = None,
                      columns: str | Sequence[str] | None = None, *,
                      drop_other_columns: bool = False) -> list[str]:
        """Write the metadata back as one parquet per shard, with the shards' file names.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Directory to write into (created if needed). By default the dataset's own
            directory. The files are written into a hidden directory first and moved over
            the old ones only when every shard is written, in one journaled commit: a
            failure (rows that no longer match a shard, say) changes no file, and a kill
            during the moves is finished by the next read or write of the directory.
        columns : list of str, optional
            Save only these columns (the id column is always saved). Into the dataset's own
            directory they are put into its parquet files: a column the files have is
            replaced where it stands, a new one added at the end, and the files' other
            columns are kept as they are (values, types, row order). Into another directory
            the files hold only these columns (NeMo Curator's "save a subset"), the id
            first if not listed. By default every column of :attr:`metadata` is written.
        drop_other_columns : bool, default False
            With ``columns``, into the dataset's own directory: write only ``columns``, as
            into another directory, and drop the files' other columns.

        Returns
        -------
        list of str
            The parquet files written.

        Examples
        --------
        Save a new column into the dataset's own files; the other columns stay:

        >>> import tempfile
        >>> from gluonbatch.curation import make_example_dataset
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = make_example_dataset(tmp.name, num_shards=2)
        >>> ds = ImageTextPairDataset.from_webdataset(path, 'key')
        >>> ds.metadata['long'] = ds.metadata['caption'].str.len() > 12
        >>> [p[-13:] for p in ds.save_metadata(columns=['long'])]
        ['00000.parquet', '00001.parquet']
        >>> list(ImageTextPairDataset.from_webdataset(path, 'key').metadata.columns)
        ['key', 'caption', 'width', 'height', 'url', 'long']
        >>> list(ds.metadata.columns)  # the dataset reads the files it wrote from now on
        ['key', 'caption', 'width', 'height', 'url', 'long']

        Elsewhere, or with ``drop_other_columns=True``, only the columns listed are written:

        >>> import os
        >>> _ = ds.save_metadata(os.path.join(tmp.name, 'scores'), columns=['long'])
        >>> list(ImageTextPairDataset.from_webdataset(path, 'key').metadata.columns)
        ['key', 'caption', 'width', 'height', 'url', 'long']
        >>> _ = ds.save_metadata(columns=['long'], drop_other_columns=True)
        >>> list(ds.metadata.columns)
        ['key', 'long']
        >>> tmp.cleanup()
        """
        if not isinstance(drop_other_columns, bool):
            raise TypeError('drop_other_columns must be a bool, got %s'
                            % type(drop_other_columns).__name__)
        own = path is None or os.path.realpath(path) == os.path.realpath(self.path)
        written = save_metadata(self._checked_metadata(), self._opened_ids, self.id_col,
                                self._shards, self.path if path is None else path, columns,
                                merge=own and not drop_other_columns)
        if own:
            self._open_metadata()  # the files just written are the metadata from now on
        return written

    def to_webdataset(self, path: PathLike, filter_column: str | None,
                      samples_per_shard: int = 10000, max_shards: int = 5,
                      old_id_col: str | None = None) -> list[str]:
        """Write the records whose ``filter_column`` is True as a new, renumbered dataset.

        Record ``s`` of new shard ``k`` gets id ``s + 10**d * k`` zero-padded to
        ``max_shards + d`` digits, where ``d = ceil(log10(samples_per_shard))``; its members
        are renamed ``<new id>.<ext>`` and its ``.json`` member gets the new id in ``id_col``
        (and the old one in ``old_id_col``), so the JSON, the parquet and the member names
        agree; the other members are copied byte for byte. Each shard is written as
        ``NNNNN.tar`` (``max_shards`` digits), ``NNNNN.parquet`` (the metadata, id column
        renumbered) and ``NNNNN.idx``, one Dask task per shard, all or nothing
        (:mod:`~gluonbatch.shards.commit`): a failed or killed run can simply be run again.
        How the metadata is computed once and the records copied:
        :mod:`~gluonbatch.curation.reshard`. A detection dataset's ``detection.json`` comes
        along, listing the new shards (:meth:`.DetectionShards.to_webdataset`).

        Parameters
        ----------
        path : str or os.PathLike
            Destination directory (created if needed). It may not be the source directory,
            nor hold shard files already.
        filter_column : str or None
            A bool column of :attr:`metadata` (columns added in memory count); None keeps
            every record.
        samples_per_shard : int, default 10000
        max_shards : int, default 5
            Digits of the shard number; more than ``10**max_shards`` shards is an error,
            raised before anything is written.
        old_id_col : str, optional
            Keep each record's previous id in this new column.

        Returns
        -------
        list of str
            The tar files written, in order; empty (and nothing written, the directory not
            even created) when no record is kept.

        Examples
        --------
        >>> import os, tempfile
        >>> from gluonbatch.curation import make_example_dataset
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ds = ImageTextPairDataset.from_webdataset(
        ...     make_example_dataset(os.path.join(tmp.name, 'source'), num_shards=2), 'key')
        >>> ds.metadata['keep'] = ~ds.metadata['key'].isin(['000001', '000012'])
        >>> out = os.path.join(tmp.name, 'kept')
        >>> [p[-9:] for p in ds.to_webdataset(out, 'keep', samples_per_shard=3,
        ...                                   old_id_col='old_key')]
        ['00000.tar', '00001.tar']
        >>> new = ImageTextPairDataset.from_webdataset(out, 'key')
        >>> new.metadata[['key', 'old_key']].compute().values.tolist()
        [['000000', '000000'], ['000001', '000002'], ['000002', '000010'], ['000010', '000011']]
        >>> tmp.cleanup()
        """
        return reshard(self._checked_metadata(), self._shards, self._reader,
                       self.path, self.id_col, path, filter_column, samples_per_shard,
                       max_shards, old_id_col)
