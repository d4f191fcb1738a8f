"""The default batchify functions of ``gluoncv.data.dataloader``.

Every batch is written once into ``cpu_shared`` memory, so the ``_mp_`` variants are the
same functions as their plain twins; both names exist so that gluoncv code keeps working.

Examples
--------
>>> import numpy as np
>>> images, labels = default_pad_batchify_fn(
...     [(np.zeros((3, 2, 2), 'float32'), np.ones((1, 5), 'float32')),
...      (np.ones((3, 2, 2), 'float32'), np.ones((3, 5), 'float32'))])
>>> images.shape, labels.shape, labels.asnumpy()[0, 1, 0]
((2, 3, 2, 2), (2, 3, 5), -1.0)
"""
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np

from .._core.alloc import allocate
from .._core.assemble import stack_arrays
from .._core.checks import check_batch, check_fields
from .._core.layout import common_dtype
from .._core.samples import as_host_arrays
from .._core.device_layout import FIELDS
from .._core.typing import NDArray
from .._core.write import write_slots
from ..batchify import Pad

__all__ = ['default_batchify_fn', 'default_mp_batchify_fn', 'default_pad_batchify_fn',
           'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn']


def _per_field(fn, data):
    """Tuple samples: ``fn`` applied to each field, as a list (gluoncv's layout). Every
    sample must have as many fields as sample 0 (gluoncv silently drops the extra ones)."""
    check_fields(data, len(data[0]), '%s (like sample 0)' % fn.__name__)
    return [fn(list(field)) for field in zip(*data)]


def _stack_keeping_dtype(data):
    arrays = as_host_arrays(data)
    return stack_arrays(arrays, common_dtype(arrays))


def default_batchify_fn(data: Sequence[Any]) -> NDArray | list[Any]:
    """Stack samples (dtype kept); tuple samples give a list with one batch per field.

    >>> default_batchify_fn([(1, [0.5, 1.0]), (2, [1.5, 2.0])])[0].asnumpy()
    array([1, 2])
    """
    check_batch(data)
    if isinstance(data[0], tuple):
        return _per_field(default_batchify_fn, data)
    return _stack_keeping_dtype(data)


# One array per field, or one array (split_to_devices reads this). A function attribute,
# which type checkers do not model: set by name.
setattr(default_batchify_fn, 'device_layout', FIELDS)

#: gluonbatch always batches into shared memory: the same function as ``default_batchify_fn``.
default_mp_batchify_fn = default_batchify_fn

_LABEL_PAD = Pad(pad_val=-1)


def default_pad_batchify_fn(data: Sequence[Any]) -> NDArray | list[Any]:
    """Stack NDArrays; pad other arrays (labels) on axis 0 with -1; tuples per field.

    Padded labels are at least one row long, as in gluoncv, so a batch without objects
    still has the (N, 1, C) layout.

    >>> import numpy as np
    >>> default_pad_batchify_fn([np.zeros((0, 6)), np.zeros((0, 6))]).shape
    (2, 1, 6)
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, tuple):
        return _per_field(default_pad_batchify_fn, data)
    if isinstance(first, mx.nd.NDArray):
        return _stack_keeping_dtype(data)
    arrays = as_host_arrays(data)
    if any(array.ndim == 0 for array in arrays):
        raise ValueError('default_pad_batchify_fn pads arrays on axis 0; sample %d is a number'
                         % next(i for i, a in enumerate(arrays) if a.ndim == 0))
    if all(len(array) == 0 for array in arrays):
        # no sample has a row: one row of padding keeps the layout
        arrays = [np.full((1,) + arrays[0].shape[1:], -1, arrays[0].dtype)] + arrays[1:]
    padded, _ = _LABEL_PAD.pad_slices(arrays, [(0, len(arrays))])
    return padded[0]


setattr(default_pad_batchify_fn, 'device_layout', FIELDS)

#: gluonbatch always batches into shared memory: the same as ``default_pad_batchify_fn``.
default_mp_pad_batchify_fn = default_pad_batchify_fn


def tsn_mp_batchify_fn(data: Sequence[Any]) -> NDArray | list[Any]:
    """Concatenate NDArrays that already carry a batch axis (temporal segment networks).

    NDArray samples are concatenated on axis 0; other samples are stacked (dtype kept);
    tuple samples give a list with one batch per field.

    >>> import mxnet as mx
    >>> tsn_mp_batchify_fn([mx.nd.ones((3, 2)), mx.nd.zeros((5, 2))]).shape
    (8, 2)
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, tuple):
        return _per_field(tsn_mp_batchify_fn, data)
    if not isinstance(first, mx.nd.NDArray):
        return _stack_keeping_dtype(data)
    arrays = as_host_arrays(data)
    for index, array in enumerate(arrays):
        if array.ndim == 0 or array.shape[1:] != arrays[0].shape[1:]:
            raise ValueError('sample %d has shape %s; expected (*,) + %s to concatenate on '
                             'axis 0' % (index, array.shape, arrays[0].shape[1:]))
    out, view = allocate((sum(len(a) for a in arrays),) + arrays[0].shape[1:],
                         common_dtype(arrays))
    jobs, start = [], 0
    for array in arrays:
        jobs.append((view[start:start + len(array)], array, 0))
        start += len(array)
    write_slots(jobs, view.nbytes)
    return out
