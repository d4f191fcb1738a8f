"""Scaling out: each device's slice of a batch onto its device.

One machine, many devices: a batchify function made with ``num_shards=len(ctx_list)``
pads each device's slice of a batch separately and declares which fields come one array
per device in its ``device_layout``; :func:`split_to_devices` reads that layout and copies
each slice onto its device, returning one tuple per device, and :class:`DeviceLoader` does
it for every batch of a loader. A batch with no per-device field is split by rows across
all the devices, like ``gluon.utils.split_and_load``. Many machines:
:class:`gluonbatch.samplers.SplitSampler` gives every rank its own part of the
dataset.

``num_shards`` is gluoncv's name for the number of device slices (``Pad``,
``FasterRCNNTrainBatchify``, ``MaskRCNNTrainBatchify``); gluonbatch keeps it there, and in
:func:`split_to_devices` and :class:`DeviceLoader`, which take the same number. Everywhere
else a shard is one tar file of a dataset (:mod:`gluonbatch.shards`).

Examples
--------
>>> import mxnet as mx, numpy as np
>>> from gluonbatch.batchify import Tuple, Stack, Pad
>>> from gluonbatch.devices import split_to_devices
>>> samples = [(np.full((3, 2 + k), k, 'float32'), k) for k in range(5)]
>>> batchify = Tuple(Pad(axis=1, num_shards=2), Stack())
>>> batchify.device_layout
('per_device', 'rows')
>>> [(x.shape, x.context, y.asnumpy().tolist()) for x, y in split_to_devices(
...     batchify(samples), [mx.cpu(0), mx.cpu(1)], layout=batchify)]
[((3, 3, 4), cpu(0), [0.0, 1.0, 2.0]), ((2, 3, 6), cpu(1), [3.0, 4.0])]
"""
from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any, TypeAlias

import mxnet as mx

from ._core.checks import check_int
from ._core.layout import split_bounds
from ._core.device_layout import FIELDS, Leaf, layout_of, leaves, parse_batch, resolve_layout
from ._core.tree import map_arrays
from ._core.typing import DeviceLayout
from ._core.wording import plural

__all__ = ['split_to_devices', 'DeviceLoader']

#: The devices of a batch: one ``mx.Context``, or one per device slice.
Contexts: TypeAlias = mx.Context | Iterable[mx.Context]
#: How a batch splits: a device layout, or the batchify function that declares it.
LayoutOrFn: TypeAlias = DeviceLayout | Callable[..., Any]


# --------------------------------------------------------------------------- devices

def _bounds(leaves, num_shards, num_devices):
    """The device slices' boundaries (start, stop) in the batch, checked against every
    field; [None] for the whole batch as one slice."""
    per_device = [leaf for leaf in leaves if leaf.kind == Leaf.PER_DEVICE]
    split = [leaf for leaf in leaves if leaf.kind in (Leaf.ARRAY, Leaf.SEQUENCE)]
    if per_device:
        first = per_device[0]
        sizes = first.slice_sizes()
        for leaf in per_device[1:]:
            if leaf.slice_sizes() != sizes:
                raise ValueError('%s has device slices of %s rows but %s has %s; the fields '
                                 'of a batch must be sliced alike'
                                 % (leaf.name, leaf.slice_sizes(), first.name, sizes))
        if num_shards is not None and len(sizes) > num_shards:
            raise ValueError('%s has %s; num_shards=%d was given'
                             % (first.name, plural(len(sizes), 'device slice'), num_shards))
        total = sum(sizes)
        for leaf in split:
            if leaf.rows() != total:
                raise ValueError('%s has %s; the batch has %s in %s %s, so a field split by '
                                 'rows must have %s'
                                 % (leaf.name, plural(leaf.rows(), 'row'),
                                    plural(total, 'sample'),
                                    plural(len(sizes), 'device slice'), sizes,
                                    plural(total, 'row')))
        return [(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(len(sizes))]
    # No per-device field: split by rows across every device, as split_and_load does, so
    # that swapping it for split_to_devices never leaves devices idle.
    wanted = num_devices if num_shards is None else num_shards
    rows = {leaf.name: leaf.rows() for leaf in split}
    if wanted == 1 or not rows:  # nothing to split: every field whole, on the first device
        return [None]
    if len(set(rows.values())) > 1:
        raise ValueError(
            'cannot split the batch %s: its fields have different numbers of rows (%s), so '
            'they do not split alike. Pass num_shards=1 to keep the whole batch on '
            "ctx_list[0], or layout= marking 'whole' the fields that are not one row per "
            'sample (each device then gets all of them)'
            % ('across %d devices' % num_devices if num_shards is None
               else 'into num_shards=%d device slices' % num_shards,
               ', '.join('%s: %d' % item for item in rows.items())))
    return split_bounds(next(iter(rows.values())), wanted)


def _copy(value, ctx):
    """An NDArray as one asynchronous copy on ``ctx`` (never the array itself); any other
    value as it is."""
    return value.copyto(ctx) if isinstance(value, mx.nd.NDArray) else value


def _piece(leaf, device, bounds, ctx):
    """Device ``device``'s part of one field; ``bounds`` None means the whole field."""
    value = leaf.value
    if leaf.kind == Leaf.WHOLE:  # its NDArrays (a 0-d one, say) copied onto each device
        return map_arrays(lambda array: _copy(array, ctx), value)
    if leaf.kind == Leaf.PER_DEVICE:
        return _copy(value[device], ctx)
    part = value if bounds is None else value[bounds[0]:bounds[1]]
    if leaf.kind == Leaf.ARRAY:
        return _copy(part, ctx)  # a slice is a view: one copy
    if isinstance(value, list):
        return [_copy(item, ctx) for item in part]  # Append: one NDArray per sample
    return part


def _build(tree, device, bounds, ctx):
    if isinstance(tree, Leaf):
        return _piece(tree, device, bounds, ctx)
    kind, items = tree
    if isinstance(items, dict):
        built = {key: _build(item, device, bounds, ctx) for key, item in items.items()}
        return built if kind is dict else kind(built)
    built = [_build(item, device, bounds, ctx) for item in items]
    if hasattr(kind, '_fields'):  # namedtuple
        return kind(*built)
    return kind(built)


def _check_contexts(ctx_list: Contexts) -> list[mx.Context]:
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


def split_to_devices(batch: Any, ctx_list: Contexts, num_shards: int | None = None, *,
                     layout: LayoutOrFn = None) -> list[Any]:
    """Copy each device's slice of a batch onto it: one item per device, ready to zip over.

    ``layout`` says how every field splits; pass the batchify function that made the batch
    and the ``device_layout`` it declares is used.
    Nothing is inferred from the types in the batch, so a pair of NDArrays (``Pad`` with
    ``ret_length=True``) is two fields and never two slices. Slice ``i`` of every field is
    copied onto ``ctx_list[i]`` (an asynchronous MXNet copy, one per slice; nothing else is
    copied on the host), so the NDArrays returned never share memory with ``batch``.

    * a per-device field (``Pad(num_shards=k)`` with k > 1, the R-CNN targets) gives
      device ``i`` its slice ``i``;
    * a field of rows (``Stack``, ``Pad`` with ``num_shards=1``, ``Append``, ``List``) is
      split on the slice boundaries of the per-device fields: NDArrays and numpy arrays on
      axis 0, lists item by item (their NDArrays copied to the device, other items as they
      are); a batch with no per-device field (SSD's ``Tuple(Stack(), Stack(), Stack())``,
      ``Pad(ret_length=True)``) is split across all of ``ctx_list`` (``num_shards`` if
      given) on ``np.array_split`` boundaries, like
      ``gluon.utils.split_and_load(..., even_split=False)``, so no device is left idle;
    * anything else (a number, None, a ``'whole'`` field) is given to every device, its
      NDArrays (a 0-d one, say) as a copy on each device.

    Fields of rows that differ in length cannot split alike: across several devices they
    raise a ``ValueError``; pass ``num_shards=1`` (the whole batch on ``ctx_list[0]``, as
    with one device) or a ``layout`` marking such a field ``'whole'``. A batch with nothing
    to split (only numbers, None or ``'whole'`` fields) is one item, on ``ctx_list[0]``.

    Parameters
    ----------
    batch : NDArray, list, tuple, namedtuple or dict
        One batch.
    ctx_list : list of mx.Context
        The devices, one per slice (``mx.gpu(i)``; ``mx.cpu(i)`` are distinct contexts too).
    num_shards : int, optional
        How many slices a batch without per-device fields (e.g. ``Tuple(Stack(),
        Stack())``) is split into, at most one per sample; ``len(ctx_list)`` by default,
        and ``num_shards=1`` keeps the whole batch on ``ctx_list[0]``. When the batch has
        per-device fields they decide, and must not be more than ``num_shards``.
    layout : batchify function or device layout, optional
        The function that made ``batch`` (anything with a ``device_layout``), or a layout:
        ``'rows'``, ``'per_device'``, ``'fields'``, ``'whole'``, or a tuple or dict of them
        mirroring the batch. Without one, no field of the batch is per device: tuples and
        dicts are containers, arrays are split by rows, and a list of NDArrays (one per
        device? per sample? per field?) raises a ``ValueError`` asking for ``layout``.

    Returns
    -------
    list
        One item per slice used, ``len(result) <= len(ctx_list)``: for a tuple, namedtuple
        or dict batch an object of the same type holding that device's part of every
        field; for a one-field batch, that device's NDArray (or list). A batch with fewer
        slices or samples than devices (the last, short batch) uses the first devices only.

    Raises
    ------
    ValueError
        More slices than devices (naming both counts), fields that do not split alike
        (naming them and their row counts), or a batch whose structure differs from its
        layout.
    TypeError
        A field the layout calls per-device that is not a list or tuple of NDArrays.

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> from gluonbatch.batchify import Pad, Tuple, List, Stack
    >>> ctx = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    >>> batchify = Pad(num_shards=3)
    >>> slices = batchify([[1], [2, 3], [4, 5, 6], [7]])
    >>> [(x.shape, x.context) for x in split_to_devices(slices, ctx, layout=batchify)]
    [((2, 2), cpu(0)), ((1, 3), cpu(1)), ((1, 1), cpu(2))]

    Without per-device fields the batch is split across every device; a pair of NDArrays
    is two fields, each split on the same boundaries:

    >>> batchify = Tuple(Pad(ret_length=True), Stack())
    >>> batch = batchify([([1, 2], 0), ([3], 1), ([4], 2), ([5, 6], 3)])
    >>> [(x.shape, n.asnumpy().tolist(), y.asnumpy().tolist(), y.context)
    ...  for (x, n), y in split_to_devices(batch, ctx, layout=batchify)]
    [((2, 2), [2, 1], [0.0, 1.0], cpu(0)), ((1, 2), [1], [2.0], cpu(1)), \
((1, 2), [2], [3.0], cpu(2))]
    >>> [y.shape for _, y in split_to_devices(batch, ctx, num_shards=1, layout=batchify)]
    [(4,)]

    The last batch of an epoch may have fewer samples than devices:

    >>> batchify = Tuple(Pad(num_shards=3), List())
    >>> batch = batchify([([1, 2], 'a'), ([3], 'b')])
    >>> [(x.context, names) for x, names in split_to_devices(batch, ctx, layout=batchify)]
    [(cpu(0), ['a']), (cpu(1), ['b'])]
    """
    devices = _check_contexts(ctx_list)
    num_shards = check_int(num_shards, 'num_shards', minimum=1, allow_none=True)
    tree = parse_batch(batch, resolve_layout(layout), 'the batch')
    bounds = _bounds(list(leaves(tree)), num_shards, len(devices))
    if len(bounds) > len(devices):
        raise ValueError('the batch has %s but only %s %s given; make it with '
                         'num_shards=%d (or fewer) or give %d contexts'
                         % (plural(len(bounds), 'device slice'),
                            plural(len(devices), 'device'),
                            'was' if len(devices) == 1 else 'were', len(devices),
                            len(bounds)))
    return [_build(tree, device, slice_bounds, ctx)
            for device, (slice_bounds, ctx) in enumerate(zip(bounds, devices))]


# MXNet's DataLoader batchifies with these unless given a function: one array per field.
_MXNET_DEFAULTS = (mx.gluon.data.dataloader.default_batchify_fn,
                   mx.gluon.data.dataloader.default_mp_batchify_fn)


class DeviceLoader:
    """Iterate a loader's batches as per-device parts: ``split_to_devices`` on every batch.

    :meth:`state_dict`, :meth:`load_state_dict` and :meth:`set_epoch` are the wrapped
    loader's (a seeded gluonbatch loader, ``seed=...``), so a training loop saves, resumes
    and sets epochs through the ``DeviceLoader``; over a loader without them they raise
    ``TypeError``.

    Parameters
    ----------
    loader : iterable of batches
        E.g. a ``mx.gluon.data.DataLoader``. With a batchify function made with
        ``num_shards=len(ctx_list)`` every device's slice is padded to its own maximum;
        batches without per-device fields are split across all of ``ctx_list``, like
        ``gluon.utils.split_and_load``.
    ctx_list : list of mx.Context
        The devices.
    num_shards : int, optional
        Passed to :func:`split_to_devices`: the slices of batches without per-device
        fields, ``len(ctx_list)`` by default (1: every batch whole on ``ctx_list[0]``).
    layout : batchify function or device layout, optional
        How the batches split. By default the ``device_layout`` of the loader's batchify
        function (an MXNet ``DataLoader`` keeps it as ``_batchify_fn``; MXNet's own default
        batchify functions are ``'fields'``), None if it declares none.

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> from gluonbatch.batchify import Tuple, Pad, Stack
    >>> data = mx.gluon.data.SimpleDataset([(np.ones(k + 1), k) for k in range(6)])
    >>> ctx = [mx.cpu(0), mx.cpu(1)]
    >>> loader = DeviceLoader(mx.gluon.data.DataLoader(
    ...     data, batch_size=4, batchify_fn=Tuple(Pad(num_shards=2), Stack())), ctx)
    >>> len(loader), loader.layout
    (2, ('per_device', 'rows'))
    >>> for per_device in loader:
    ...     print([(x.shape, str(y.context)) for x, y in per_device])
    [((2, 2), 'cpu(0)'), ((2, 4), 'cpu(1)')]
    [((1, 5), 'cpu(0)'), ((1, 6), 'cpu(1)')]

    Batches without per-device fields are split across the devices too:

    >>> stacked = DeviceLoader(mx.gluon.data.DataLoader(mx.gluon.data.SimpleDataset(
    ...     list(range(6))), batch_size=6, batchify_fn=Stack()), ctx)
    >>> [(x.asnumpy().tolist(), str(x.context)) for x in next(iter(stacked))]
    [([0.0, 1.0, 2.0], 'cpu(0)'), ([3.0, 4.0, 5.0], 'cpu(1)')]
    """

    def __init__(self, loader: Iterable[Any], ctx_list: Contexts, num_shards: int | None = None,
                 *, layout: LayoutOrFn = None) -> None:
        self.loader = loader
        self.ctx_list = _check_contexts(ctx_list)
        self.num_shards = check_int(num_shards, 'num_shards', minimum=1, allow_none=True)
        if layout is None:
            batchify_fn = getattr(loader, '_batchify_fn', None)
            layout = FIELDS if batchify_fn in _MXNET_DEFAULTS else layout_of(batchify_fn)
        self.layout = resolve_layout(layout)

    def __iter__(self) -> Iterator[list[Any]]:
        for batch in self.loader:
            yield split_to_devices(batch, self.ctx_list, self.num_shards, layout=self.layout)

    def _passed_on(self, method):
        """The wrapped loader's ``method``; TypeError if it has none."""
        found = getattr(self.loader, method, None)
        if not callable(found):
            raise TypeError('DeviceLoader.%s() calls its loader\'s, and %s has no %s(): wrap '
                            'a seeded gluonbatch loader (seed=...) to save, resume or set '
                            'epochs' % (method, type(self.loader).__name__, method))
        return found

    def state_dict(self) -> dict:
        """The wrapped loader's ``state_dict()``: where the run is (the devices do not
        change it, so a run may resume on another number of them).

        Examples
        --------
        >>> import warnings
        >>> import mxnet as mx, numpy as np
        >>> from gluonbatch.batchify import Pad
        >>> from gluonbatch.dataloader import DetectionDataLoader
        >>> data = mx.gluon.data.SimpleDataset([np.ones(k + 1) for k in range(6)])
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter('ignore')   # DetectionDataLoader is deprecated
        ...     seeded = DetectionDataLoader(data, batch_size=2, shuffle=True, seed=3,
        ...                                  batchify_fn=Pad(num_shards=2))
        >>> loader = DeviceLoader(seeded, [mx.cpu(0), mx.cpu(1)])
        >>> batches = iter(loader)
        >>> first = next(batches)   # during the pass: the batch after the one delivered
        >>> state = loader.state_dict()
        >>> state['seed'], state['epoch'], state['batch']
        (3, 0, 1)
        >>> rest = list(batches)
        >>> loader.set_epoch(4)   # the next pass
        >>> state = loader.state_dict()
        >>> state['epoch'], state['batch']
        (4, 0)
        """
        return self._passed_on('state_dict')()

    def load_state_dict(self, state: dict) -> None:
        """The wrapped loader's ``load_state_dict(state)``: the next pass continues where
        ``state`` says."""
        self._passed_on('load_state_dict')(state)

    def set_epoch(self, epoch: int) -> None:
        """The wrapped loader's ``set_epoch(epoch)``: the next pass is epoch ``epoch``."""
        self._passed_on('set_epoch')(epoch)

    def __len__(self) -> int:
        if not isinstance(self.loader, Sized):
            raise TypeError('DeviceLoader has a length when its loader has one, and %s has '
                            'none' % (type(self.loader).__name__,))
        return len(self.loader)

    def __repr__(self):
        return 'DeviceLoader(%r, ctx_list=%r, layout=%r)' % (self.loader, self.ctx_list,
                                                              self.layout)
