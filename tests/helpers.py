"""Helpers shared by the tests: the output context, walking batches, independent records
of inputs (to prove batchify neither changes nor aliases them), and a tiny R-CNN network."""
import collections.abc
import copy

import mxnet as mx
import numpy as np

#: Where every NDArray gluonbatch returns lives (default memory setting).
SHARED = mx.Context('cpu_shared', 0)


def batch_leaves(batch, path='batch'):
    """(path, leaf) for every leaf of a batch nested in tuples, lists, dicts, namedtuples."""
    if isinstance(batch, collections.abc.Mapping):
        for key, value in batch.items():
            yield from batch_leaves(value, '%s[%r]' % (path, key))
    elif isinstance(batch, (list, tuple)):
        for index, value in enumerate(batch):
            yield from batch_leaves(value, '%s[%d]' % (path, index))
    else:
        yield path, batch


def ndarrays(batch):
    """The NDArray leaves of ``batch``, depth first."""
    return [leaf for _, leaf in batch_leaves(batch) if isinstance(leaf, mx.nd.NDArray)]


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
    return ('value', type(value), copy.deepcopy(value))


def assert_unchanged(before, after, path='input'):
    """Raise unless two :func:`snapshot` records are equal (NaN equals NaN)."""
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


def overwrite_all(batch):
    """Change every element of every writable, non-empty NDArray in ``batch``."""
    for array in ndarrays(batch):
        if array.ndim == 0 or array.size == 0:
            continue  # legacy NDArrays of these shapes cannot be written from Python
        current = array.asnumpy()
        changed = (current == 0).astype(current.dtype)  # 0 -> 1, anything else (NaN too) -> 0
        array[:] = changed
        array.wait_to_read()
        np.testing.assert_array_equal(array.asnumpy(), changed)


def tiny_rcnn_net(channels=8, stride=16):
    """A network with the ``features`` block R-CNN batchifiers read: one strided conv."""
    net = mx.gluon.nn.HybridSequential()
    net.features = mx.gluon.nn.Conv2D(channels, 3, strides=stride, padding=1)
    return net
