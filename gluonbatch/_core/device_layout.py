"""Device layouts: how each field of a batch splits across devices, declared, not inferred.

Every batchify function states the layout of what it returns in its ``device_layout``
attribute, and :func:`gluonbatch.devices.split_to_devices` reads it. A layout mirrors the
batch:

* ``'rows'``: one row per sample, split on the device slices' boundaries. An NDArray or
  numpy array is split on axis 0 and a list (``Append``, ``List``) item by item; a tuple,
  namedtuple or dict found here is a container whose every item is ``'rows'``. Other
  values (numbers, None, strings, 0-d arrays) go to every device.
* ``'per_device'``: a list or tuple with one NDArray per device slice
  (``Pad(num_shards=k)`` with k > 1, the R-CNN targets); item ``i`` goes to device ``i``.
* ``'fields'``: a list or tuple with one item per field, each ``'rows'``, or a single
  ``'rows'`` field (gluoncv's and MXNet's default batchify functions).
* ``'whole'``: given to every device (its NDArrays copied onto each).
* a tuple of layouts: a tuple or namedtuple batch, field by field;
* a dict of layouts: a dict batch, key by key.

A function that declares nothing (a plain function, ``default_collate``) has the layout
None: tuples and dicts are containers, arrays are split by rows, and a list of NDArrays,
which could be device slices, per-sample arrays or fields, is refused rather than guessed.

:func:`parse_batch` reads a batch by its layout, field by field, into :class:`Leaf` objects
(:func:`leaves`) that say how each splits.

Examples
--------
>>> from gluonbatch.batchify import Tuple, Pad, Stack
>>> Tuple(Pad(num_shards=2, ret_length=True), Stack()).device_layout
(('per_device', 'per_device'), 'rows')
>>> resolve_layout({'x': 'rows', 'id': 'whole'})
{'x': 'rows', 'id': 'whole'}
"""
from collections.abc import Mapping
from typing import Final

import mxnet as mx
import numpy as np

from .checks import described
from .wording import plural

__all__ = ['ROWS', 'PER_DEVICE', 'FIELDS', 'WHOLE', 'layout_of', 'resolve_layout', 'Leaf',
           'parse_batch', 'leaves']

# Final: each is its own Literal type, a LayoutKind
ROWS: Final = 'rows'
PER_DEVICE: Final = 'per_device'
FIELDS: Final = 'fields'
WHOLE: Final = 'whole'
_KINDS = (ROWS, PER_DEVICE, FIELDS, WHOLE)


def layout_of(fn):
    """The layout a batchify function declares; None if it declares none."""
    return getattr(fn, 'device_layout', None)


def _checked(layout, where):
    if layout is None:  # undeclared (a field of a Tuple of plain functions)
        return None
    if isinstance(layout, str):
        if layout not in _KINDS:
            raise ValueError('%s is %r; a device layout is one of %s, or a tuple or dict of '
                             'them' % (where, layout, ', '.join(map(repr, _KINDS))))
        return layout
    if isinstance(layout, tuple):
        return tuple(_checked(item, '%s[%d]' % (where, index))
                     for index, item in enumerate(layout))
    if isinstance(layout, Mapping):
        return {key: _checked(item, '%s[%r]' % (where, key)) for key, item in layout.items()}
    raise TypeError('%s is %s; a device layout is %s, or a tuple or dict of them'
                    % (where, described(layout), ', '.join(map(repr, _KINDS))))


def resolve_layout(layout):
    """A checked layout from ``layout``: a layout, a batchify function (its
    ``device_layout``, None if it declares none), or None.

    >>> resolve_layout(None), resolve_layout(('per_device', 'rows'))
    (None, ('per_device', 'rows'))
    >>> resolve_layout('rows ')
    Traceback (most recent call last):
    ...
    ValueError: layout is 'rows '; a device layout is one of 'rows', 'per_device', \
'fields', 'whole', or a tuple or dict of them
    """
    if isinstance(layout, type):
        raise TypeError('layout is the class %s; give the batchify function (an instance) '
                        'or a device layout' % layout.__name__)
    if callable(layout) and not isinstance(layout, (str, tuple, Mapping)):
        return _checked(layout_of(layout), 'the device_layout of %r' % (layout,))
    return _checked(layout, 'layout')


def _is_array(value):
    return isinstance(value, mx.nd.NDArray)


class Leaf:
    """One field of the batch: how it splits (its kind), its value and name for messages."""

    PER_DEVICE, WHOLE, ARRAY, SEQUENCE = PER_DEVICE, WHOLE, 'array', 'sequence'

    def __init__(self, kind, value, name):
        self.kind, self.value, self.name = kind, value, name

    def rows(self):
        """Rows of an ARRAY or SEQUENCE field."""
        return self.value.shape[0] if self.kind == Leaf.ARRAY else len(self.value)

    def slice_sizes(self):
        """Rows of each device slice of a PER_DEVICE field."""
        return [array.shape[0] for array in self.value]


def _container(value, layout, name):
    """A tuple/namedtuple/dict batch walked field by field with ``layout``'s items."""
    if isinstance(layout, tuple):
        if not isinstance(value, tuple):
            raise TypeError('%s is %s; its device layout %r expects a tuple of %d fields'
                            % (name, described(value), layout, len(layout)))
        if len(value) != len(layout):
            raise ValueError('%s has %s; its device layout %r expects %d'
                             % (name, plural(len(value), 'field'), layout, len(layout)))
        return (type(value), [parse_batch(item, sub, '%s[%d]' % (name, index))
                              for index, (item, sub) in enumerate(zip(value, layout))])
    if not isinstance(value, Mapping):
        raise TypeError('%s is %s; its device layout expects a dict with keys %s'
                        % (name, described(value), sorted(map(str, layout))))
    if set(value) != set(layout):
        raise ValueError('%s has keys %s; its device layout expects %s (missing %s, extra %s)'
                         % (name, sorted(map(str, value)), sorted(map(str, layout)),
                            sorted(map(str, set(layout) - set(value))),
                            sorted(map(str, set(value) - set(layout)))))
    return (type(value), {key: parse_batch(item, layout[key], '%s[%r]' % (name, key))
                          for key, item in value.items()})


def _each(container, layout):
    """``layout`` for every item of a tuple or dict."""
    if isinstance(container, Mapping):
        return {key: layout for key in container}
    return (layout,) * len(container)


def parse_batch(value, layout, name):
    """The batch ``value`` (called ``name`` in messages) as a tree of ``(container type,
    items)`` and :class:`Leaf` objects, as ``layout`` (resolved; None: the function declared
    nothing) says its fields split; ``TypeError``/``ValueError`` where it does not fit."""
    if isinstance(layout, (tuple, Mapping)):
        return _container(value, layout, name)
    if layout == PER_DEVICE:
        if not (isinstance(value, (list, tuple)) and value and all(map(_is_array, value))):
            raise TypeError('%s is %s; its device layout says one NDArray per device slice'
                            % (name, described(value)))
        for index, array in enumerate(value):
            if array.ndim == 0:
                raise ValueError('%s: device slice %d is a 0-d NDArray; per-device arrays '
                                 'need a batch axis' % (name, index))
        return Leaf(Leaf.PER_DEVICE, value, name)
    if layout == WHOLE:
        return Leaf(Leaf.WHOLE, value, name)
    if layout == FIELDS and isinstance(value, (list, tuple)):
        return (type(value), [parse_batch(item, ROWS, '%s[%d]' % (name, index))
                              for index, item in enumerate(value)])
    if isinstance(value, (tuple, Mapping)):
        return _container(value, _each(value, layout), name)
    if _is_array(value) and value.ndim:
        return Leaf(Leaf.ARRAY, value, name)
    if isinstance(value, list) and layout is None and value and all(
            _is_array(item) and item.ndim for item in value):
        raise ValueError('%s is a list of %d NDArrays, and the function that made it '
                         'declares no device_layout: they could be one per device, one per '
                         'sample or one per field. Pass layout= (the batchify function, or '
                         "'per_device', 'rows' or 'fields')" % (name, len(value)))
    if isinstance(value, list) or isinstance(value, np.ndarray) and value.ndim:
        return Leaf(Leaf.SEQUENCE, value, name)
    return Leaf(Leaf.WHOLE, value, name)


def leaves(tree):
    """Every :class:`Leaf` of a :func:`parse_batch` tree, in order."""
    if isinstance(tree, Leaf):
        yield tree
        return
    _, items = tree
    for item in (items.values() if isinstance(items, dict) else items):
        yield from leaves(item)
