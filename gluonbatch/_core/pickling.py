"""How DataLoader worker processes send NDArrays: the reducer gluonbatch installs.

How it differs from MXNet's (zero-size arrays, recycling turned on in a sender, the
note that a process holds shared arrays) is told in the docs' shared-memory page, "How
workers pickle NDArrays". Importing ``gluonbatch`` calls :func:`install_reducer`;
:func:`restore_mxnet_reducer` puts MXNet's own back.

Inside :func:`dumps_with_fds` the reducer does not hand descriptors to multiprocessing's
resource sharer (which the receiver must reach while the sender lives): it collects
duplicates of them, for the caller to pass along with the pickle through a Unix socket,
and :func:`loads_with_fds` maps them on the other side. A batch sent that way can be
received even after its sender died.

Examples
--------
>>> install_reducer()
>>> import pickle, mxnet as mx
>>> from multiprocessing.reduction import ForkingPickler
>>> empty = mx.nd.empty((0, 6), ctx=mx.Context('cpu_shared', 0), dtype='int32')
>>> back = pickle.loads(ForkingPickler.dumps(empty))
>>> back.shape, back.dtype
((0, 6), <class 'numpy.int32'>)
"""
import os
import pickle
import threading
from multiprocessing.reduction import ForkingPickler

import mxnet as mx
import numpy as np
from mxnet.gluon.data import dataloader as _mx_dataloader

from . import recycle
from .native import SHARED_CONTEXT
from .process import note_shared_arrays

__all__ = ['install_reducer', 'restore_mxnet_reducer', 'dumps_with_fds', 'loads_with_fds',
           'close_fds']

# The descriptors a dumps_with_fds collects, or a loads_with_fds hands out, in this thread.
_passing = threading.local()


def _empty_shared(shape, dtype, numpy_type=False):
    array = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    return array.as_np_ndarray() if numpy_type else array


def _received(rebuild, *args):
    """The receiving side: MXNet's ``rebuild`` maps the sender's shared memory."""
    note_shared_arrays()
    return rebuild(*args)


def _received_passed(slot, pid, shape, dtype, numpy_type):
    """The receiving side of a passed descriptor: MXNet maps it, and owns it from then."""
    fds = _passing.received
    fd, fds[slot] = fds[slot], None
    note_shared_arrays()
    handle = mx.nd.ndarray._new_from_shared_mem(pid, fd, shape, dtype)
    return mx.np.ndarray(handle) if numpy_type else mx.nd.NDArray(handle)


def _reduce(array, reduce_nonempty):
    recycle.pool().sends = True
    numpy_type = isinstance(array, mx.np.ndarray)
    if array.size == 0:
        return _empty_shared, (array.shape, np.dtype(array.dtype).str, numpy_type)
    note_shared_arrays()
    collected = getattr(_passing, 'sent', None)
    if collected is not None:
        shared = array.as_in_context(SHARED_CONTEXT)  # a copy unless already shared
        pid, fd, shape, dtype = shared._to_shared_mem()
        collected.append(os.dup(fd))
        return _received_passed, (len(collected) - 1, pid, shape, dtype, numpy_type)
    rebuild, args = reduce_nonempty(array)
    return _received, (rebuild,) + tuple(args)


def _reduce_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_ndarray)


def _reduce_np_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_np_ndarray)


def install_reducer() -> None:
    """Make gluonbatch's reducer the one ``ForkingPickler`` uses for NDArrays (idempotent).

    Importing ``gluonbatch`` calls it: DataLoader workers (MXNet's and gluonbatch's) send
    their batches with ``ForkingPickler``, and gluonbatch's reducer is what lets a batch
    hold zero-size arrays (images without objects) and lets workers recycle their shared
    memory. It differs from MXNet's only there: a non-empty array still travels as
    MXNet's shared-memory file descriptor and arrives as the same NDArray. Call it after
    :func:`restore_mxnet_reducer` to use gluonbatch's again, or after anything else that
    registered a reducer for NDArrays.

    Examples
    --------
    >>> restore_mxnet_reducer()
    >>> install_reducer()
    """
    ForkingPickler.register(mx.nd.NDArray, _reduce_ndarray)
    ForkingPickler.register(mx.np.ndarray, _reduce_np_ndarray)


def restore_mxnet_reducer() -> None:
    """Put MXNet's own ``ForkingPickler`` reducers for ``mx.nd.NDArray`` and
    ``mx.np.ndarray`` back, undoing what importing ``gluonbatch`` did (idempotent).

    With MXNet's reducer, a worker that sends a zero-size array crashes (SIGSEGV) and
    workers no longer recycle their shared memory (they allocate every batch fresh);
    everything else travels as before. :func:`install_reducer` reinstalls gluonbatch's.
    Workers already forked keep the reducer they were forked with.

    Examples
    --------
    >>> import io, mxnet as mx
    >>> from multiprocessing.reduction import ForkingPickler
    >>> restore_mxnet_reducer()
    >>> ForkingPickler(io.BytesIO()).dispatch_table[mx.nd.NDArray].__module__
    'mxnet.gluon.data.dataloader'
    >>> install_reducer()
    >>> ForkingPickler(io.BytesIO()).dispatch_table[mx.nd.NDArray].__module__
    'gluonbatch._core.pickling'
    """
    ForkingPickler.register(mx.nd.NDArray, _mx_dataloader.reduce_ndarray)
    ForkingPickler.register(mx.np.ndarray, _mx_dataloader.reduce_np_ndarray)


def dumps_with_fds(value):
    """``value`` pickled as a DataLoader worker sends it, and the descriptors of its
    shared-memory arrays, to pass along with it (``SCM_RIGHTS``); the caller closes them
    once sent.

    Examples
    --------
    >>> import mxnet as mx
    >>> batch = mx.nd.ones((2, 3), ctx=SHARED_CONTEXT)
    >>> payload, fds = dumps_with_fds({'images': batch})
    >>> len(fds)
    1
    >>> loads_with_fds(payload, fds)['images'].asnumpy().sum()  # takes the descriptors over
    6.0
    """
    fds = []
    _passing.sent = fds
    try:
        payload = bytes(ForkingPickler.dumps(value, pickle.HIGHEST_PROTOCOL))
    except BaseException:
        close_fds(fds)
        raise
    finally:
        _passing.sent = None
    return payload, fds


def loads_with_fds(payload, fds):
    """The value :func:`dumps_with_fds` pickled, its arrays mapped from ``fds`` (which it
    takes over: the arrays own those they map, the others are closed)."""
    _passing.received = list(fds)
    try:
        return pickle.loads(payload)
    finally:
        close_fds(fd for fd in _passing.received if fd is not None)
        _passing.received = None


def close_fds(fds):
    """Close each descriptor of ``fds`` (one already closed is passed over)."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass
