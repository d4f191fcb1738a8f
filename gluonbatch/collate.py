"""``default_collate``: batch samples of any nesting, keeping their structure.

The habit PyTorch users bring: arrays are stacked along a new batch axis, numbers become
1-d arrays, strings are listed, and mappings, namedtuples and sequences keep their type
with each field collated recursively. What happens for each type is looked up in a
registry, so new types are supported by registering a function, not by editing code.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.collate import default_collate
>>> batch = default_collate([{'image': np.zeros((2, 2), 'uint8'), 'label': 3, 'name': 'a'},
...                          {'image': np.ones((2, 2), 'uint8'), 'label': 5, 'name': 'b'}])
>>> batch['image'].shape, batch['image'].dtype, batch['image'].context
((2, 2, 2), <class 'numpy.uint8'>, cpu_shared(0))
>>> batch['label'].asnumpy(), batch['name']
(array([3, 5]), ['a', 'b'])
"""
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias, overload

import mxnet as mx
import numpy as np

from ._core.assemble import apply_to_field, stack_arrays
from ._core.checks import BatchifyUsageError, check_batch, describe, described
from ._core.layout import common_dtype
from ._core.samples import as_host_arrays

__all__ = ['Collate', 'default_collate']

#: A collate function for one type: ``fn(samples, collate)``, ``collate`` to recurse with.
CollateFn: TypeAlias = Callable[[Sequence[Any], 'Collate'], Any]


def collate_arrays(samples, collate):
    """NDArrays, numpy arrays and numpy scalars: stacked on a new axis 0, dtype kept."""
    arrays = as_host_arrays(samples)
    return stack_arrays(arrays, common_dtype(arrays))


def collate_numbers(samples, collate):
    """Python numbers: a 1-d array (bool -> bool, int -> int64, float -> float64)."""
    for index, sample in enumerate(samples):
        if not isinstance(sample, (numbers.Real, np.bool_)):
            raise TypeError('sample %d is %s; the batch started with a number'
                            % (index, described(sample)))
    return collate_arrays(samples, collate)


def collate_as_list(samples, collate):
    """Strings and bytes: the list of samples."""
    return list(samples)


def collate_mapping(samples, collate):
    """Mappings: the same mapping type, each key collated over the batch."""
    first = samples[0]
    keys = set(first)
    for index, sample in enumerate(samples):
        if not isinstance(sample, Mapping):
            raise BatchifyUsageError('sample %d is %s; the batch started with %s'
                                     % (index, described(sample), described(first)))
        if set(sample) != keys:
            raise BatchifyUsageError('sample %d has keys %s; sample 0 has %s'
                                     % (index, sorted(map(str, sample)), sorted(map(str, keys))))
    collated = {key: apply_to_field(collate, [sample[key] for sample in samples], repr(key))
                for key in first}
    try:
        return type(first)(collated)
    except TypeError:  # e.g. defaultdict or mappings whose constructor needs more
        return collated


def collate_sequence(samples, collate):
    """Sequences: transposed, each position collated; namedtuples and tuples keep type."""
    first = samples[0]
    width = len(first)
    for index, sample in enumerate(samples):
        if isinstance(sample, (str, bytes)) or not isinstance(sample, Sequence):
            raise BatchifyUsageError('sample %d is %s; the batch started with %s'
                                     % (index, described(sample), described(first)))
        if len(sample) != width:
            raise BatchifyUsageError('each element in the batch should be of equal size: sample '
                                     '%d has %d items, sample 0 has %d'
                                     % (index, len(sample), width))
    fields = [apply_to_field(collate, [sample[i] for sample in samples], i) for i in range(width)]
    if hasattr(first, '_fields'):  # namedtuple
        return type(first)(*fields)
    try:
        return type(first)(fields)
    except TypeError:  # sequence types that cannot be built from a list
        return fields


class Collate:
    """A collate function with a type -> function registry.

    Calling it on a batch (a list of samples) looks at the type of the first sample and
    runs the function registered for the most specific type it is an instance of
    (abstract types such as ``collections.abc.MutableSequence`` included). Functions take
    ``(samples, collate)`` and may call ``collate(values)`` to recurse.

    Built in: ``mx.nd.NDArray``, ``numpy.ndarray`` and numpy scalars (stacked, dtype kept);
    ``bool``/``int``/``float`` (1-d NDArray of bool/int64/float64); ``str``/``bytes``
    (list); ``Mapping`` (same type, per key); namedtuples (same type, per field); other
    ``Sequence`` types (transposed, per position). Every NDArray returned is in
    ``cpu_shared(0)``.

    Examples
    --------
    >>> import numpy as np
    >>> from gluonbatch.collate import Collate
    >>> class Box:
    ...     def __init__(self, coords):
    ...         self.coords = coords
    >>> collate = Collate()
    >>> _ = collate.register(Box, lambda samples, c: c([box.coords for box in samples]))
    >>> boxes, labels = collate([(Box(np.array([0, 0, 2, 2])), 1),
    ...                           (Box(np.array([1, 1, 3, 3])), 0)])
    >>> boxes.shape, labels.asnumpy()
    ((2, 4), array([1, 0]))
    """

    def __init__(self) -> None:
        self._registry: dict[type, CollateFn] = {}
        self.register(mx.nd.NDArray, collate_arrays)
        self.register(np.ndarray, collate_arrays)
        self.register(np.generic, collate_arrays)
        for kind in (bool, int, float):
            self.register(kind, collate_numbers)
        self.register(numbers.Real, collate_numbers)
        self.register(str, collate_as_list)
        self.register(bytes, collate_as_list)
        self.register(Mapping, collate_mapping)
        self.register(Sequence, collate_sequence)

    @overload
    def register(self, kind: type) -> Callable[[CollateFn], CollateFn]: ...

    @overload
    def register(self, kind: type, fn: CollateFn) -> CollateFn: ...

    def register(self, kind: type, fn: CollateFn | None = None
                 ) -> CollateFn | Callable[[CollateFn], CollateFn]:
        """Use ``fn(samples, collate)`` for batches whose first sample is a ``kind``.

        A later registration for the same type replaces the earlier one. Without ``fn``,
        returns a decorator. Returns ``fn``.
        """
        if not isinstance(kind, type):
            raise TypeError('register takes a type, got %r' % (kind,))
        if fn is None:
            return lambda function: self.register(kind, function)
        if not callable(fn):
            raise TypeError('collate function for %s must be callable, got %s'
                            % (kind.__name__, describe(fn)))
        self._registry[kind] = fn
        return fn

    def lookup(self, kind: type) -> CollateFn | None:
        """The function for samples of type ``kind``, or None.

        Among the registered types ``kind`` is a subclass of, the most specific wins; where
        none is more specific than the others, the first in ``kind``'s method resolution
        order, then the first registered.
        """
        matches = [registered for registered in self._registry if issubclass(kind, registered)]
        if not matches:
            return None
        most_specific = [m for m in matches
                         if not any(o is not m and issubclass(o, m) for o in matches)]
        order = {base: position for position, base in enumerate(kind.__mro__)}
        best = min(most_specific, key=lambda m: order.get(m, len(order)))
        return self._registry[best]

    def supported_types(self) -> list[str]:
        """Names of the registered types, for error messages."""
        return [kind.__name__ for kind in self._registry]

    def __call__(self, batch: Sequence[Any]) -> Any:
        """Collate ``batch``, a list of samples."""
        check_batch(batch)
        fn = self.lookup(type(batch[0]))
        if fn is None:
            raise TypeError('cannot collate samples of type %s; supported types: %s (register '
                            'more with Collate().register)'
                            % (describe(batch[0]), ', '.join(self.supported_types())))
        return fn(batch, self)


#: The collate function with the built-in types; ``default_collate(batch)``.
default_collate = Collate()
