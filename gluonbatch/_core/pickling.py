"""How DataLoader worker processes send NDArrays: the reducer gluonbatch installs.

MXNet registers a ``ForkingPickler`` reducer that sends a ``cpu_shared`` NDArray by file
descriptor, but it crashes (SIGSEGV) on a zero-size array, which a batch of images
without objects produces. gluonbatch's reducer sends those as their shape and dtype and
leaves every other array to MXNet's; an ``mx.np.ndarray`` (numpy mode) arrives as one. It
also notes that this process sends arrays to another one, which turns recycled shared
memory on here (:mod:`.recycle`), and that the sending and the receiving process hold
shared arrays (:func:`~.process.note_shared_arrays`). Importing ``gluonbatch`` calls
:func:`install_reducer`; :func:`restore_mxnet_reducer` puts MXNet's own back.

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
from multiprocessing.reduction import ForkingPickler

import mxnet as mx
import numpy as np
from mxnet.gluon.data import dataloader as _mx_dataloader

from . import recycle
from .native import SHARED_CONTEXT
from .process import note_shared_arrays

__all__ = ['install_reducer', 'restore_mxnet_reducer']


def _empty_shared(shape, dtype, numpy_type=False):
    array = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    return array.as_np_ndarray() if numpy_type else array


def _received(rebuild, *args):
    """The receiving side: MXNet's ``rebuild`` maps the sender's shared memory."""
    note_shared_arrays()
    return rebuild(*args)


def _reduce(array, reduce_nonempty):
    recycle.pool().sends = True
    if array.size == 0:
        return _empty_shared, (array.shape, np.dtype(array.dtype).str,
                               isinstance(array, mx.np.ndarray))
    note_shared_arrays()
    rebuild, args = reduce_nonempty(array)
    return _received, (rebuild,) + tuple(args)


def _reduce_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_ndarray)


def _reduce_np_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_np_ndarray)


def install_reducer():
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


def restore_mxnet_reducer():
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
