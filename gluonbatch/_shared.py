"""The one place where gluonbatch allocates output memory and looks inside NDArrays.

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
import ctypes
from multiprocessing.reduction import ForkingPickler

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call
from mxnet.gluon.data import dataloader as _mx_dataloader

from .memory import check_room, reserve, use_shared_memory

__all__ = ['SHARED_CONTEXT', 'SUPPORTED_DTYPES', 'allocate', 'host_view', 'to_shared']

#: The context of the NDArrays gluonbatch returns (with the default memory setting).
SHARED_CONTEXT = mx.Context('cpu_shared', 0)
_PLAIN_CONTEXT = mx.cpu(0)

#: dtypes a legacy ``mx.nd.NDArray`` can hold.
SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (
    np.float32, np.float64, np.float16, np.uint8, np.int8, np.int32, np.int64, np.bool_))

# Contexts whose memory is ordinary host memory that numpy may read directly.
_HOST_DEVICE_TYPES = ('cpu', 'cpu_shared', 'cpu_pinned')


def _data_pointer(array):
    pointer = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(pointer)))
    return pointer.value


def _numpy_view(array, dtype, readonly):
    if array.size == 0:
        # Zero-size arrays may have no data pointer at all.
        return np.empty(array.shape, dtype)
    memory = (ctypes.c_char * (array.size * dtype.itemsize)).from_address(_data_pointer(array))
    memory.owner = array  # the view's base holds the NDArray, so its memory stays mapped
    view = np.frombuffer(memory, dtype).reshape(array.shape)
    view.flags.writeable = not readonly
    return view


def check_dtype(dtype):
    """Return ``np.dtype(dtype)`` if an NDArray can hold it, else raise TypeError.

    >>> check_dtype('float16')
    dtype('float16')
    """
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError('MXNet NDArrays cannot hold dtype %s; pass dtype= one of %s'
                        % (dtype, ', '.join(str(t) for t in SUPPORTED_DTYPES)))
    return dtype


def allocate(shape, dtype):
    """Allocate an unwritten ``cpu_shared`` NDArray and a writable numpy view of it.

    The view is only valid while the NDArray lives; it keeps the NDArray alive itself.
    Shared arrays are checked against the free space of ``/dev/shm`` and their pages
    reserved, so a batch that does not fit raises ``SharedMemoryError`` (never SIGBUS);
    with the ``'cpu'`` memory setting (or ``'auto'`` in the main process) the array is in
    ordinary ``cpu(0)`` memory.

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype accepted by :func:`check_dtype`

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
    if not use_shared_memory():
        out = mx.nd.empty(shape, ctx=_PLAIN_CONTEXT, dtype=dtype)
        return out, _numpy_view(out, dtype, readonly=False)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if nbytes:
        check_room(nbytes)
    out = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    if nbytes:
        reserve(out)
    return out, _numpy_view(out, dtype, readonly=False)


def host_view(array):
    """A read-only numpy view of an NDArray's memory, without copying host arrays.

    Waits for pending engine writes first. Arrays on a device (GPU) are copied to the host.

    >>> import mxnet as mx
    >>> host_view(mx.nd.array([1, 2]))
    array([1., 2.], dtype=float32)
    """
    if array.stype != 'default':
        raise TypeError('sparse NDArrays (stype %r) are not supported; convert them with '
                        ".tostype('default') first" % array.stype)
    if array.context.device_type not in _HOST_DEVICE_TYPES:
        return array.asnumpy()
    array.wait_to_read()
    return _numpy_view(array, np.dtype(array.dtype), readonly=True)


def to_shared(values, dtype):
    """Copy a small host array into a new ``cpu_shared`` NDArray of ``dtype``.

    >>> to_shared([3, 1], 'int32')
    <BLANKLINE>
    [3 1]
    <NDArray 2 @cpu_shared(0)>
    """
    values = np.asarray(values)
    out, view = allocate(values.shape, dtype)
    view[...] = values
    return out


def _empty_shared(shape, dtype):
    return mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)


def _reduce_ndarray(array):
    """How DataLoader workers send NDArrays: MXNet's file-descriptor reducer, except that
    MXNet crashes (SIGSEGV) on a zero-size array, which a batch of images without objects
    produces; those travel as their shape and dtype instead."""
    if array.size == 0:
        return _empty_shared, (array.shape, np.dtype(array.dtype).str)
    return _mx_dataloader.reduce_ndarray(array)


# Registered after MXNet's own reducer (imported above), so this one is used.
ForkingPickler.register(mx.nd.NDArray, _reduce_ndarray)
