"""Pure layout arithmetic for batches: axes, device slice boundaries, padded shapes, dtypes.

Nothing here touches MXNet; every function is a plain computation on shapes and numbers
so that a whole batch layout is known (and validated) before any memory is allocated.
"""
import math
import numbers
import operator
import warnings

import numpy as np

from .checks import check_dtype, is_int
from .wording import plural

__all__ = ['normalize_axes', 'check_axis_argument', 'split_bounds', 'slice_bounds',
           'round_up', 'padded_shape', 'check_same_shape', 'common_dtype', 'check_pad_value']


def normalize_axes(axis, ndim, index=0):
    """Turn ``axis`` (int, tuple or list; negatives allowed) into a tuple of axes of ``ndim``.

    >>> normalize_axes(-1, 3)
    (2,)
    >>> normalize_axes((1, 2), 3)
    (1, 2)
    """
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    normalized = []
    for ax in axes:
        if not -ndim <= ax < ndim:
            raise ValueError('sample %d has %s; pad axis %d is out of range'
                             % (index, plural(ndim, 'dimension'), ax))
        normalized.append(int(ax) % ndim)
    if len(set(normalized)) != len(normalized):
        raise ValueError('pad axes %r name the same dimension twice' % (axis,))
    return tuple(normalized)


def check_axis_argument(axis):
    """Validate the ``axis`` argument of Pad at construction time.

    >>> check_axis_argument([1, 2])
    (1, 2)
    """
    if is_int(axis):
        return int(axis)
    if isinstance(axis, (tuple, list)) and axis and all(map(is_int, axis)):
        return tuple(int(a) for a in axis)
    raise TypeError('axis must be an int or a non-empty tuple/list of ints, got %r' % (axis,))


def split_bounds(num_samples, num_slices):
    """Start/stop indices of ``np.array_split`` boundaries, at most one slice per sample.

    The first ``num_samples % num_slices`` slices are one sample larger; zero samples make
    one empty slice.

    >>> split_bounds(7, 3)
    [(0, 3), (3, 5), (5, 7)]
    >>> split_bounds(2, 4), split_bounds(0, 2)
    ([(0, 1), (1, 2)], [(0, 0)])
    """
    num_slices = max(1, min(num_slices, num_samples))
    base, extra = divmod(num_samples, num_slices)
    bounds, start = [], 0
    for index in range(num_slices):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def slice_bounds(num_samples, num_shards):
    """:func:`split_bounds` of a batch into ``num_shards`` device slices, warning when there
    are more slices than samples.

    >>> slice_bounds(5, 4)
    [(0, 2), (2, 3), (3, 4), (4, 5)]
    """
    if num_shards > num_samples:
        warnings.warn('num_shards=%d is larger than the batch of %s; returning %s'
                      % (num_shards, plural(num_samples, 'sample'),
                         plural(num_samples, 'device slice')), stacklevel=3)
    return split_bounds(num_samples, num_shards)


def round_up(length, multiple):
    """Round ``length`` up to a multiple of ``multiple`` (None leaves it as is).

    >>> round_up(33, 32), round_up(0, 32), round_up(5, None)
    (64, 0, 5)
    """
    if multiple is None:
        return length
    return -(-length // multiple) * multiple


def padded_shape(shapes, axes, round_to=None):
    """Shape of one padded slot: the largest length on each pad axis, rounded up.

    ``shapes`` must already agree on every other axis.

    >>> padded_shape([(2, 5), (4, 5)], (0,))
    (4, 5)
    >>> padded_shape([(3, 500, 700), (3, 520, 690)], (1, 2), round_to=32)
    (3, 544, 704)
    """
    slot = list(shapes[0])
    for ax in axes:
        slot[ax] = round_up(max(shape[ax] for shape in shapes), round_to)
    return tuple(slot)


def check_same_shape(shapes, expected, axes=()):
    """Raise ValueError naming the first sample whose shape differs from ``expected``.

    Axes listed in ``axes`` may differ (they are padded).

    >>> check_same_shape([(2, 3), (2, 4)], (2, 3), axes=(1,))
    >>> check_same_shape([(2, 3), (3, 3)], (2, 3))
    Traceback (most recent call last):
    ...
    ValueError: sample 1 has shape (3, 3); expected (2, 3)
    """
    keep = [ax for ax in range(len(expected)) if ax not in axes]
    same_rank = all(len(shape) == len(expected) for shape in shapes)
    if same_rank and (not keep or _all_equal(list(map(operator.itemgetter(*keep), shapes)))):
        return  # the common case, checked at C speed
    wanted = [expected[ax] for ax in keep]
    for index, shape in enumerate(shapes):
        if len(shape) != len(expected):
            raise ValueError('sample %d has shape %s (%d dimensions); expected %d dimensions '
                             'like sample 0 %s' % (index, tuple(shape), len(shape),
                                                   len(expected), tuple(expected)))
        if [shape[ax] for ax in keep] != wanted:
            spelled = tuple('*' if ax in axes else d for ax, d in enumerate(expected))
            raise ValueError('sample %d has shape %s; expected %s' % (
                index, tuple(shape), str(spelled).replace("'", '')))


def _all_equal(values):
    return values.count(values[0]) == len(values)


def common_dtype(arrays):
    """The dtype of a batch of host arrays: their dtypes promoted (numpy promotion), if an
    NDArray can hold it.

    >>> common_dtype([np.zeros(2, 'int32'), np.zeros(2, 'float32')])
    dtype('float64')
    """
    # batches rarely mix dtypes; dedupe first
    return check_dtype(np.result_type(*{a.dtype for a in arrays}))


def check_pad_value(pad_val, dtype):
    """Raise ValueError if ``dtype`` cannot hold ``pad_val`` exactly.

    >>> check_pad_value(-1, np.dtype('uint8'))
    Traceback (most recent call last):
    ...
    ValueError: pad_val=-1 cannot be stored in uint8 (range 0..255)
    >>> check_pad_value(float('nan'), np.dtype('float32'))
    """
    if not isinstance(pad_val, (numbers.Number, np.generic)) or isinstance(pad_val, complex):
        raise TypeError('pad_val must be a real number, got %r' % (pad_val,))
    if dtype.kind == 'f':
        if math.isfinite(pad_val) and not math.isfinite(float(np.array(pad_val, dtype))):
            raise ValueError('pad_val=%r overflows %s' % (pad_val, dtype))
        return
    if not math.isfinite(pad_val) or pad_val != int(pad_val):
        raise ValueError('pad_val=%r cannot be stored in %s; use a float dtype or an integral '
                         'pad value' % (pad_val, dtype))
    if dtype.kind == 'b':
        if pad_val not in (0, 1):
            raise ValueError('pad_val=%r cannot be stored in bool (only 0 or 1)' % (pad_val,))
        return
    info = np.iinfo(dtype)
    if not info.min <= int(pad_val) <= info.max:
        raise ValueError('pad_val=%r cannot be stored in %s (range %d..%d)'
                         % (pad_val, dtype, info.min, info.max))

