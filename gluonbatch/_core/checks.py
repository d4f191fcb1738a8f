"""The one input-check policy of gluonbatch.

A wrong type raises ``TypeError``, a bad value ``ValueError``; each message names what was
seen and what was expected (and the sample index where there is one). Misusing a
combinator -- ``Dict`` given a non-dict, a non-callable batchify function, a
``NamedTuple`` field mismatch, samples of the wrong container type -- raises
:class:`BatchifyUsageError`, which is both: GluonNLP raises ``ValueError`` there and
gluoncv-style code catches ``TypeError``, and migrating code that catches either keeps
working.

Examples
--------
>>> check_int(3, 'num_shards', minimum=1)
3
>>> check_int('3', 'num_shards', minimum=1)
Traceback (most recent call last):
...
TypeError: num_shards must be an integer, got '3' (str)
>>> check_int(0, 'num_shards', minimum=1)
Traceback (most recent call last):
...
ValueError: num_shards must be an integer >= 1, got 0
"""
import numbers
from collections.abc import Mapping, Sequence

import numpy as np

from .wording import plural, with_article

__all__ = ['BatchifyUsageError', 'describe', 'described', 'is_int', 'is_real', 'check_int',
           'check_index', 'check_choice', 'check_str', 'check_callable', 'check_batch',
           'check_fields', 'check_part', 'check_dtype', 'SUPPORTED_DTYPES']

#: dtypes a legacy ``mx.nd.NDArray`` can hold.
SUPPORTED_DTYPES = tuple(np.dtype(t) for t in (
    np.float32, np.float64, np.float16, np.uint8, np.int8, np.int32, np.int64, np.bool_))


class BatchifyUsageError(TypeError, ValueError):
    """A batchify function misused: wrong container, field mismatch, a non-callable.

    Derives from both ``TypeError`` (gluoncv-style code) and ``ValueError`` (GluonNLP's
    contract), so code that catches either keeps working.

    >>> issubclass(BatchifyUsageError, TypeError), issubclass(BatchifyUsageError, ValueError)
    (True, True)
    """


def describe(value):
    """Short description of a value for error messages.

    >>> describe(np.zeros((2, 3), 'uint8'))
    'numpy.ndarray of shape (2, 3) and dtype uint8'
    >>> describe('cat')
    'str'
    """
    kind = type(value)
    name = kind.__name__ if kind.__module__ == 'builtins' else '%s.%s' % (
        kind.__module__.split('.')[0], kind.__name__)
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        return '%s of shape %s and dtype %s' % (name, tuple(value.shape), np.dtype(value.dtype))
    return name


def described(value):
    """:func:`describe` after its article, as messages write it.

    >>> described(3), described([1])
    ('an int', 'a list')
    """
    return with_article(describe(value))


def is_int(value):
    """Whether ``value`` is an integer (bool is not).

    >>> is_int(3), is_int(np.int64(3)), is_int(True), is_int(3.0)
    (True, True, False, False)
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value):
    """Whether ``value`` is an int or a float, Python's or numpy's (bool is not).

    >>> is_real(3), is_real(np.float32(0.5)), is_real(True), is_real('3')
    (True, True, False, False)
    """
    return isinstance(value, (int, float, np.integer, np.floating)) and \
        not isinstance(value, bool)


def check_int(value, name, minimum=None, allow_none=False):
    """Return ``value`` as an int: TypeError if it is not an integer, ValueError if it is
    below ``minimum``; ``None`` passes when ``allow_none``.

    >>> check_int(None, 'round_to', minimum=1, allow_none=True) is None
    True
    >>> check_int(True, 'seed')
    Traceback (most recent call last):
    ...
    TypeError: seed must be an integer, got True (bool)
    """
    if value is None and allow_none:
        return None
    if not is_int(value):
        raise TypeError('%s must be an integer%s, got %r (%s)'
                        % (name, ' or None' if allow_none else '', value, describe(value)))
    if minimum is not None and value < minimum:
        raise ValueError('%s must be an integer >= %d, got %r' % (name, minimum, value))
    return int(value)


def check_index(idx, length, name='record index'):
    """``idx`` as a position in ``range(length)``, counting from the end when negative as a
    list does: TypeError for a non-integer, IndexError out of range.

    >>> check_index(-1, 5)
    4
    >>> check_index(5, 5)
    Traceback (most recent call last):
    ...
    IndexError: record index 5 out of range for 5 records
    """
    i = idx if type(idx) is int else check_int(idx, name)  # int: the hot path
    if i < 0:
        i += length
    if not 0 <= i < length:
        raise IndexError('%s %d out of range for %s' % (name, idx, plural(length, 'record')))
    return i


def check_choice(value, name, choices):
    """Return ``value`` if it is one of ``choices``: TypeError if it is not even of their
    type, else ValueError.

    >>> check_choice('pad', 'last_part', ('pad', 'drop'))
    'pad'
    >>> check_choice('keep', 'last_part', ('pad', 'drop'))
    Traceback (most recent call last):
    ...
    ValueError: last_part must be one of pad, drop, got 'keep'
    """
    kinds = tuple({type(choice) for choice in choices})
    if not isinstance(value, kinds):
        raise TypeError('%s must be one of %s, got %r (%s)'
                        % (name, ', '.join(map(str, choices)), value, describe(value)))
    if value not in choices:
        raise ValueError('%s must be one of %s, got %r'
                         % (name, ', '.join(map(str, choices)), value))
    return value


def check_str(value, name):
    """``value``, or TypeError naming ``name`` unless it is a str.

    >>> check_str('key', 'id_col')
    'key'
    >>> check_str(3, 'id_col')
    Traceback (most recent call last):
    ...
    TypeError: id_col must be a str, got 3
    """
    if not isinstance(value, str):
        raise TypeError('%s must be a str, got %r' % (name, value))
    return value


def check_callable(fn, name):
    """Raise BatchifyUsageError unless ``fn`` is callable.

    >>> check_callable(len, '0')
    >>> check_callable(3, '0')
    Traceback (most recent call last):
    ...
    gluonbatch._core.checks.BatchifyUsageError: batchify function 0 must be callable, got int
    """
    if not callable(fn):
        raise BatchifyUsageError('batchify function %s must be callable, got %s'
                                 % (name, describe(fn)))


def check_batch(data):
    """Raise unless ``data`` is a non-empty sequence of samples.

    A string, a mapping or anything without a length is a TypeError (a dict passed as a
    batch would otherwise be batchified by its keys); an empty batch a ValueError.

    >>> check_batch([1, 2])
    >>> check_batch({0: [1, 2]})
    Traceback (most recent call last):
    ...
    TypeError: a batch must be a list of samples, got dict
    """
    sized = isinstance(data, Sequence) or (
        hasattr(data, '__getitem__') and getattr(data, 'ndim', 1) > 0 and hasattr(data, '__len__'))
    if isinstance(data, (str, bytes, Mapping)) or not sized:
        raise TypeError('a batch must be a list of samples, got %s' % describe(data))
    if len(data) == 0:
        raise ValueError('the batch is empty: there are no samples to batchify')


def check_fields(data, width, owner, unit='field'):
    """Raise BatchifyUsageError unless every sample is a tuple or list of ``width`` items.

    ``owner`` names the function that expects them in the message.

    >>> check_fields([(1, 2), (3, 4)], 2, 'Tuple')
    >>> check_fields([(1, 2), (3,)], 2, 'Tuple')
    Traceback (most recent call last):
    ...
    gluonbatch._core.checks.BatchifyUsageError: sample 1 has 1 field; Tuple expects 2
    """
    for index, sample in enumerate(data):
        if isinstance(sample, (str, bytes, Mapping)) or not isinstance(sample, Sequence):
            raise BatchifyUsageError('sample %d is %s; %s expects a tuple or list of %s'
                                     % (index, described(sample), owner, plural(width, unit)))
        if len(sample) != width:
            raise BatchifyUsageError('sample %d has %s; %s expects %d'
                                     % (index, plural(len(sample), unit), owner, width))


def check_part(num_parts, part_index):
    """Return ``(num_parts, part_index)`` as ints if they name one part of a split, as
    :func:`check_int` checks them (``num_parts >= 1``, ``0 <= part_index < num_parts``).

    >>> check_part(4, 3)
    (4, 3)
    >>> check_part(4, 4)
    Traceback (most recent call last):
    ...
    ValueError: part_index must be in [0, num_parts); got part_index 4 with num_parts 4
    """
    num_parts = check_int(num_parts, 'num_parts', minimum=1)
    part_index = check_int(part_index, 'part_index', minimum=0)
    if part_index >= num_parts:
        raise ValueError('part_index must be in [0, num_parts); got part_index %d with '
                         'num_parts %d' % (part_index, num_parts))
    return num_parts, part_index


def check_dtype(dtype):
    """Return ``np.dtype(dtype)`` if an NDArray can hold it, else raise TypeError.

    >>> check_dtype('float16')
    dtype('float16')
    """
    dtype = np.dtype(dtype)
    if dtype not in SUPPORTED_DTYPES:
        raise TypeError('MXNet NDArrays cannot hold dtype %s; pass dtype= one of %s'
                        % (dtype, ', '.join(str(t) for t in SUPPORTED_DTYPES)))
    return dtype
