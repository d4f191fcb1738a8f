"""Scaling out: batch shards onto devices.

One machine, many devices: a batchify function made with ``num_shards=len(ctx_list)``
pads every shard of a batch separately; :func:`split_to_devices` copies each shard onto
its device and returns one tuple per device, and :class:`ShardedLoader` does it for every
batch of a loader. Many machines: :class:`gluonbatch.sampler.SplitSampler` gives every
rank its own part of the dataset (importable from here too, its former home).

Examples
--------
>>> import mxnet as mx, numpy as np
>>> from gluonbatch.batchify import Tuple, Stack, Pad
>>> from gluonbatch.sharding import split_to_devices
>>> samples = [(np.full((3, 2 + k), k, 'float32'), k) for k in range(5)]
>>> batch = Tuple(Pad(axis=1, num_shards=2), Stack())(samples)
>>> [(x.shape, x.context, y.asnumpy().tolist())
...  for x, y in split_to_devices(batch, [mx.cpu(0), mx.cpu(1)])]
[((3, 3, 4), cpu(0), [0.0, 1.0, 2.0]), ((2, 3, 6), cpu(1), [3.0, 4.0])]
"""
from collections.abc import Mapping

import mxnet as mx
import numpy as np

from ._core.checks import check_int
from ._core.layout import split_bounds
from .sampler import SplitSampler  # noqa: F401  (its old import path)

__all__ = ['split_to_devices', 'ShardedLoader']


# --------------------------------------------------------------------------- devices

def _is_array(value):
    return isinstance(value, mx.nd.NDArray)


def _is_shard_list(value):
    """A list or tuple of NDArrays: one field's per-shard arrays."""
    return isinstance(value, (list, tuple)) and len(value) > 0 and all(map(_is_array, value))


def _rows(array):
    return array.shape[0] if array.ndim else None


class _Leaf:
    """How one field of the batch is split: its kind and the field's name for messages."""

    SHARDS, ARRAY, ROWS, REPLICATE = 'shards', 'array', 'rows', 'replicate'

    def __init__(self, kind, value, name):
        self.kind, self.value, self.name = kind, value, name


def _parse(value, name, top):
    """The batch as a tree: containers (tuples, namedtuples, dicts) and leaves."""
    if _is_array(value):
        return _Leaf(_Leaf.ARRAY, value, name)
    if isinstance(value, Mapping):
        return (type(value), {key: _parse(item, '%s[%r]' % (name, key), False)
                              for key, item in value.items()})
    if isinstance(value, tuple) and (top or not _is_shard_list(value)):
        return (type(value), [_parse(item, '%s[%d]' % (name, index), False)
                              for index, item in enumerate(value)])
    if _is_shard_list(value):
        return _Leaf(_Leaf.SHARDS, value, name)
    if isinstance(value, list) or isinstance(value, np.ndarray) and value.ndim > 0:
        return _Leaf(_Leaf.ROWS, value, name)
    return _Leaf(_Leaf.REPLICATE, value, name)


def _leaves(tree):
    if isinstance(tree, _Leaf):
        yield tree
        return
    _, items = tree
    for item in (items.values() if isinstance(items, dict) else items):
        yield from _leaves(item)


def _shard_sizes(leaf):
    sizes = [_rows(array) for array in leaf.value]
    if None in sizes:
        raise ValueError('%s: shard %d is a 0-d NDArray; per-shard arrays need a batch axis'
                         % (leaf.name, sizes.index(None)))
    return sizes


def _field_rows(leaf):
    if leaf.kind == _Leaf.ARRAY:
        return _rows(leaf.value)
    return len(leaf.value)


def _layout(leaves, num_shards):
    """The shard boundaries (start, stop) of the batch, checked against every field."""
    shard_leaves = [leaf for leaf in leaves if leaf.kind == _Leaf.SHARDS]
    if shard_leaves:
        count = min(len(leaf.value) for leaf in shard_leaves)
        reference = next(leaf for leaf in shard_leaves if len(leaf.value) == count)
        sizes = _shard_sizes(reference)
        bounds = [(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(count)]
        if num_shards is not None and count > num_shards:
            raise ValueError('%s has %d shards; num_shards=%d was given'
                             % (reference.name, count, num_shards))
        return bounds, reference
    if num_shards is None:
        return None, None
    rows = {leaf.name: _field_rows(leaf) for leaf in leaves
            if leaf.kind in (_Leaf.ARRAY, _Leaf.ROWS) and _field_rows(leaf) is not None}
    if not rows:
        return None, None
    if len(set(rows.values())) > 1:
        raise ValueError('the fields have different batch sizes (%s); cannot split them into '
                         'shards' % ', '.join('%s: %d' % item for item in rows.items()))
    return split_bounds(next(iter(rows.values())), num_shards), None


def _check_field(leaf, bounds, reference):
    """Say how ``leaf`` is split on ``bounds``; raise if it does not fit them."""
    count, total = len(bounds), bounds[-1][1]
    sizes = [stop - start for start, stop in bounds]
    if leaf.kind == _Leaf.SHARDS:
        if len(leaf.value) == count:
            if _shard_sizes(leaf) != sizes:
                raise ValueError('%s has shards of %s rows but %s has %s; the fields of a '
                                 'batch must be sharded alike' % (
                                     leaf.name, _shard_sizes(leaf), reference.name, sizes))
            return 'shards'
        if len(leaf.value) == total:
            return 'per-sample'  # Append: one array per sample
        raise ValueError('%s holds %d NDArrays: neither one per shard (%d) nor one per sample '
                         '(%d)' % (leaf.name, len(leaf.value), count, total))
    if leaf.kind == _Leaf.ARRAY and leaf.value.ndim == 0:
        return 'replicate'  # a 0-d NDArray (numpy semantics) cannot be split or copied
    if leaf.kind in (_Leaf.ARRAY, _Leaf.ROWS):
        rows = _field_rows(leaf)
        if rows != total:
            raise ValueError('%s has %s rows; the batch has %d samples in %d shards %s, so an '
                             'unsharded field must have %d rows to be split alike'
                             % (leaf.name, rows, total, count, sizes, total))
        return 'rows'
    return 'replicate'


def _copy(array, ctx):
    """One asynchronous copy of ``array`` on ``ctx``, never the array itself."""
    return array.copyto(ctx)


def _piece(leaf, how, shard, start, stop, ctx):
    value = leaf.value
    if how is None:  # one shard: the whole field
        if leaf.kind == _Leaf.ARRAY:
            return _copy(value, ctx)
        if leaf.kind == _Leaf.SHARDS:
            return type(value)(_copy(array, ctx) for array in value)
        return value
    if how == 'shards':
        return _copy(value[shard], ctx)
    if how == 'per-sample':
        return [_copy(array, ctx) for array in value[start:stop]]
    if how == 'rows':
        if leaf.kind == _Leaf.ARRAY:
            return _copy(value[start:stop], ctx)  # the slice is a view; one copy
        return value[start:stop]
    return value


def _build(tree, plan, shard, start, stop, ctx):
    if isinstance(tree, _Leaf):
        return _piece(tree, plan[id(tree)], shard, start, stop, ctx)
    kind, items = tree
    if isinstance(items, dict):
        built = {key: _build(item, plan, shard, start, stop, ctx)
                 for key, item in items.items()}
        return built if kind is dict else kind(built)
    built = [_build(item, plan, shard, start, stop, ctx) for item in items]
    if hasattr(kind, '_fields'):  # namedtuple
        return kind(*built)
    return kind(built)


def _check_contexts(ctx_list):
    if isinstance(ctx_list, mx.Context):
        ctx_list = [ctx_list]
    try:
        ctx_list = list(ctx_list)
    except TypeError:
        raise TypeError('ctx_list must be a list of mx.Context, got %r' % (ctx_list,)) from None
    if not ctx_list:
        raise ValueError('ctx_list is empty: give at least one mx.Context')
    for index, ctx in enumerate(ctx_list):
        if not isinstance(ctx, mx.Context):
            raise TypeError('ctx_list[%d] is %r, not an mx.Context' % (index, ctx))
    return ctx_list


def split_to_devices(batch, ctx_list, num_shards=None):
    """Copy each shard of a batch onto its device: one item per device, ready to zip over.

    ``batch`` is what a batchify function made with ``num_shards=len(ctx_list)`` returns:
    ``Pad(num_shards=k)``, a ``Tuple``/``NamedTuple``/``Dict`` of such functions, or the
    Faster/Mask R-CNN training batchifiers. Shard ``i`` of every field is copied onto
    ``ctx_list[i]`` (an asynchronous MXNet copy, one per shard; nothing else is copied on
    the host), so the items returned never share memory with ``batch``.

    How each field is read:

    * a list or tuple of NDArrays is the field's per-shard arrays (what ``Pad`` with
      ``num_shards > 1`` and the R-CNN targets are); shard ``i`` goes to device ``i``. A
      list with one NDArray per *sample* (``Append``) is split per shard, as a list.
    * an NDArray alone (``Stack``, or ``Pad`` with one shard) is split along axis 0 on the
      boundaries of the sharded fields (the ``np.array_split`` boundaries ``Pad`` uses), so
      ``Tuple(Stack(), Pad(num_shards=k))`` batches split consistently; with no sharded
      field the batch is one shard and goes to ``ctx_list[0]``, unless ``num_shards`` is
      given.
    * other lists and 1-d+ numpy arrays (``List()`` captions, metadata) are split on the
      same boundaries, uncopied; any other value (a number, None) is given to every
      device as it is.

    The top level of ``batch`` is a container of fields when it is a tuple (or namedtuple)
    or a dict, and one field otherwise (``Pad(num_shards=k)`` returns a list of shards);
    a tuple *inside* it whose items are all NDArrays is read as shards.

    Parameters
    ----------
    batch : NDArray, list, tuple, namedtuple or dict
        One batch.
    ctx_list : list of mx.Context
        The devices, one per shard (``mx.gpu(i)``; ``mx.cpu(i)`` are distinct contexts too).
    num_shards : int, optional
        Split a batch without sharded fields (e.g. ``Tuple(Stack(), Stack())``) into this
        many shards on ``np.array_split`` boundaries (at most one per sample), like
        ``gluon.utils.split_and_load`` with ``even_split=False``. When the batch has
        sharded fields they decide, and must agree with it.

    Returns
    -------
    list
        One item per shard used, ``len(result) <= len(ctx_list)``: for a tuple, namedtuple
        or dict batch an object of the same type holding that device's part of every
        field; for a one-field batch, that device's NDArray (or list). A batch with fewer
        shards than devices (the last, short batch) uses the first devices only.

    Raises
    ------
    ValueError
        More shards than devices (naming both counts), or fields that do not split alike.

    Notes
    -----
    ``Pad(ret_length=True)`` with one shard, nested in a ``Tuple``, returns a
    ``(padded, lengths)`` pair of NDArrays, which reads as two shards; unpack it into two
    fields (or use ``num_shards > 1``, which gives a pair of lists).

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> from gluonbatch.batchify import Pad, Tuple, List
    >>> ctx = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    >>> shards = Pad(num_shards=3)([[1], [2, 3], [4, 5, 6], [7]])
    >>> [(x.shape, x.context) for x in split_to_devices(shards, ctx)]
    [((2, 2), cpu(0)), ((1, 3), cpu(1)), ((1, 1), cpu(2))]

    The last batch of an epoch may have fewer samples than devices:

    >>> batch = Tuple(Pad(num_shards=3), List())([([1, 2], 'a'), ([3], 'b')])
    >>> split_to_devices(batch, ctx)
    [(
    [[1 2]]
    <NDArray 1x2 @cpu(0)>, ['a']), (
    [[3]]
    <NDArray 1x1 @cpu(1)>, ['b'])]

    A batch without sharded fields, split evenly:

    >>> parts = split_to_devices((mx.nd.arange(5), mx.nd.ones((5, 2))), ctx[:2], num_shards=2)
    >>> [(x.asnumpy().tolist(), y.shape) for x, y in parts]
    [([0.0, 1.0, 2.0], (3, 2)), ([3.0, 4.0], (2, 2))]
    """
    ctx_list = _check_contexts(ctx_list)
    num_shards = check_int(num_shards, 'num_shards', minimum=1, allow_none=True)
    tree = _parse(batch, 'field', True)
    if isinstance(tree, _Leaf):
        tree.name = 'the batch'
    leaves = list(_leaves(tree))
    bounds, reference = _layout(leaves, num_shards)
    if bounds is None or len(bounds) == 1 and reference is None:
        plan = {id(leaf): None for leaf in leaves}
        bounds = [(None, None)]
    else:
        plan = {id(leaf): _check_field(leaf, bounds, reference) for leaf in leaves}
    if len(bounds) > len(ctx_list):
        raise ValueError('the batch has %d shards but only %d device(s) were given; make it '
                         'with num_shards=%d (or fewer) or give %d contexts'
                         % (len(bounds), len(ctx_list), len(ctx_list), len(bounds)))
    return [_build(tree, plan, shard, start, stop, ctx)
            for shard, ((start, stop), ctx) in enumerate(zip(bounds, ctx_list))]


class ShardedLoader:
    """Iterate a loader's batches as per-device parts: ``split_to_devices`` on every batch.

    Parameters
    ----------
    loader : iterable of batches
        E.g. a ``mx.gluon.data.DataLoader`` whose batchify function was made with
        ``num_shards=len(ctx_list)``.
    ctx_list : list of mx.Context
        The devices.
    num_shards : int, optional
        Passed to :func:`split_to_devices` (for batches without sharded fields).

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> from gluonbatch.batchify import Tuple, Pad, Stack
    >>> data = mx.gluon.data.SimpleDataset([(np.ones(k + 1), k) for k in range(6)])
    >>> ctx = [mx.cpu(0), mx.cpu(1)]
    >>> loader = ShardedLoader(mx.gluon.data.DataLoader(
    ...     data, batch_size=4, batchify_fn=Tuple(Pad(num_shards=2), Stack())), ctx)
    >>> len(loader)
    2
    >>> for per_device in loader:
    ...     print([(x.shape, str(y.context)) for x, y in per_device])
    [((2, 2), 'cpu(0)'), ((2, 4), 'cpu(1)')]
    [((1, 5), 'cpu(0)'), ((1, 6), 'cpu(1)')]
    """

    def __init__(self, loader, ctx_list, num_shards=None):
        self.loader = loader
        self.ctx_list = _check_contexts(ctx_list)
        self.num_shards = check_int(num_shards, 'num_shards', minimum=1, allow_none=True)

    def __iter__(self):
        for batch in self.loader:
            yield split_to_devices(batch, self.ctx_list, self.num_shards)

    def __len__(self):
        return len(self.loader)

    def __repr__(self):
        return 'ShardedLoader(%r, ctx_list=%r)' % (self.loader, self.ctx_list)
