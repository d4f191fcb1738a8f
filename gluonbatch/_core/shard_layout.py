"""Shard layouts: how each field of a batch splits across devices, declared, not inferred.

Every batchify function states the layout of what it returns in its ``shard_layout``
attribute, and :func:`gluonbatch.sharding.split_to_devices` reads it. A layout mirrors the
batch:

* ``'rows'``: one row per sample, split on the shard boundaries. An NDArray or numpy
  array is split on axis 0 and a list (``Append``, ``List``) item by item; a tuple,
  namedtuple or dict found here is a container whose every item is ``'rows'``. Other
  values (numbers, None, strings, 0-d arrays) go to every device.
* ``'shards'``: a list or tuple with one NDArray per shard (``Pad(num_shards=k)`` with
  k > 1, the R-CNN targets); item ``i`` goes to device ``i``.
* ``'fields'``: a list or tuple with one item per field, each ``'rows'``, or a single
  ``'rows'`` field (gluoncv's and MXNet's default batchify functions).
* ``'whole'``: given to every device (its NDArrays copied onto each).
* a tuple of layouts: a tuple or namedtuple batch, field by field;
* a dict of layouts: a dict batch, key by key.

A function that declares nothing (a plain function, ``default_collate``) has the layout
None: tuples and dicts are containers, arrays are split by rows, and a list of NDArrays,
which could be shards, per-sample arrays or fields, is refused rather than guessed.

Examples
--------
>>> from gluonbatch.batchify import Tuple, Pad, Stack
>>> Tuple(Pad(num_shards=2, ret_length=True), Stack()).shard_layout
(('shards', 'shards'), 'rows')
>>> resolve_layout({'x': 'rows', 'id': 'whole'})
{'x': 'rows', 'id': 'whole'}
"""
from collections.abc import Mapping

from .checks import described

__all__ = ['ROWS', 'SHARDS', 'FIELDS', 'WHOLE', 'layout_of', 'resolve_layout']

ROWS, SHARDS, FIELDS, WHOLE = 'rows', 'shards', 'fields', 'whole'
_KINDS = (ROWS, SHARDS, FIELDS, WHOLE)


def layout_of(fn):
    """The layout a batchify function declares; None if it declares none."""
    return getattr(fn, 'shard_layout', None)


def _checked(layout, where):
    if layout is None:  # undeclared (a field of a Tuple of plain functions)
        return None
    if isinstance(layout, str):
        if layout not in _KINDS:
            raise ValueError('%s is %r; a shard layout is one of %s, or a tuple or dict of '
                             'them' % (where, layout, ', '.join(map(repr, _KINDS))))
        return layout
    if isinstance(layout, tuple):
        return tuple(_checked(item, '%s[%d]' % (where, index))
                     for index, item in enumerate(layout))
    if isinstance(layout, Mapping):
        return {key: _checked(item, '%s[%r]' % (where, key)) for key, item in layout.items()}
    raise TypeError('%s is %s; a shard layout is %s, or a tuple or dict of them'
                    % (where, described(layout), ', '.join(map(repr, _KINDS))))


def resolve_layout(layout):
    """A checked layout from ``layout``: a layout, a batchify function (its
    ``shard_layout``, None if it declares none), or None.

    >>> resolve_layout(None), resolve_layout(('shards', 'rows'))
    (None, ('shards', 'rows'))
    >>> resolve_layout('rows ')
    Traceback (most recent call last):
    ...
    ValueError: layout is 'rows '; a shard layout is one of 'rows', 'shards', 'fields', \
'whole', or a tuple or dict of them
    """
    if isinstance(layout, type):
        raise TypeError('layout is the class %s; give the batchify function (an instance) '
                        'or a shard layout' % layout.__name__)
    if callable(layout) and not isinstance(layout, (str, tuple, Mapping)):
        return _checked(layout_of(layout), 'the shard_layout of %r' % (layout,))
    return _checked(layout, 'layout')
