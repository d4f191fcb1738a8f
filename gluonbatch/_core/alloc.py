"""The one place where gluonbatch allocates output memory.

Every batch gluonbatch returns is allocated here, by default in ``cpu_shared`` memory, so
that DataLoader worker processes hand batches to the main process by file descriptor (see
:mod:`gluonbatch.memory` for the other settings and the free-space checks).
Outputs are allocated *without* being written (``mx.nd.empty``) and exposed as writable
numpy views, so each output byte is written exactly once by the combinators.

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
import mxnet as mx
import numpy as np

from .. import memory
from .checks import check_dtype
from .native import numpy_view

__all__ = ['SHARED_CONTEXT', 'allocate', 'to_shared']

#: The context of the NDArrays gluonbatch returns (with the default memory setting).
SHARED_CONTEXT = mx.Context('cpu_shared', 0)
_PLAIN_CONTEXT = mx.cpu(0)


def allocate(shape, dtype):
    """Allocate an unwritten output NDArray and a writable numpy view of it.

    The view is only valid while the NDArray lives; it keeps the NDArray alive itself.
    Shared arrays are checked against the free space of ``/dev/shm`` and their pages
    reserved, so a batch that does not fit raises ``SharedMemoryError`` (never SIGBUS);
    with the ``'cpu'`` memory setting (or ``'auto'`` in the main process) the array is in
    ordinary ``cpu(0)`` memory.

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
        return out, numpy_view(out, readonly=False)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes:
        memory.check_room(nbytes)
    out = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    if nbytes:
        memory.reserve(out)
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
