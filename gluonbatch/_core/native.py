"""The ctypes code for MXNet's memory: numpy views of an NDArray's host memory, the two
counts that say who still uses a shared-memory segment, and a zero fill at memset speed.

MXNet copies whenever its own API hands memory to numpy (``asnumpy``); gluonbatch reads
samples and writes outputs in place instead, through views built from the data pointer.
The counts are read from MXNet 1.9's memory layout; :mod:`~gluonbatch._core.recycle`
checks that they behave as described the first time recycling is asked for, before relying
on them.

Examples
--------
>>> import mxnet as mx
>>> host_view(mx.nd.array([1, 2]))
array([1., 2.], dtype=float32)
"""
import ctypes
import math

import mxnet as mx
import numpy as np
from mxnet.base import _LIB, check_call

__all__ = ['SHARED_CONTEXT', 'numpy_view', 'host_view', 'shared_count', 'holders',
           'fill_zero']

#: MXNet's shared-memory context: the context of the NDArrays gluonbatch returns by default.
SHARED_CONTEXT = mx.Context('cpu_shared', 0)

# Contexts whose memory is ordinary host memory that numpy may read directly.
_HOST_DEVICE_TYPES = ('cpu', 'cpu_shared', 'cpu_pinned')
# Bytes in front of a cpu_shared array's data; the count is the first int of them.
_SHARED_HEADER = 16
_POINTER = ctypes.sizeof(ctypes.c_void_p)


def _data_pointer(array):
    pointer = ctypes.c_void_p()
    check_call(_LIB.MXNDArrayGetData(array.handle, ctypes.byref(pointer)))
    return pointer.value


def numpy_view(array, readonly):
    """A numpy array over the memory of a dense host NDArray, keeping the NDArray alive.

    The view bypasses MXNet's engine, so the caller makes sure no engine operation is
    writing ``array`` while the view is read, and none is reading or writing it while the
    view is written: an array just made by an operation (``mx.nd.zeros`` fills it on the
    engine, asynchronously) is waited for first, with ``array.wait_to_read()``.

    >>> import mxnet as mx
    >>> out = mx.nd.zeros((2,))
    >>> out.wait_to_read()  # the engine's zero fill is done: it cannot land after the 5s
    >>> numpy_view(out, readonly=False)[:] = 5
    >>> out.asnumpy()
    array([5., 5.], dtype=float32)
    """
    dtype = np.dtype(array.dtype)
    shape = array.shape  # asked once: each property is a call into MXNet
    count = math.prod(shape)
    if count == 0:
        # Zero-size arrays may have no data pointer at all.
        return np.empty(shape, dtype)
    memory = (ctypes.c_char * (count * dtype.itemsize)).from_address(_data_pointer(array))
    memory.owner = array  # the view's base holds the NDArray, so its memory stays mapped
    view = np.frombuffer(memory, dtype).reshape(shape)
    view.flags.writeable = not readonly
    return view


def host_view(array):
    """A read-only numpy view of an NDArray's memory, without copying host arrays.

    Waits for pending engine writes first. Arrays on a device (GPU) are copied to the host.
    """
    if array.stype != 'default':
        raise TypeError('sparse NDArrays (stype %r) are not supported; convert them with '
                        ".tostype('default') first" % array.stype)
    if array.context.device_type not in _HOST_DEVICE_TYPES:
        return array.asnumpy()
    array.wait_to_read()
    return numpy_view(array, readonly=True)


def shared_count(segment):
    """The count in front of a ``cpu_shared`` array's data, shared by every process.

    MXNet keeps an ``std::atomic<int>`` at the start of the 16-byte header before the data:
    1 for the creating mapping, +1 for every export (``_to_shared_mem()``, which pickling
    calls; the receiving process's mapping takes that increment over), -1 whenever a
    mapping is freed. ``segment`` must be a zero-offset array of the segment.

    >>> import mxnet as mx
    >>> shared_count(mx.nd.empty((4,), ctx=mx.Context('cpu_shared', 0)))
    1
    """
    return ctypes.c_int.from_address(_data_pointer(segment) - _SHARED_HEADER).value


def holders(array):
    """How many NDArrays of this process share the memory of ``array``.

    Views (slices, reshapes) and pending engine operations each hold the C++ ``NDArray``'s
    ``std::shared_ptr`` to its memory chunk; this is that pointer's use count, read from its
    control block (the NDArray object starts with the pointer pair).

    >>> import mxnet as mx
    >>> array = mx.nd.zeros((4,))
    >>> array.wait_to_read()  # the engine operation writing the zeros holds it until done
    >>> view = array[1:3]
    >>> holders(array)
    2
    >>> del view
    >>> holders(array)
    1
    """
    control = ctypes.c_void_p.from_address(array.handle.value + _POINTER).value
    return ctypes.c_int.from_address(control + _POINTER).value


def fill_zero(array):
    """Set every element of a numpy array to zero (all bits 0: 0.0 for floats).

    A contiguous array is cleared by the C library's ``memset``, about twice as fast as
    numpy's ``fill`` for the many megabytes of mostly-zero detection targets a batch holds.

    >>> a = np.ones((2, 3), np.float32)
    >>> fill_zero(a)
    >>> a
    array([[0., 0., 0.],
           [0., 0., 0.]], dtype=float32)
    """
    if not array.flags.writeable:
        raise ValueError('fill_zero needs a writable array')
    if array.flags.c_contiguous and array.size:
        ctypes.memset(array.ctypes.data, 0, array.nbytes)
    else:
        array[...] = 0
