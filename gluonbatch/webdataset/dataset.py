"""The dataset: :class:`ImageTextPairDataset`, random access to a sharded image-text dataset."""
import logging
import os
import warnings

import mxnet as mx
import numpy as np
import pandas as pd

from .._core.checks import check_int
from .._core.process import ProcessLocal
from .decode import decode_record
from .records import read_records, record_spans
from .shards import Shard, find_shards, part_arguments, select_part
from .tar import check_headers
from .writer import reshard, save_metadata

__all__ = ['ImageTextPairDataset']

_LOG = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the dataset

class ImageTextPairDataset(mx.gluon.data.Dataset):
    """Random access to a sharded image-text dataset: ``ds[i] -> (image, caption, metadata)``.

    Open one with :meth:`from_webdataset`. ``image`` is an ``mx.nd.NDArray`` (H, W, 3)
    uint8 (RGB, decoded by ``mx.image.imdecode``; WebP by Pillow), ``caption`` the
    ``.txt`` member as a ``str`` and ``metadata`` the ``.json`` member as a ``dict``.
    Member extensions are matched case-insensitively. Record ``i`` is row ``i`` of
    :attr:`metadata`: shards in numeric order, each shard's rows sorted by id.

    Reading a record reads only its bytes (usually one ``pread`` for all its members), and
    checks each member's tar header on the way, so a stale ``.idx`` cannot return another
    member's bytes. File handles are opened lazily, per process: DataLoader worker
    processes each open their own.

    Attributes
    ----------
    metadata : pandas.DataFrame
        One row per record, in record order. Columns added here are used by
        :meth:`to_webdataset` and saved by :meth:`save_metadata`; rows must stay as they are.
    path : str
        The dataset directory (absolute).
    id_col : str
        The id column of the parquet files.
    tar_files : list of str
        The tar of every shard of this dataset (of its part, with ``num_parts > 1``).
    num_parts, part_index : int
        This dataset is part ``part_index`` of ``num_parts`` (see :meth:`from_webdataset`).
        ``world_size`` and ``rank`` are deprecated aliases.

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.webdataset import make_example_dataset
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

    def __init__(self, path, id_col, *, num_parts=None, part_index=None, use_index=True,
                 rank=None, world_size=None):
        if not isinstance(id_col, str):
            raise TypeError('id_col must be a str, got %r' % (id_col,))
        self.num_parts, self.part_index = part_arguments(num_parts, part_index, rank,
                                                         world_size, stacklevel=2)
        self.path = os.path.abspath(os.fspath(path))
        self.id_col = id_col
        stems, indexed = find_shards(self.path)
        self._all_shards = len(stems)
        stems = select_part(stems, self.num_parts, self.part_index)
        if not stems:
            _LOG.warning('%s: part %d of %d gets no shard (the dataset has %d); its dataset '
                         'is empty', self.path, self.part_index, self.num_parts,
                         self._all_shards)
        self._shards = [Shard(self.path, stem, use_index and stem in indexed)
                        for stem in stems]
        self._handles = ProcessLocal(dict)

        self.metadata, table = read_records(self._shards, id_col)
        (self._members, self._starts, self._record_shard,
         self._slots) = table.arrays()
        self._spans = record_spans(self._members, self._starts)
        self._verified = np.zeros(len(self._record_shard), dtype=bool)
        self._exts = table.exts
        # the keys records are returned with: lower case, like the webdataset library's
        self._keys = [ext.lower() for ext in table.exts]
        self._ids = self.metadata[id_col].to_numpy(dtype=str)
        self._check_unique_ids()
        for shard in self._shards:  # an idx for another tar fails here, not mid-epoch
            if shard.idx and shard.stop > shard.start:
                self._read_members(shard.start)
                self._read_members(shard.stop - 1)

    @classmethod
    def from_webdataset(cls, path, id_col, *, num_parts=None, part_index=None, use_index=True,
                        rank=None, world_size=None):
        """Open the dataset in directory ``path``.

        Parameters
        ----------
        path : str or os.PathLike
            Directory of ``NNNNN.tar`` shards, each with its ``NNNNN.parquet`` and
            optionally ``NNNNN.idx``.
        id_col : str
            The parquet column holding the record ids (string ids, e.g. ``'key'``).
        num_parts, part_index : int, default 1 and 0
            Keep only the shards of part ``part_index`` of ``num_parts`` (one part per
            rank, as GluonNLP's and gluonbatch's ``SplitSampler`` spell it): shard ``k`` (in
            numeric order) belongs to part ``k % num_parts``. Parts are disjoint and
            together cover every shard; a part beyond the number of shards gets an empty
            dataset (and a log warning) rather than an error, so every rank can run the
            same code.
        use_index : bool, default True
            Use the ``.idx`` files present. Without one (or with ``False``) a shard's tar
            headers are scanned once here; no file is written either way.
        rank, world_size : int, optional
            Deprecated aliases of ``part_index`` and ``num_parts`` (a DeprecationWarning);
            giving both spellings of one is a TypeError.

        Raises
        ------
        FileNotFoundError
            No such directory, no shards, or a tar without its parquet (or the reverse).
        TypeError
            Ids that are not strings.
        ValueError
            Ids or records that do not match between a parquet and its tar, a truncated or
            corrupt tar, an index that does not match its tar, member names with path
            components; each names the file and record.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.webdataset import make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     path = make_example_dataset(tmp, num_shards=3, samples_per_shard=2)
        ...     print([len(ImageTextPairDataset.from_webdataset(path, 'key', num_parts=2,
        ...                                                     part_index=part))
        ...            for part in (0, 1)])
        [4, 2]
        """
        num_parts, part_index = part_arguments(num_parts, part_index, rank, world_size,
                                               stacklevel=2)
        return cls(path, id_col, num_parts=num_parts, part_index=part_index,
                   use_index=use_index)

    # ---------------------------------------------------------------- properties

    @property
    def tar_files(self):
        """The tar path of every shard of this dataset, in shard order."""
        return [shard.tar for shard in self._shards]

    def __len__(self):
        return len(self._record_shard)

    @property
    def rank(self):
        """Deprecated alias of :attr:`part_index`."""
        warnings.warn('rank is deprecated; use part_index', DeprecationWarning, stacklevel=2)
        return self.part_index

    @property
    def world_size(self):
        """Deprecated alias of :attr:`num_parts`."""
        warnings.warn('world_size is deprecated; use num_parts', DeprecationWarning,
                      stacklevel=2)
        return self.num_parts

    def __repr__(self):
        return ('%s(%r, id_col=%r, shards=%d, records=%d%s)'
                % (type(self).__name__, self.path, self.id_col, len(self._shards), len(self),
                   ', part_index=%d, num_parts=%d' % (self.part_index, self.num_parts)
                   if self.num_parts > 1 else ''))

    def _check_unique_ids(self):
        duplicated = self.metadata[self.id_col].duplicated()
        if duplicated.any():
            key = self.metadata[self.id_col][duplicated].iloc[0]
            shards = [shard.parquet for shard in self._shards
                      if key in set(self._ids[shard.start:shard.stop])]
            raise ValueError('record id %r is in more than one shard: %s' % (key, shards))

    # ---------------------------------------------------------------- file handles

    def _fd(self, shard):
        """This process's read-only descriptor of ``shard``'s tar, opened on first use.

        The handles are per process: a forked DataLoader worker opens its own rather than
        sharing its parent's.
        """
        handles = self._handles.get()
        handle = handles.get(shard.tar)
        if handle is None:
            opened = open(shard.tar, 'rb', buffering=0)
            handle = handles.setdefault(shard.tar, opened)
            if handle is not opened:  # another thread opened it first
                opened.close()
        return handle.fileno()

    def close(self):
        """Close this process's file handles (they reopen on the next read)."""
        handles = self._handles.get()
        while handles:
            handles.popitem()[1].close()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state['_handles']  # open files: the copy opens its own
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._handles = ProcessLocal(dict)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    # ---------------------------------------------------------------- reading

    def _index(self, idx):
        i = idx if type(idx) is int else check_int(idx, 'record index')  # int: the hot path
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError('record index %d out of range for %d records' % (idx, n))
        return i

    def _describe(self, i, member=None):
        shard = self._shards[self._record_shard[i]]
        what = 'member %s of record %r' % (member, self._ids[i]) if member else \
            'record %r' % self._ids[i]
        return '%s (index %d) in %s' % (what, i, shard.tar)

    def _read_members(self, i):
        """``[(ext, bytes), ...]``: every member of record ``i``, in tar order.

        One ``pread`` of the record's span when its members are adjacent (the usual case),
        else one per member. The first time a process reads the record, each member's tar
        headers, read along with it, are checked against its name, offset and size.
        """
        shard = self._shards[self._record_shard[i]]
        fd = self._fd(shard)
        rows = self._members[self._starts[i]:self._starts[i + 1]].tolist()
        start, length = self._spans[i].tolist()
        if length >= 0:
            reads = [(start, length, rows)]
        else:
            # row: (data offset, size, extension code, header start)
            reads = [(row[3], row[0] + row[1] - row[3], [row]) for row in rows]
        keys, members = self._keys, []
        for start, length, read_rows in reads:
            buf = os.pread(fd, length, start)
            if len(buf) != length:
                self._truncated(i, shard)
            if not self._verified[i]:
                self._verify(i, shard, buf, start, read_rows)
            members += [(keys[code], buf[offset - start:offset - start + size])
                        for offset, size, code, _ in read_rows]
        self._verified[i] = True
        return members

    def _truncated(self, i, shard):
        raise ValueError('%s ends before the bytes of %s: the tar was truncated after the '
                         'dataset was opened' % (shard.tar, self._describe(i)))

    def _verify(self, i, shard, buf, start, rows):
        """Check the tar headers of the members ``rows`` of record ``i`` in ``buf``."""
        key = self._ids[i]
        mismatch = check_headers(buf, start, [('%s.%s' % (key, self._exts[code]), offset, size)
                                              for offset, size, code, _ in rows])
        if mismatch:
            source = ('its index %s does not match it' % shard.idx if shard.idx
                      else 'it changed after the dataset was opened')
            raise ValueError('%s: expected member %s at byte %d (%d bytes) but %s; %s'
                             % ((shard.tar,) + mismatch + (source,)))

    def read_raw(self, idx):
        """The undecoded members of record ``idx`` as ``{extension: bytes}``.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.webdataset import make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     ds = ImageTextPairDataset.from_webdataset(
        ...         make_example_dataset(tmp, num_shards=1), 'key')
        ...     print(ds.read_raw(0)['jpg'][:2])
        b'\\xff\\xd8'
        """
        return dict(self._read_members(self._index(idx)))

    def __getitem__(self, idx):
        i = self._index(idx)
        members = self._read_members(i)
        return decode_record(members, self._slots[i].tolist(), self._ids[i],
                             lambda member=None: self._describe(i, member))

    # ---------------------------------------------------------------- writing

    def _checked_metadata(self):
        frame = self.metadata
        if not isinstance(frame, pd.DataFrame):
            raise TypeError('metadata must be a pandas DataFrame, got %s' % type(frame).__name__)
        if self.id_col not in frame.columns:
            raise ValueError('metadata lost its id column %r' % self.id_col)
        if len(frame) != len(self) or not np.array_equal(
                frame[self.id_col].to_numpy(dtype=str), self._ids):
            raise ValueError('metadata no longer matches the records of %s: rows were added, '
                             'removed or reordered, or ids changed (%d rows for %d records); '
                             'add columns, but keep the rows' % (self.path, len(frame),
                                                                 len(self)))
        return frame.reset_index(drop=True)

    def save_metadata(self, path=None, columns=None):
        """Write the metadata back as one parquet per shard, with the shards' file names.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Directory to write into (created if needed). By default the dataset's own
            directory, whose parquet files are then replaced atomically (each is written to
            a temporary name and renamed over the old one).
        columns : list of str, optional
            Save only these columns; the id column is always saved (first, if not listed).

        Returns
        -------
        list of str
            The parquet files written.

        Examples
        --------
        >>> import tempfile
        >>> from gluonbatch.webdataset import make_example_dataset
        >>> tmp = tempfile.TemporaryDirectory()
        >>> path = make_example_dataset(tmp.name, num_shards=2)
        >>> ds = ImageTextPairDataset.from_webdataset(path, 'key')
        >>> ds.metadata['long'] = ds.metadata['caption'].str.len() > 12
        >>> [p[-13:] for p in ds.save_metadata(columns=['long'])]
        ['00000.parquet', '00001.parquet']
        >>> list(ImageTextPairDataset.from_webdataset(path, 'key').metadata.columns)
        ['key', 'long']
        >>> tmp.cleanup()
        """
        return save_metadata(self._checked_metadata(), self.id_col, self._shards,
                             self.path if path is None else path, columns)

    def to_webdataset(self, path, filter_column, samples_per_shard=10000, max_shards=5,
                      old_id_col=None):
        """Write the records whose ``filter_column`` is True as a new, renumbered dataset.

        Record ``s`` of new shard ``k`` gets id ``s + 10**d * k`` zero-padded to
        ``max_shards + d`` digits, where ``d = ceil(log10(samples_per_shard))``; its members
        are renamed ``<new id>.<ext>`` and its ``.json`` member gets the new id in ``id_col``
        (and the old one in ``old_id_col``), so the JSON, the parquet and the member names
        agree; the other members are copied byte for byte. Each shard is written as ``NNNNN.tar`` (``max_shards``
        digits), ``NNNNN.parquet`` (the metadata, id column renumbered) and ``NNNNN.idx``,
        each to a temporary name (``.NNNNN.tar.tmp``) renamed when complete; the tar before
        the index and the parquet. Records are read and written one at a time, so memory is
        bounded by one output shard's metadata, not by the dataset.

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
        >>> from gluonbatch.webdataset import make_example_dataset
        >>> tmp = tempfile.TemporaryDirectory()
        >>> ds = ImageTextPairDataset.from_webdataset(
        ...     make_example_dataset(os.path.join(tmp.name, 'source'), num_shards=2), 'key')
        >>> ds.metadata['keep'] = [True, False, True, True, True, False]
        >>> out = os.path.join(tmp.name, 'kept')
        >>> [p[-9:] for p in ds.to_webdataset(out, 'keep', samples_per_shard=3,
        ...                                   old_id_col='old_key')]
        ['00000.tar', '00001.tar']
        >>> new = ImageTextPairDataset.from_webdataset(out, 'key')
        >>> new.metadata[['key', 'old_key']].values.tolist()
        [['000000', '000000'], ['000001', '000002'], ['000002', '000010'], ['000010', '000011']]
        >>> tmp.cleanup()
        """
        frame = self._checked_metadata()
        return reshard(frame, self._read_members, self.path, self.id_col, path,
                       filter_column, samples_per_shard, max_shards, old_id_col)
