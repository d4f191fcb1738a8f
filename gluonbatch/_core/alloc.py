"""The one place where gluonbatch allocates output memory: every batch it returns comes from
:func:`allocate`, by default in ``cpu_shared`` memory, so that DataLoader worker processes
hand batches to the main process by file descriptor (:mod:`gluonbatch.memory` has the
other settings).

Outputs are allocated *without* being written (``mx.nd.empty``) and exposed as writable
numpy views, so each output byte is written exactly once by the combinators. In MXNet's
numpy mode (``mx.npx.set_np()``) every output is an ``mx.np.ndarray`` view of the same
memory, made here, so no combinator needs to know the mode.

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
import contextlib

import mxnet as mx
import numpy as np

from . import memory_settings, recycle
from .checks import check_dtype
from .heap import keep_freed_heap
from .native import SHARED_CONTEXT, fill_zero, numpy_view
from .process import in_worker_process
from .shm import SharedMemoryError, fresh_shared

__all__ = ['SHARED_CONTEXT', 'allocate', 'allocate_plain', 'to_shared', 'in_numpy_mode',
           'legacy_mode']

_PLAIN_CONTEXT = mx.cpu(0)


def _recycled(pool, shape, dtype):
    """A view on a free segment of ``pool``, or on a new one added to it; and whether the
    segment is new (all zeros)."""
    out = pool.take(shape, dtype)
    if out is not None:
        return out, False
    try:
        segment = fresh_shared((recycle.capacity_for(int(np.prod(shape))),), dtype)
    except SharedMemoryError:
        # Idle segments give their pages back; then exactly the bytes needed, not pooled.
        if pool.release_idle():
            mx.nd.waitall()  # MXNet frees them on its engine
        return fresh_shared(shape, dtype), True
    return pool.add(segment, shape), True


def in_numpy_mode():
    """Whether MXNet's numpy mode is on in this thread (``mx.npx.set_np()``)."""
    return mx.util.is_np_array()


@contextlib.contextmanager
def legacy_mode():
    """A scope with MXNet's numpy mode off: legacy ``mx.nd.NDArray`` outputs and legacy
    shape semantics (the R-CNN batchifiers: gluoncv's R-CNN networks are legacy only)."""
    with mx.util.np_array(False), mx.util.np_shape(False):
        yield


def allocate(shape, dtype, zeroed=False):
    """Allocate an unwritten output NDArray and a writable numpy view of it.

    The view is only valid while the NDArray lives; it keeps the NDArray alive itself.
    Shared arrays are checked against the free space of ``/dev/shm`` and their pages
    reserved, so a batch that does not fit raises ``SharedMemoryError`` (never SIGBUS);
    with the ``'cpu'`` memory setting (or ``'auto'`` in the main process) the array is in
    ordinary ``cpu(0)`` memory. In a worker process that sends batches to another (a
    DataLoader worker), with recycling on, an output of
    :data:`~gluonbatch._core.recycle.MIN_BYTES` or more is a view on a recycled segment
    (:mod:`~gluonbatch._core.recycle`), and the process's heap keeps what it frees for the
    next batch (:func:`~gluonbatch._core.heap.keep_freed_heap`).

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype accepted by :func:`~gluonbatch._core.checks.check_dtype`
    zeroed : bool
        Return the array all zeros. A new shared segment already is (the system hands out
        zeroed pages, and writing zeros again would only fault them in early); recycled
        and ordinary memory is cleared at ``memset`` speed.

    Returns
    -------
    (mx.nd.NDArray or mx.np.ndarray, numpy.ndarray)
        The output array (an ``mx.np.ndarray`` view of the same memory in numpy mode) and
        a view through which it is written.

    >>> out, view = allocate((0, 4), 'int32')
    >>> out.shape, view.shape
    ((0, 4), (0, 4))
    """
    dtype = check_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    pool = recycle.pool()
    fresh = False
    if not memory_settings.use_shared_memory():
        out = mx.nd.empty(shape, ctx=_PLAIN_CONTEXT, dtype=dtype)
    elif (pool.sends and in_worker_process()
          and int(np.prod(shape)) * dtype.itemsize >= recycle.MIN_BYTES
          and memory_settings.get_recycling()):
        keep_freed_heap()  # the worker's other memory is reused batch to batch too
        out, fresh = _recycled(pool, shape, dtype)
    else:
        out, fresh = fresh_shared(shape, dtype), True
    view = numpy_view(out, readonly=False)
    if zeroed and not fresh:
        fill_zero(view)
    if in_numpy_mode():
        out = out.as_np_ndarray()  # shares the memory (and its holder count) with ``out``
    return out, view


def allocate_plain(shape, dtype):
    """An unwritten NDArray in ordinary ``cpu(0)`` memory and a writable numpy view of it:
    what a decoder writes an input image into, in place of wrapping its own array (MXNet's
    ``from_numpy`` costs tens of microseconds a call).

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype accepted by :func:`~gluonbatch._core.checks.check_dtype`

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray)
        The array (always legacy: callers convert it for numpy mode) and a view through
        which it is written, valid while the array lives (the view keeps it alive).

    Examples
    --------
    >>> out, view = allocate_plain((2,), 'uint8')
    >>> view[...] = 3
    >>> out.context, out.asnumpy()
    (cpu(0), array([3, 3], dtype=uint8))
    """
    shape = tuple(int(d) for d in shape)
    out = mx.nd.empty(shape, ctx=_PLAIN_CONTEXT, dtype=check_dtype(dtype))
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
