"""Field combinators: ``Tuple`` (gluoncv's), ``List``, ``Dict`` and ``NamedTuple``
(GluonNLP's), each batchifying every field of the samples with its own function.

Examples
--------
>>> from gluonbatch.batchify import Dict, List, Stack
>>> batch = Dict({'x': Stack(), 'name': List()})([{'x': [1], 'name': 'a'},
...                                               {'x': [2], 'name': 'b'}])
>>> batch['x'].shape, batch['name']
((2, 1), ['a', 'b'])
"""
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.assemble import apply_to_field
from .._core.checks import (BatchifyUsageError, check_batch, check_callable, check_choice,
                            check_fields, describe, described)
from .._core.device_layout import ROWS, layout_of
from .._core.typing import BatchifyFn, DeviceLayout
from .._core.wording import plural

__all__ = ['Tuple', 'List', 'Dict', 'NamedTuple']


class Tuple:
    r"""Apply one batchify function per field of samples that are tuples (or lists).

    ``Tuple(A, B)``, ``Tuple([A, B])`` and ``Tuple((A, B))`` are the same. Returns a tuple.

    Examples
    --------
    >>> from gluonbatch.batchify import Tuple, Pad, Stack
    >>> data, label = Tuple(Pad(), Stack())([([1, 2, 3, 4], 0), ([5, 7], 1)])
    >>> data.asnumpy()
    array([[1, 2, 3, 4],
           [5, 7, 0, 0]])
    >>> label.asnumpy()
    array([0., 1.], dtype=float32)
    """

    def __init__(self, fn: BatchifyFn | Sequence[BatchifyFn], *args: BatchifyFn) -> None:
        if isinstance(fn, (list, tuple)):
            if args:
                raise BatchifyUsageError('Tuple takes Tuple(A, B, C), Tuple([A, B, C]) or '
                                         'Tuple((A, B, C)); got a sequence followed by %s'
                                         % plural(len(args), 'more argument'))
            fns = tuple(fn)
        else:
            fns = (fn,) + args
        if not fns:
            raise BatchifyUsageError('Tuple needs at least one batchify function')
        for index, ele_fn in enumerate(fns):
            check_callable(ele_fn, str(index))
        self._fn = fns

    def __call__(self, data: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
        """Return a tuple: field i of every sample batchified by the i-th function."""
        check_batch(data)
        check_fields(data, len(self._fn), 'Tuple')
        return tuple(apply_to_field(fn, [sample[i] for sample in data], i)
                     for i, fn in enumerate(self._fn))

    @property
    def device_layout(self) -> DeviceLayout:
        """The device layout of each field's function, as a tuple."""
        return tuple(layout_of(fn) for fn in self._fn)

    def __repr__(self):
        return 'Tuple(%s)' % ', '.join(repr(fn) for fn in self._fn)


class List:
    r"""Return the samples as a plain list, unbatched.

    For fields that are not arrays (captions, metadata, variable-size objects). The list is
    new; its items are the sample objects themselves, not copies.

    Examples
    --------
    >>> from gluonbatch.batchify import List
    >>> List()(['a cat', 'two dogs'])
    ['a cat', 'two dogs']
    """

    #: One item per sample: split on the device slices' boundaries (see
    #: ``split_to_devices``).
    device_layout: DeviceLayout = ROWS

    def __call__(self, data: Sequence[Any]) -> list[Any]:
        """Return ``list(data)``."""
        check_batch(data)
        return list(data)

    def __repr__(self):
        return 'List()'


class Dict:
    r"""Batchify samples that are dicts, one function per key; returns a dict.

    As in GluonNLP, keys of the samples without a function (an ``id``, a file path) are
    ignored; every sample must have every key of ``fn_dict``.

    Parameters
    ----------
    fn_dict : dict
        The batchify function of each key, applied to that key of every sample.
    strict : bool, default False
        Refuse samples with keys ``fn_dict`` has no function for.

    Examples
    --------
    >>> from gluonbatch.batchify import Dict, Pad, Stack
    >>> batch = Dict({'image': Stack(), 'boxes': Pad(pad_val=-1)})(
    ...     [{'image': [0, 0], 'boxes': [1, 2], 'id': 'a'},
    ...      {'image': [1, 1], 'boxes': [3], 'id': 'b'}])
    >>> sorted(batch), batch['boxes'].asnumpy()
    (['boxes', 'image'], array([[ 1,  2],
           [ 3, -1]]))
    >>> try:
    ...     Dict({'image': Stack()}, strict=True)([{'image': [0], 'id': 'a'}])
    ... except ValueError as err:
    ...     print(err)
    sample 0 has keys ['id', 'image']; expected ['image'] (missing [], extra ['id'])
    """

    def __init__(self, fn_dict: Mapping[Any, BatchifyFn], strict: bool = False) -> None:
        if not isinstance(fn_dict, Mapping):
            raise BatchifyUsageError('Dict takes a dict of batchify functions, got %s'
                                     % describe(fn_dict))
        for key, fn in fn_dict.items():
            check_callable(fn, repr(key))
        self._fn_dict = dict(fn_dict)
        self._strict = check_choice(strict, 'strict', (True, False))

    def __call__(self, data: Sequence[Mapping[Any, Any]]) -> dict[Any, Any]:
        """Return a dict: for each key, that key of every sample batchified by its function."""
        check_batch(data)
        keys = set(self._fn_dict)
        for index, sample in enumerate(data):
            if not isinstance(sample, Mapping):
                raise BatchifyUsageError('sample %d is %s; Dict expects a dict with keys %s'
                                         % (index, described(sample), sorted(map(str, keys))))
            missing, extra = keys - set(sample), set(sample) - keys
            if missing and not self._strict:
                raise BatchifyUsageError('sample %d lacks %s %s; Dict batchifies %s'
                                         % (index, 'key' if len(missing) == 1 else 'keys',
                                            sorted(map(str, missing)),
                                            sorted(map(str, keys))))
            if missing or (extra and self._strict):
                raise BatchifyUsageError(
                    'sample %d has keys %s; expected %s (missing %s, extra %s)'
                    % (index, sorted(map(str, sample)), sorted(map(str, keys)),
                       sorted(map(str, missing)), sorted(map(str, extra))))
        return {key: apply_to_field(fn, [sample[key] for sample in data], repr(key))
                for key, fn in self._fn_dict.items()}

    @property
    def device_layout(self) -> DeviceLayout:
        """The device layout of each key's function, as a dict."""
        return {key: layout_of(fn) for key, fn in self._fn_dict.items()}

    def __repr__(self):
        return 'Dict(%r%s)' % (self._fn_dict, ', strict=True' if self._strict else '')


class NamedTuple:
    r"""Batchify samples of a namedtuple type, one function per field; returns that type.

    Parameters
    ----------
    container : namedtuple type
    fn_info : list, tuple or dict
        One batchify function per field, in field order, or a dict from field name.

    Examples
    --------
    >>> from collections import namedtuple
    >>> from gluonbatch.batchify import NamedTuple, Stack, Pad
    >>> Sample = namedtuple('Sample', ['image', 'label'])
    >>> batchify = NamedTuple(Sample, {'image': Stack(), 'label': Pad()})
    >>> batch = batchify([Sample([0., 1.], [3]), Sample([2., 3.], [4, 5])])
    >>> type(batch).__name__, batch.label.asnumpy().tolist()
    ('Sample', [[3, 0], [4, 5]])
    """

    def __init__(self, container: type[tuple[Any, ...]],
                 fn_info: Sequence[BatchifyFn] | Mapping[str, BatchifyFn]) -> None:
        fields = getattr(container, '_fields', None)
        if not (isinstance(container, type) and issubclass(container, tuple) and fields):
            raise BatchifyUsageError('NamedTuple needs a namedtuple type, got %r' % (container,))
        if isinstance(fn_info, Mapping):
            if set(fn_info) != set(fields):
                raise BatchifyUsageError('the functions are for fields %s but %s has fields %s'
                                         % (sorted(map(str, fn_info)), container.__name__,
                                            list(fields)))
            fns = tuple(fn_info[name] for name in fields)
        elif isinstance(fn_info, (list, tuple)):
            if len(fn_info) != len(fields):
                raise BatchifyUsageError('%s given but %s has %s %s'
                                         % (plural(len(fn_info), 'function'),
                                            container.__name__, plural(len(fields), 'field'),
                                            list(fields)))
            fns = tuple(fn_info)
        else:
            raise BatchifyUsageError('fn_info must be a list, tuple or dict of batchify '
                                     'functions, got %s' % describe(fn_info))
        for name, fn in zip(fields, fns):
            check_callable(fn, name)
        self._container = container
        self._fields: tuple[str, ...] = tuple(fields)
        self._fns = fns

    def __call__(self, data: Sequence[tuple[Any, ...]]) -> tuple[Any, ...]:
        """Return a ``container`` whose fields are the batchified fields of ``data``."""
        check_batch(data)
        for index, sample in enumerate(data):
            if not isinstance(sample, self._container):
                raise BatchifyUsageError('sample %d is %s; expected %s'
                                         % (index, described(sample), self._container.__name__))
        fields = self._fields
        return self._container(*(apply_to_field(fn, [sample[i] for sample in data], fields[i])
                                 for i, fn in enumerate(self._fns)))

    @property
    def device_layout(self) -> DeviceLayout:
        """The device layout of each field's function, as a tuple in field order."""
        return tuple(layout_of(fn) for fn in self._fns)

    def __repr__(self):
        return 'NamedTuple(%s, %r)' % (self._container.__name__, self._fns)
