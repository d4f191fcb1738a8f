"""How DataLoader worker processes send NDArrays: the reducer gluonbatch installs.

MXNet registers a ``ForkingPickler`` reducer that sends a ``cpu_shared`` NDArray by file
descriptor, but it crashes (SIGSEGV) on a zero-size array, which a batch of images
without objects produces. gluonbatch's reducer sends those as their shape and dtype and
leaves every other array to MXNet's; an ``mx.np.ndarray`` (numpy mode) arrives as one. It
also notes that this process sends arrays to another one, which turns recycled shared
memory on here (:mod:`.recycle`). :func:`install` registers it; importing ``gluonbatch``
calls it once.

Examples
--------
>>> install()
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

__all__ = ['install']


def _empty_shared(shape, dtype, numpy_type=False):
    array = mx.nd.empty(shape, ctx=SHARED_CONTEXT, dtype=dtype)
    return array.as_np_ndarray() if numpy_type else array


def _reduce(array, reduce_nonempty):
    recycle.pool().sends = True
    if array.size == 0:
        return _empty_shared, (array.shape, np.dtype(array.dtype).str,
                               isinstance(array, mx.np.ndarray))
    return reduce_nonempty(array)


def _reduce_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_ndarray)


def _reduce_np_ndarray(array):
    return _reduce(array, _mx_dataloader.reduce_np_ndarray)


def install():
    """Register gluonbatch's NDArray reducer with ``ForkingPickler`` (idempotent).

    MXNet's DataLoader module registers its own reducer when imported; it was imported
    above, so registering now makes gluonbatch's the one in force.
    """
    ForkingPickler.register(mx.nd.NDArray, _reduce_ndarray)
    ForkingPickler.register(mx.np.ndarray, _reduce_np_ndarray)
