"""Random access to the records of a dataset's shards: :class:`RecordReader`."""
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core.process import BoundedCache, file_identity
from .._core.typing import NDArray, PathLike
from .._core.wording import plural
from .decode import decode_record
from .files import Shard
from .index import index_disagreement
from .manifest import VERIFY_HINT
from .record_lookup import IndexLookup
from .records import ShardRecords
from .tar import check_headers

__all__ = ['RecordReader', 'TarFiles', 'shard_records', 'header_mismatch',
           'LOOKUPS_PER_SHARD']

#: Reads of a shard served by lookup before its whole table is read: a table costs about
#: as much as 150 lookups (13 ms against 90 µs for 10,000 records), and makes every later
#: read cheaper.
LOOKUPS_PER_SHARD = 256

# Shards' records by file identity, for every reader in this process: a Dask task unpickles
# its own reader, and would otherwise read its shards' indexes again. About 1.5 MB per
# 10,000 records.
_RECORDS = BoundedCache(512 << 20, lambda records: sum(
    array.nbytes for array in (records.ids, records.members, records.starts, records.spans,
                               records.slots, records.verified)))


def header_mismatch(shard: Shard, found: tuple[str, int, int, str]) -> ValueError:
    """The ValueError for a member of ``shard`` whose tar header is not what its index (or
    the scan of its tar) said: ``found`` is :func:`~gluonbatch.shards.tar.check_headers`'s
    ``(name, data offset, size, problem)``."""
    source = ('its index %s does not match it' % shard.idx if shard.idx
              else 'it changed after the dataset was opened')
    problem = ('%s: expected member %s at byte %d (%d bytes) but %s; %s'
               % (shard.tar, *found, source))
    # with an index: the tar damaged, or the index stale?
    return index_disagreement(shard.idx, shard.tar, problem) if shard.idx else \
        ValueError(problem)


def _identity(shard, id_col):
    return (id_col,) + tuple(file_identity(path) if path else None
                             for path in (shard.tar, shard.idx, shard.parquet))


def shard_records(shard: Shard, id_col: str) -> ShardRecords:
    """``shard``'s :class:`~gluonbatch.shards.records.ShardRecords`, read once per
    process while its files stay the same (same path, size, inode, modification and change
    times)."""
    return _RECORDS.get(_identity(shard, id_col), lambda: ShardRecords(shard, id_col))


def _close_all(descriptors):
    """Close every descriptor of ``descriptors`` (``{path: fd}``), emptying it."""
    while descriptors:
        try:
            _, fd = descriptors.popitem()
        except KeyError:  # another thread emptied it meanwhile
            break
        os.close(fd)


class TarFiles:
    """Read-only descriptors of tar files, opened on first use, one set per process.

    Raw descriptors (``os.open``), closed by :meth:`close`, or when the object is garbage
    collected or the interpreter exits (a finalizer, so no ``ResourceWarning``). A forked
    child does not read through its parent's descriptors: on its first use it closes its
    copies of them and opens its own.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as tar:
    ...     files = TarFiles()
    ...     fd = files.fd(tar.name)
    ...     print(files.fd(tar.name) == fd, files.open_paths() == [tar.name])
    ...     files.close()
    ...     print(files.open_paths())
    True True
    []
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._renew()

    def _renew(self):
        self._pid = os.getpid()
        self._descriptors = {}
        self._finalizer = weakref.finalize(self, _close_all, self._descriptors)

    def _current(self):
        """This process's ``{path: fd}``."""
        if self._pid != os.getpid():
            with self._lock:
                if self._pid != os.getpid():
                    self._finalizer()  # the copies this child inherited
                    self._renew()
        return self._descriptors

    def fd(self, path: PathLike) -> int:
        """The descriptor of ``path`` in this process, opened now if it is not open."""
        descriptors = self._current()
        fd = descriptors.get(path)
        if fd is None:
            opened = os.open(path, os.O_RDONLY)
            with self._lock:
                fd = descriptors.setdefault(path, opened)
            if fd != opened:  # another thread opened it first
                os.close(opened)
        return fd

    def open_paths(self) -> list[str]:
        """The paths open in this process, sorted."""
        return sorted(self._current())

    def close(self) -> None:
        """Close every descriptor this process opened; the next :meth:`fd` opens again."""
        descriptors = self._current()
        with self._lock:
            _close_all(descriptors)


class RecordReader:
    """Reads record ``i`` of a list of shards: its members' bytes, checked on the way.

    A shard with an ``.idx`` serves its first reads by lookup
    (:class:`~gluonbatch.shards.record_lookup.IndexLookup`: its ids and index bytes
    read, each record's line found on its own), and reads its whole table
    (:class:`~gluonbatch.shards.records.ShardRecords`) after
    :data:`LOOKUPS_PER_SHARD` reads, when a lookup is not certain, or when asked for it
    (:meth:`records`, :meth:`shard_ids`); a shard without one reads its table on its first
    read. Either way the first and last record's tar headers are checked on the shard's
    first read, so an index for another tar fails there and not mid-epoch, and each
    record's headers are checked on its first read. Checks across a shard's records (every
    parquet id in the index, no record listed twice) are the table's: with lookups, a
    record that is not where the index and parquet agree it is fails when read.

    Tables are kept per process (a forked DataLoader worker inherits those its parent read;
    a pickled copy reads them again where it is used). File handles are opened on first
    use, per process.

    Parameters
    ----------
    shards : list of Shard
        With ``start`` and ``stop`` set (their records in the dataset).
    id_col : str
    lookups : bool, default True
        Serve a shard's first reads by lookup. Without, a shard's table is read on its
        first read: the cheaper choice when most of a shard's records will be read (a
        training epoch), each later read then costs a ``pread`` and little else.
    """

    def __init__(self, shards: Sequence[Shard], id_col: str, lookups: bool = True) -> None:
        self.shards, self.id_col, self.lookups = shards, id_col, bool(lookups)
        self._starts = np.array([shard.start for shard in shards], dtype=np.int64)
        self._numbers = {shard.stem: number for number, shard in enumerate(shards)}
        self._records: dict[int, ShardRecords] = {}
        # shard number -> IndexLookup, or False where one cannot serve
        self._lookups: dict[int, IndexLookup | bool] = {}
        self._files = TarFiles()

    def __len__(self) -> int:
        return self.shards[-1].stop if self.shards else 0

    # ---------------------------------------------------------------- file handles

    def fd(self, shard: Shard) -> int:
        """This process's read-only descriptor of ``shard``'s tar, opened on first use.

        The descriptors are per process: a forked DataLoader worker opens its own rather
        than sharing its parent's.
        """
        return self._files.fd(shard.tar)

    def open_files(self) -> list[str]:
        """The tar files this reader holds open in this process, sorted."""
        return self._files.open_paths()

    def close(self) -> None:
        """Close this process's tar files (they reopen on the next read). Close when no
        read of this reader is under way (in another thread, say)."""
        self._files.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state['_files']  # open files: the copy opens its own
        state['_records'], state['_lookups'] = {}, {}  # read again where the copy is used
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._files = TarFiles()

    # ---------------------------------------------------------------- reading

    def shard_ids(self, shard: Shard) -> np.ndarray:
        """The record ids of ``shard`` (one of ``shards``, or a copy of one; it may be
        empty), in record order."""
        return self.records(shard).ids

    def records(self, shard: Shard) -> ShardRecords:
        """The :class:`~gluonbatch.shards.records.ShardRecords` of ``shard`` (one of
        ``shards``, or a copy of one)."""
        return self._shard_records(self._numbers[shard.stem])

    def locate(self, i: int) -> tuple[int, ShardRecords, int]:
        """``(shard number, records, record i's row in them)``: the records are the
        shard's :class:`~gluonbatch.shards.records.ShardRecords`, or one holding
        record ``i`` alone (found by lookup)."""
        # side='right': an empty shard starts where the next one does, and holds no record
        number = int(np.searchsorted(self._starts, i, side='right')) - 1
        row = i - self.shards[number].start
        records = self._records.get(number)
        if records is None:
            found = self._looked_up(number, row)
            if found is not None:
                return number, found, 0
            records = self._shard_records(number)
        return number, records, row

    def _looked_up(self, number, row):
        """Record ``row`` of shard ``number`` by lookup, or None where its table is read."""
        if not self.lookups:
            return None
        lookup = self._lookups.get(number)
        if lookup is None:
            lookup = self._lookups.setdefault(number, self._new_lookup(number))
        if not lookup or lookup.reads >= LOOKUPS_PER_SHARD:
            return None
        lookup.reads += 1
        return lookup.record(row)

    def _new_lookup(self, number):
        """Shard ``number``'s IndexLookup with its first and last record checked, or False:
        no ``.idx``, the table already read in this process, a lookup not certain."""
        shard = self.shards[number]
        if not shard.idx or _RECORDS.peek(_identity(shard, self.id_col)) is not None:
            return False
        lookup = IndexLookup(shard, self.id_col)
        for row in (0, shard.stop - shard.start - 1):
            records = lookup.record(row)
            if records is None:
                return False
            try:
                self._read_shard_members(shard, records, 0)
            except ValueError:
                return False  # the table's reading says what is wrong
        return lookup

    def _shard_records(self, number):
        """Shard ``number``'s :class:`ShardRecords`, read on first use in this process."""
        records = self._records.get(number)
        if records is None:
            shard = self.shards[number]
            try:
                records = shard_records(shard, self.id_col)
            except FileNotFoundError as err:
                raise FileNotFoundError(
                    '%s is missing, but the dataset has shard %s: it is incomplete; %s'
                    % (err.filename, shard.stem, VERIFY_HINT % os.path.dirname(shard.tar))
                ) from None
            if len(records.ids) != shard.stop - shard.start:
                # the dataset was counted from files that disagree with this shard's (a
                # manifest, or the parquet as it was when the dataset was opened)
                raise ValueError('%s holds %s, but the dataset counted %d for it: its files '
                                 'changed or disagree; %s' % (
                                     shard.parquet, plural(len(records.ids), 'record'),
                                     shard.stop - shard.start,
                                     VERIFY_HINT % os.path.dirname(shard.tar)))
            records = self._records.setdefault(number, records)
            self._lookups[number] = False  # its index bytes and ids are not needed now
            if shard.idx and len(records.ids):
                for row in (0, len(records.ids) - 1):
                    self._read_shard_members(shard, records, row)
        return records

    def tables_read(self) -> list[int]:
        """The numbers of the shards whose whole table this reader holds (the others are
        served by lookup, or not read yet).

        >>> import tempfile
        >>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     ds = ImageTextPairDataset.from_webdataset(
        ...         make_example_dataset(tmp, num_shards=2, index=True), 'key')
        ...     _ = ds.read_raw(4)  # by lookup
        ...     _ = ds.reader.shard_ids(ds.reader.shards[0])
        ...     print(ds.reader.tables_read())
        [0]
        """
        return sorted(self._records)

    def describe(self, i: int, member: str | None = None) -> str:
        number, records, row = self.locate(i)
        what = 'member %s of record %r' % (member, records.ids[row]) if member else \
            'record %r' % records.ids[row]
        return '%s (index %d) in %s' % (what, i, self.shards[number].tar)

    def read_members(self, i: int) -> list[tuple[str, bytes]]:
        """``[(ext, bytes), ...]``: every member of record ``i``, in tar order."""
        return self._read(i)[2]

    def _read(self, i):
        """``(records, row, members)`` of record ``i``; a looked-up record whose headers
        do not match is read again from the shard's table, which raises if they really
        do not."""
        number, records, row = self.locate(i)
        shard = self.shards[number]
        try:
            return records, row, self._read_shard_members(shard, records, row)
        except ValueError:
            if records is self._records.get(number):
                raise
        records, row = self._shard_records(number), i - shard.start
        return records, row, self._read_shard_members(shard, records, row)

    def _read_shard_members(self, shard, records, row):
        """The members of record ``row`` of ``shard``.

        One ``pread`` of the record's span when its members are adjacent (the usual case),
        else one per member. The first time a process reads the record, each member's tar
        headers, read along with it, are checked against its name, offset and size.
        """
        fd = self.fd(shard)
        rows = records.members[records.starts[row]:records.starts[row + 1]].tolist()
        start, length = records.spans[row].tolist()
        if length >= 0:
            reads = [(start, length, rows)]
        else:
            # row: (data offset, size, extension code, header start)
            reads = [(member[3], member[0] + member[1] - member[3], [member])
                     for member in rows]
        keys, members = records.keys, []
        for start, length, read_rows in reads:
            buf = os.pread(fd, length, start)
            if len(buf) != length:
                raise ValueError('%s ends before the bytes of record %r: the tar was '
                                 'truncated after the dataset was opened'
                                 % (shard.tar, records.ids[row]))
            if not records.verified[row]:
                self._verify(shard, records, row, buf, start, read_rows)
            members += [(keys[code], buf[offset - start:offset - start + size])
                        for offset, size, code, _ in read_rows]
        records.verified[row] = True
        return members

    @staticmethod
    def _verify(shard, records, row, buf, start, rows):
        """Check the tar headers of the members ``rows`` of a record in ``buf``."""
        key = records.ids[row]
        mismatch = check_headers(buf, start, [('%s.%s' % (key, records.exts[code]), offset,
                                               size) for offset, size, code, _ in rows])
        if mismatch:
            raise header_mismatch(shard, mismatch)

    def __getitem__(self, i: int) -> tuple[NDArray, str, dict[str, Any]]:
        return self.record(i)

    def record(self, i: int) -> tuple[NDArray, str, dict[str, Any]]:
        """``(image, caption, metadata)``: record ``i`` (0 <= i < len) decoded."""
        records, row, members = self._read(i)
        return decode_record(members, records.slots[row].tolist(), records.ids[row],
                             lambda member=None: self.describe(i, member))
