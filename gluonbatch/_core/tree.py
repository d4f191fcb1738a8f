"""Walking nested batches: tuples, namedtuples, lists and dicts with arrays at the leaves.

Examples
--------
>>> import mxnet as mx
>>> batch = ({'image': mx.nd.ones((2, 3))}, [mx.nd.zeros(1)], 'names')
>>> [array.shape for array in array_leaves(batch)]
[(2, 3), (1,)]
>>> map_arrays(lambda array: array.shape, batch)
({'image': (2, 3)}, [(1,)], 'names')
"""
from collections.abc import Mapping

import mxnet as mx

__all__ = ['array_leaves', 'map_arrays']


def _children(value):
    """The items of a container; none for any other leaf."""
    if isinstance(value, Mapping):
        return list(value.values())
    if isinstance(value, (list, tuple)):
        return list(value)
    return []


def array_leaves(batch):
    """The NDArray leaves of ``batch``, depth first; other leaves are skipped."""
    if isinstance(batch, mx.nd.NDArray):
        return [batch]
    return [array for item in _children(batch) for array in array_leaves(item)]


def map_arrays(fn, batch):
    """``batch`` with every NDArray leaf replaced by ``fn(leaf)``; containers keep their
    type (namedtuples included), other leaves are kept as they are."""
    if isinstance(batch, mx.nd.NDArray):
        return fn(batch)
    if isinstance(batch, Mapping):
        return type(batch)((key, map_arrays(fn, item)) for key, item in batch.items())
    if isinstance(batch, tuple) and hasattr(batch, '_fields'):
        return type(batch)(*(map_arrays(fn, item) for item in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_arrays(fn, item) for item in batch)
    return batch
