"""Test helpers: independent records of inputs, to prove batchify neither changes nor aliases
them."""
import collections.abc

import mxnet as mx
import numpy as np


def snapshot(value):
    """An independent record of ``value`` (arrays copied, containers walked)."""
    if isinstance(value, mx.nd.NDArray):
        return ('nd', value.shape, np.dtype(value.dtype), value.context, value.asnumpy().copy())
    if isinstance(value, np.ndarray):
        return ('np', value.shape, value.dtype, value.copy())
    if isinstance(value, np.generic):
        return ('np', (), value.dtype, np.array(value))
    if isinstance(value, collections.abc.Mapping):
        return (type(value), [(key, snapshot(item)) for key, item in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value), [(index, snapshot(item)) for index, item in enumerate(value)])
    return ('value', type(value), value)


def assert_unchanged(before, after, path='input'):
    assert before[0] == after[0], path
    if before[0] in ('nd', 'np'):
        assert before[1:-1] == after[1:-1], path
        np.testing.assert_array_equal(after[-1], before[-1], err_msg=path)
    elif before[0] == 'value':
        assert before[1] is after[1], path
        assert before[2] == after[2] or (before[2] != before[2] and after[2] != after[2]), path
    else:
        assert [key for key, _ in before[1]] == [key for key, _ in after[1]], path
        for (key, b), (_, a) in zip(before[1], after[1]):
            assert_unchanged(b, a, '%s[%r]' % (path, key))


def ndarrays(value):
    if isinstance(value, mx.nd.NDArray):
        yield value
    elif isinstance(value, collections.abc.Mapping):
        for item in value.values():
            yield from ndarrays(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from ndarrays(item)


def overwrite_all(batch):
    """Change every element of every non-empty NDArray in ``batch``."""
    for array in ndarrays(batch):
        if array.size == 0:
            continue
        current = array.asnumpy()
        changed = (current == 0).astype(current.dtype)  # 0 -> 1, anything else -> 0
        array[:] = changed
        np.testing.assert_array_equal(array.asnumpy(), changed)
