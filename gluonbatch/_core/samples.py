"""Turning one raw sample into a host numpy array, with a clear error for anything else."""
import numbers
import warnings

import mxnet as mx
import numpy as np

from .checks import check_batch, described
from .deferred import Deferred
from .native import host_view

__all__ = ['as_host_array', 'as_host_arrays']

# numpy kinds a batch can be made of: bool, signed, unsigned, float.
_NUMERIC_KINDS = 'biuf'
_SUPPORTED = 'an mx.nd.NDArray, a numpy.ndarray, a list/tuple of numbers or a number'


def as_host_array(sample, index, deferred=False):
    """A numpy array with the values of ``sample``, without copying arrays already on the host.

    NDArrays are waited for and viewed in place; lists, tuples and numbers go through
    ``np.asarray`` (so Python ints become int64 and floats float64). A
    :class:`~gluonbatch._core.deferred.Deferred` sample is returned as it is if
    ``deferred`` (the caller writes it with :mod:`~gluonbatch._core.write`), else computed.

    >>> as_host_array([1, 2], 0)
    array([1, 2])
    >>> as_host_array({'a': 1}, 3)
    Traceback (most recent call last):
    ...
    TypeError: sample 3 is a dict; expected an mx.nd.NDArray, a numpy.ndarray, a list/tuple of numbers or a number
    """
    if type(sample) is np.ndarray:  # the common case, before the ABC checks below
        array = sample
    elif isinstance(sample, mx.nd.NDArray):
        return host_view(sample)
    elif isinstance(sample, Deferred):
        return sample if deferred else np.asarray(sample)
    elif isinstance(sample, np.ndarray):
        array = sample
    elif isinstance(sample, (list, tuple, numbers.Real, np.generic)):
        with warnings.catch_warnings():
            # numpy < 1.24 only warns about ragged nested lists; make it an error.
            warnings.simplefilter('error', np.VisibleDeprecationWarning)
            try:
                array = np.asarray(sample)
            except (ValueError, np.VisibleDeprecationWarning, TypeError) as err:
                raise ValueError('sample %d is a ragged or mixed nested %s that cannot form an '
                                 'array (%s)' % (index, type(sample).__name__, err)) from None
    else:
        raise TypeError('sample %d is %s; expected %s' % (index, described(sample), _SUPPORTED))
    if array.dtype.kind not in _NUMERIC_KINDS:
        raise TypeError('sample %d is %s; expected numbers (%s)'
                        % (index, described(array), _SUPPORTED))
    return array


def as_host_arrays(samples, deferred=False):
    """:func:`as_host_array` of every sample of a batch checked by
    :func:`~gluonbatch._core.checks.check_batch`.

    >>> [a.shape for a in as_host_arrays([[1, 2], np.ones((3,))])]
    [(2,), (3,)]
    """
    check_batch(samples)
    return [as_host_array(sample, index, deferred) for index, sample in enumerate(samples)]
