"""The one place where gluonbatch allocates output memory.

Every batch gluonbatch returns is allocated here, by default in ``cpu_shared`` memory, so
that DataLoader worker processes hand batches to the main process by file descriptor (see
:mod:`gluonbatch.memory` for the other settings).

Outputs are allocated *without* being written (``mx.nd.empty``) and exposed as writable
numpy views, so each output byte is written exactly once by the combinators. In worker
processes, large outputs are views on recycled segments (:mod:`.recycle`).

MXNet sizes a file in ``/dev/shm`` for every shared array even when the tmpfs has no room
for it, and the first write past the free space kills the process with SIGBUS. Each new
shared allocation is therefore checked against the free space and its pages reserved
(``posix_fallocate``), so a batch that does not fit raises ``SharedMemoryError``.

Examples
--------
>>> import numpy as np
>>> out, view = allocate((2, 3), np.float32)
>>> view[...] = 7
>>> out.context
cpu_shared(0)
>>> out.asnumpy()
array([[7., 7., 7.],
       [7., 7., 7.]], dtype=float32)
"""
import errno
import os

import mxnet as mx
import numpy as np

from .. import memory
from . import recycle
from .checks import check_dtype
from .native import numpy_view
from .process import in_worker_process
from .recycle import SHARED_CONTEXT

__all__ = ['SHARED_CONTEXT', 'allocate', 'to_shared', 'check_room', 'reserve']

_PLAIN_CONTEXT = mx.cpu(0)
#: The tmpfs MXNet creates shared arrays in.
SHM_MOUNT = '/dev/shm'
_MiB = 1 << 20


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
        raise memory.SharedMemoryError(_explain(nbytes, free, total))


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
        raise memory.SharedMemoryError(_explain(size, stats.f_bavail * stats.f_frsize,
                                                stats.f_blocks * stats.f_frsize)) from None


def _fresh_shared(shape, dtype):
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes:
        check_room(nbytes)
    out = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    if nbytes:
        reserve(out)
    return out


def _recycled(shape, dtype):
    """A view on a free segment of this worker's pool, or on a new one added to it."""
    pool = recycle.pool()
    out = pool.take(shape, dtype)
    if out is not None:
        return out
    try:
        segment = _fresh_shared((recycle.capacity_for(int(np.prod(shape))),), dtype)
    except memory.SharedMemoryError:
        # Idle segments give their pages back; then exactly the bytes needed, not pooled.
        if pool.release_idle():
            mx.nd.waitall()  # MXNet frees them on its engine
        return _fresh_shared(shape, dtype)
    return pool.add(segment, shape)


def allocate(shape, dtype):
    """Allocate an unwritten output NDArray and a writable numpy view of it.

    The view is only valid while the NDArray lives; it keeps the NDArray alive itself.
    Shared arrays are checked against the free space of ``/dev/shm`` and their pages
    reserved, so a batch that does not fit raises ``SharedMemoryError`` (never SIGBUS);
    with the ``'cpu'`` memory setting (or ``'auto'`` in the main process) the array is in
    ordinary ``cpu(0)`` memory. In a worker process, with recycling on, an output of
    :data:`~gluonbatch._core.recycle.MIN_BYTES` or more is a view on a recycled segment
    (:mod:`~gluonbatch._core.recycle`).

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype accepted by :func:`~gluonbatch._core.checks.check_dtype`

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray)
        The output array and a view through which it is written.

    >>> out, view = allocate((0, 4), 'int32')
    >>> out.shape, view.shape
    ((0, 4), (0, 4))
    """
    dtype = check_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    if not memory.use_shared_memory():
        out = mx.nd.empty(shape, ctx=_PLAIN_CONTEXT, dtype=dtype)
    elif (int(np.prod(shape)) * dtype.itemsize >= recycle.MIN_BYTES and in_worker_process()
          and memory.get_recycling()):
        out = _recycled(shape, dtype)
    else:
        out = _fresh_shared(shape, dtype)
    return out, numpy_view(out, readonly=False)


def to_shared(values, dtype):
    """Copy a small host array into a new output NDArray of ``dtype``.

    >>> to_shared([3, 1], 'int32')
    <BLANKLINE>
    [3 1]
    <NDArray 2 @cpu_shared(0)>
    """
    values = np.asarray(values)
    out, view = allocate(values.shape, dtype)
    view[...] = values
    return out
