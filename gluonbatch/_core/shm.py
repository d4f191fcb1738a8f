"""Shared memory that fails safely: the free-space check, the page reservation, and the
names a dead process left.

MXNet sizes a file in ``/dev/shm`` for every ``cpu_shared`` array even when the tmpfs has no
room for it, and the first write past the free space kills the process with SIGBUS. Each
fresh shared allocation is therefore checked against the free space and its pages reserved
(``posix_fallocate``), so a batch that does not fit raises ``SharedMemoryError``.

MXNet names the file ``mx_<pid>_<id>`` (both in hex) and removes the name as soon as the
file is made; from then on only descriptors and mappings hold it. A process killed between
the two leaves the name, and the file's memory, for good: :func:`remove_names_left_by`
removes them once the process is dead. (A ``/dev/shm`` shared with another pid namespace, a
container's started with ``--ipc=host``, may hold names of a process there with the same
pid, which MXNet's naming cannot tell apart; only this user's files are removed.)

Examples
--------
>>> import numpy as np
>>> fresh_shared((2, 3), np.dtype('float32')).context
cpu_shared(0)
"""
import errno
import os

import mxnet as mx
import numpy as np

from .native import SHARED_CONTEXT

__all__ = ['SharedMemoryError', 'SHM_MOUNT', 'check_room', 'reserve', 'fresh_shared',
           'remove_names_left_by']

#: The tmpfs MXNet creates shared arrays in.
SHM_MOUNT = '/dev/shm'
_MiB = 1 << 20


class SharedMemoryError(MemoryError):
    """A batch does not fit in the free shared memory (``/dev/shm``)."""


def _explain(nbytes, free, total):
    return ('cannot allocate %.1f MiB of shared memory for a batch: %s has %.1f MiB free of '
            '%.1f MiB. Remedies: give the container more shared memory (docker run '
            '--shm-size=2g), use fewer DataLoader workers or a smaller batch, use '
            'thread_pool=True, or gluonbatch.set_memory(\'auto\') (GLUONBATCH_MEMORY=auto) so '
            'that the main process batches into ordinary memory'
            % (nbytes / _MiB, SHM_MOUNT, free / _MiB, total / _MiB))


def check_room(nbytes):
    """Raise SharedMemoryError unless ``/dev/shm`` has ``nbytes`` free plus a margin.

    The margin, the larger of 1 MiB and 1% of the mount, leaves room for the interpreter,
    MXNet and other processes. Arrays gluonbatch allocated before have reserved their pages,
    so the other outputs of the same batch are already counted in the free space.
    """
    stats = os.statvfs(SHM_MOUNT)
    free, total = stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize
    if nbytes + max(_MiB, total // 100) > free:
        raise SharedMemoryError(_explain(nbytes, free, total))


def reserve(array):
    """Allocate the pages of a fresh ``cpu_shared`` array now, or raise SharedMemoryError.

    Without this, a tmpfs that runs out of room kills the process with SIGBUS on the first
    write; ``posix_fallocate`` fails with ENOSPC instead.
    """
    _, fd, _, _ = array._to_shared_mem()
    size = os.fstat(fd).st_size
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as err:
        if err.errno != errno.ENOSPC:
            raise
        stats = os.statvfs(SHM_MOUNT)
        raise SharedMemoryError(_explain(size, stats.f_bavail * stats.f_frsize,
                                         stats.f_blocks * stats.f_frsize)) from None


def fresh_shared(shape, dtype):
    """A new, unwritten ``cpu_shared`` array whose pages are reserved; SharedMemoryError if
    ``/dev/shm`` has no room for it."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes:
        check_room(nbytes)
    out = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    if nbytes:
        reserve(out)
    return out


def remove_names_left_by(pid: int) -> list[str]:
    """Remove the ``/dev/shm`` names of this user's files that MXNet's process ``pid`` left
    half-made; the names removed.

    Call it only once ``pid`` is dead and not yet reaped: a live process may be between
    making a name and removing it, and a reaped one's pid may be another process's already.
    A name that cannot be removed is left.

    >>> remove_names_left_by(2 ** 40)  # no process has that id
    []
    """
    prefix = 'mx_%x_' % pid
    try:
        names = [name for name in os.listdir(SHM_MOUNT) if name.startswith(prefix)]
    except OSError:  # no such mount here
        return []
    removed = []
    for name in names:
        path = os.path.join(SHM_MOUNT, name)
        try:
            if os.lstat(path).st_uid == os.getuid():
                os.unlink(path)
                removed.append(name)
        except OSError:  # gone meanwhile, or not ours to remove
            pass
    return removed
