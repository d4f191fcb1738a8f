"""Batch building blocks shared by every batchify function: stack, pad per device slice,
fields.

Each computes the layout first (shapes, device slices, dtype), allocates each output once
through :mod:`~gluonbatch._core.alloc` and writes every sample once into its slot.

Examples
--------
>>> import numpy as np
>>> stack_arrays([np.arange(2), np.arange(2)], np.dtype('int64')).asnumpy()
array([[0, 1],
       [0, 1]])
"""
import numpy as np

from .alloc import allocate, to_shared
from .checks import BatchifyUsageError
from .layout import check_pad_value, check_same_shape, common_dtype, normalize_axes, padded_shape
from .write import write_batch

__all__ = ['stack_arrays', 'pad_slices', 'apply_to_field']

# Errors whose message gains the field's name; any other error passes through untouched.
_INPUT_ERRORS = (ValueError, TypeError, BatchifyUsageError)


def stack_arrays(arrays, dtype):
    """Stack host arrays of one shape into a new output NDArray of ``dtype``."""
    check_same_shape([a.shape for a in arrays], arrays[0].shape)
    out, view = allocate((len(arrays),) + arrays[0].shape, dtype)
    write_batch(view, arrays)
    return out


def pad_slices(arrays, bounds, axis, pad_val, dtype=None, round_to=None, ret_length=False):
    """Pad host arrays device slice by slice into one output NDArray per slice.

    Parameters
    ----------
    arrays : list of numpy.ndarray
        The samples.
    bounds : list of (start, stop)
        The device slices, as :func:`~gluonbatch._core.layout.slice_bounds` returns them.
    axis : int or tuple of int
        The axes to pad (already checked by ``check_axis_argument``).
    pad_val : number
    dtype : numpy.dtype, optional
        Default: the samples' dtypes promoted.
    round_to : int, optional
        Round padded lengths up to a multiple of this.
    ret_length : bool
        Also make one int32 valid-length array per slice: (n,) for an int ``axis``,
        (n, len(axis)) for a tuple.

    Returns
    -------
    (list of NDArray, list of NDArray)
        The padded slices, and their valid lengths (empty unless ``ret_length``).

    >>> padded, lengths = pad_slices([np.ones(1), np.ones(3)], [(0, 2)], 0, -1,
    ...                              ret_length=True)
    >>> padded[0].asnumpy().tolist(), lengths[0].asnumpy().tolist()
    ([[1.0, -1.0, -1.0], [1.0, 1.0, 1.0]], [1, 3])
    """
    shapes = [a.shape for a in arrays]
    axes = normalize_axes(axis, arrays[0].ndim)
    check_same_shape(shapes, shapes[0], axes)
    dtype = dtype or common_dtype(arrays)
    check_pad_value(pad_val, dtype)
    padded, lengths = [], []
    for start, stop in bounds:
        slot = padded_shape(shapes[start:stop], axes, round_to)
        out, view = allocate((stop - start,) + slot, dtype)
        write_batch(view, arrays[start:stop], pad_val)
        padded.append(out)
        if ret_length:
            valid = [[shape[ax] for ax in axes] for shape in shapes[start:stop]]
            if not isinstance(axis, tuple):
                valid = [row[0] for row in valid]
            lengths.append(to_shared(valid, np.int32))
    return padded, lengths


def apply_to_field(fn, values, field):
    """Run one field's batchify function, naming the field in input errors.

    >>> apply_to_field(len, [1, 2], 'label')
    2
    >>> apply_to_field(lambda values: int('x'), [1], 'label')
    Traceback (most recent call last):
    ...
    ValueError: field label: invalid literal for int() with base 10: 'x'
    """
    try:
        return fn(values)
    except _INPUT_ERRORS as err:
        if type(err) not in _INPUT_ERRORS:
            raise
        raise type(err)('field %s: %s' % (field, err)) from err
