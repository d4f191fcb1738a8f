"""Writing shards: :class:`ShardWriter` writes one shard's tar, index and parquet under
temporary names, and :func:`commit_shards` moves a run's shards into place together
(:mod:`~gluonbatch.shards.commit`: all at once or not at all)."""
import concurrent.futures
import os
import tarfile
from collections.abc import Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from .._core.checks import described
from .._core.typing import PathLike
from .commit import CommitMode, Stage
from .files import remove_quietly, temporary_name
from .index import index_line, index_text
from .tar import BLOCK, member_header, padded

__all__ = ['ShardWriter', 'commit_shards', 'shard_moves', 'id_digits', 'record_key']


def id_digits(samples_per_shard: int) -> int:
    """Digits of the record part of an id: ``ceil(log10(samples_per_shard))``, exactly.

    >>> [id_digits(n) for n in (1, 9, 10, 11, 10000, 10001)]
    [0, 1, 1, 2, 4, 5]
    """
    return len(str(samples_per_shard - 1)) if samples_per_shard > 1 else 0


def record_key(shard: int, position: int, digits: int, shard_digits: int = 5) -> str:
    """The id of record ``position`` of shard ``shard``: the shard's number followed by the
    position in ``digits`` digits (:func:`id_digits`), zero-padded.

    >>> record_key(42, 31, 4)
    '000420031'
    """
    return '%0*d' % (shard_digits + digits, position + 10 ** digits * shard)


class ShardWriter:
    """Writes one shard: ``.NNNNN.tar.tmp`` etc. in a run's staging directory, moved into
    place with the run's other shards by :func:`commit_shards`.

    The tar is POSIX (ustar headers by ``TarInfo.tobuf``, with pax headers only for a
    member that needs them), written directly: the headers, the data and zero padding per
    member; two zero blocks and padding to a 10240-byte record at the end. Records come one
    at a time (:meth:`add`) or in bulk from another shard
    (:class:`~gluonbatch.shards.copier.RecordCopier`, through :meth:`write_segments` and
    :meth:`add_index_text`).
    """

    def __init__(self, directory: PathLike, stem: str, mtime: int) -> None:
        # the temporary names that commit_shards moves from
        self.tmp = {ext: os.path.join(directory, temporary)
                    for ext, (temporary, _) in zip(_SHARD_EXTS, shard_moves(stem))}
        self.mtime = mtime
        self.index_parts: list[str] = []
        self.samples = 0
        self.position = 0
        self.handle = open(self.tmp['tar'], 'wb')
        # write_segments' thread and its write
        self._thread: concurrent.futures.ThreadPoolExecutor | None = None
        self._writing: concurrent.futures.Future[None] | None = None

    def add(self, key: str, members: Iterable[tuple[str, bytes]]) -> None:
        """Append one record: ``members`` is ``[(ext, bytes), ...]``."""
        self.wait()
        files = []
        write = self.handle.write
        for ext, data in members:
            size = len(data)
            header = member_header('%s.%s' % (key, ext), size, self.mtime)
            write(header)
            write(data)
            write(bytes(padded(size) - size))
            files.append((ext, self.position + len(header), size))
            self.position += len(header) + padded(size)
        self.add_index_text(index_line(key, files) + '\n', 1)

    def write_segments(self, segments: Sequence[bytes | memoryview]) -> None:
        """Append ``segments`` (bytes-like, whole 512-byte blocks) to the tar, many per
        system call, on the writer's own thread: the caller goes on with its next batch
        while these bytes are written.

        At most one such write is in flight: this waits for the one before (and raises its
        error, if it failed) before it starts. So the memory of the segments given to the
        call before last may be reused once this returns.
        """
        self.wait()
        self.handle.flush()
        if self._thread is None:
            self._thread = concurrent.futures.ThreadPoolExecutor(1)
        self._writing = self._thread.submit(_write_all, self.handle.fileno(), segments)
        self.position += sum(map(len, segments))

    def wait(self) -> None:
        """Wait for the write :meth:`write_segments` started, raising its error if it
        failed.

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     writer = ShardWriter(tmp, '00000', 0)
        ...     writer.write_segments([bytes(BLOCK)])
        ...     writer.wait()
        ...     print(os.path.getsize(writer.tmp['tar']))
        ...     writer.abort()
        512
        """
        writing, self._writing = self._writing, None
        if writing is not None:
            writing.result()

    def add_index_text(self, text: str, samples: int) -> None:
        """Add the ``.idx`` lines of ``samples`` records (each line ending in a newline)."""
        self.index_parts.append(text)
        self.samples += samples

    def finish(self, metadata: pa.Table) -> None:
        """Close the tar, write the index and ``metadata`` (a ``pyarrow.Table``, one row per
        record) as the parquet, all under their temporary names (:func:`commit_shards` moves
        them)."""
        if not isinstance(metadata, pa.Table):
            raise TypeError('metadata must be a pyarrow.Table, got %s' % described(metadata))
        self.wait()
        self._stop_thread()
        end = self.position + 2 * BLOCK
        record = tarfile.RECORDSIZE
        self.handle.write(bytes(2 * BLOCK + (-end) % record))
        self.handle.close()
        with open(self.tmp['idx'], 'w', encoding='utf-8') as handle:
            handle.write(index_text(self.samples, ''.join(self.index_parts)))
        pq.write_table(metadata, self.tmp['parquet'])

    def abort(self) -> None:
        """Remove whatever temporary file is left."""
        try:
            self.wait()
        except Exception:  # the run is failing already, with its own error; the files go
            pass
        finally:
            self._stop_thread()
            self.handle.close()
        for tmp in self.tmp.values():
            remove_quietly(tmp)

    def _stop_thread(self):
        if self._thread is not None:
            self._thread.shutdown()
            self._thread = None


def _write_all(fd, segments):
    """Write ``segments`` to ``fd``, many per ``writev``, to the last byte."""
    for first in range(0, len(segments), _IOV_MAX):
        batch = segments[first:first + _IOV_MAX]
        total = sum(map(len, batch))
        written = os.writev(fd, batch)
        if written < total:  # a short write (interrupted): write the rest
            rest = memoryview(b''.join(batch))
            while written < total:
                written += os.write(fd, rest[written:])


# segments a writev takes (POSIX promises 16; -1 means no fixed limit)
_IOV_MAX = os.sysconf('SC_IOV_MAX') if os.sysconf('SC_IOV_MAX') > 0 else 1024
_SHARD_EXTS = ('tar', 'idx', 'parquet')  # the order they are moved in: the tar first


def shard_moves(stem: str, index: bool = True) -> list[tuple[str, str]]:
    """``(temporary name, final name)`` of a finished shard's files, in the order they are
    moved: the tar first.

    Parameters
    ----------
    stem : str
        The shard's number, e.g. ``'00001'``.
    index : bool, default True
        Include the ``.idx``.

    >>> shard_moves('00001')[0]
    ('.00001.tar.tmp', '00001.tar')
    """
    names = ['%s.%s' % (stem, ext) for ext in _SHARD_EXTS if index or ext != 'idx']
    return [(os.path.basename(temporary_name(name)), name) for name in names]


def commit_shards(stage: Stage, stems: Sequence[str], mode: CommitMode,
                  index: bool = True, last: Sequence[tuple[str, str]] = ()) -> list[str]:
    """Move the shards ``stems``, written by :class:`ShardWriter` into ``stage`` (a
    :class:`~gluonbatch.shards.commit.Stage`), into place together, then the files of
    ``last`` (``(staged name, final name)``: the dataset's manifest, which a reader must
    find only beside every shard); ``mode`` and the guarantee are
    :meth:`~gluonbatch.shards.commit.Stage.commit`'s. Returns the tars' paths."""
    stage.commit([move for stem in stems for move in shard_moves(stem, index)] + list(last),
                 mode)
    return [os.path.join(stage.directory, stem + '.tar') for stem in stems]
