"""Walking nested batches: tuples, namedtuples, lists and dicts with arrays at the leaves.

Examples
--------
>>> import mxnet as mx
>>> batch = ({'image': mx.nd.ones((2, 3))}, [mx.nd.zeros(1)], 'names')
>>> [(path, array.shape) for path, array in iter_arrays(batch)]
[("[0]['image']", (2, 3)), ('[1][0]', (1,))]
>>> map_arrays(lambda array: array.shape, batch)
({'image': (2, 3)}, [(1,)], 'names')
"""
from collections.abc import Mapping

import mxnet as mx

__all__ = ['iter_arrays', 'array_leaves', 'map_arrays']


def _children(value):
    """(key, child) pairs of a container; none for any other leaf."""
    if isinstance(value, Mapping):
        return [('[%r]' % (key,), item) for key, item in value.items()]
    if isinstance(value, (list, tuple)):
        return [('[%d]' % index, item) for index, item in enumerate(value)]
    return []


def iter_arrays(batch, path=''):
    """Yield ``(path, array)`` for every NDArray leaf of ``batch``, depth first."""
    if isinstance(batch, mx.nd.NDArray):
        yield path, batch
        return
    for key, item in _children(batch):
        yield from iter_arrays(item, path + key)


def array_leaves(batch):
    """The NDArray leaves of ``batch``, depth first.

    >>> [a.shape for a in array_leaves((mx.nd.ones(1), [mx.nd.ones(2)], 'name'))]
    [(1,), (2,)]
    """
    return [array for _, array in iter_arrays(batch)]


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
