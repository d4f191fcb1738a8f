"""Drop-in for ``gluoncv.data.dataloader``: default batchify functions and loaders.

Every batch is written once into ``cpu_shared`` memory, so the ``_mp_`` variants are the
same functions as their plain twins; both names exist so that gluoncv code keeps working.
``DetectionDataLoader`` and ``RandomTransformDataLoader`` run their own worker pool; an
error while loading a batch is raised as the original exception, with notes naming the
dataset indices of the batch and, from a worker, the worker's traceback.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.dataloader import default_pad_batchify_fn
>>> images, labels = default_pad_batchify_fn(
...     [(np.zeros((3, 2, 2), 'float32'), np.ones((1, 5), 'float32')),
...      (np.ones((3, 2, 2), 'float32'), np.ones((3, 5), 'float32'))])
>>> images.shape, labels.shape, labels.asnumpy()[0, 1, 0]
((2, 3, 2, 2), (2, 3, 5), -1.0)
"""
import warnings

import mxnet as mx
import numpy as np

from ._core.alloc import allocate
from ._core.assemble import stack_arrays
from ._core.checks import check_batch, check_fields, check_int, describe
from ._core.layout import common_dtype
from ._core.samples import as_host_arrays
from ._core.shard_layout import FIELDS
from ._core.write import write_slots
from ._pool import PooledLoader
from .batchify import Pad
from .sampler import SplitSampler
from .sharding import split_to_devices, ShardedLoader

__all__ = ['default_batchify_fn', 'default_mp_batchify_fn', 'default_pad_batchify_fn',
           'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn', 'DetectionDataLoader',
           'RandomTransformDataLoader', 'split_to_devices', 'ShardedLoader', 'SplitSampler']


def _per_field(fn, data):
    """Tuple samples: ``fn`` applied to each field, as a list (gluoncv's layout). Every
    sample must have as many fields as sample 0 (gluoncv silently drops the extra ones)."""
    check_fields(data, len(data[0]), '%s (like sample 0)' % fn.__name__)
    return [fn(list(field)) for field in zip(*data)]


def _stack_keeping_dtype(data):
    arrays = as_host_arrays(data)
    return stack_arrays(arrays, common_dtype(arrays))


def default_batchify_fn(data):
    """Stack samples (dtype kept); tuple samples give a list with one batch per field.

    >>> default_batchify_fn([(1, [0.5, 1.0]), (2, [1.5, 2.0])])[0].asnumpy()
    array([1, 2])
    """
    check_batch(data)
    if isinstance(data[0], tuple):
        return _per_field(default_batchify_fn, data)
    return _stack_keeping_dtype(data)


# One array per field, or one array (split_to_devices reads this).
default_batchify_fn.shard_layout = FIELDS

#: gluonbatch always batches into shared memory: the same function as ``default_batchify_fn``.
default_mp_batchify_fn = default_batchify_fn

_LABEL_PAD = Pad(pad_val=-1)


def default_pad_batchify_fn(data):
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
    padded, _ = _LABEL_PAD.pad_shards(arrays, [(0, len(arrays))])
    return padded[0]


default_pad_batchify_fn.shard_layout = FIELDS

#: gluonbatch always batches into shared memory: the same as ``default_pad_batchify_fn``.
default_mp_pad_batchify_fn = default_pad_batchify_fn


def tsn_mp_batchify_fn(data):
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


# --------------------------------------------------------------------------- loaders

class DetectionDataLoader(PooledLoader):
    """Data loader for detection datasets whose labels have different numbers of objects.

    Deprecated in gluoncv in favour of ``mx.gluon.data.DataLoader`` with batchify
    functions, and kept so that gluoncv code keeps working. By default labels are padded
    with -1 (:func:`default_pad_batchify_fn`).

    Parameters
    ----------
    dataset : mxnet.gluon.data.Dataset
    batch_size, shuffle, sampler, last_batch, batch_sampler, batchify_fn :
        As for ``mx.gluon.data.DataLoader``.
    num_workers : int, default 0
        Worker processes; 0 loads every batch in this process.
    timeout : float or None, default 120
        Seconds to wait for a worker's batch before raising (a stuck worker); None waits
        without limit. A worker that died raises at once.

    Raises
    ------
    TypeError, ValueError
        ``num_workers`` is not an integer, or is negative; ``timeout`` is not a number (or
        None), or not above 0.

    Notes
    -----
    A batch that fails to load raises the original exception (type, arguments and
    message unchanged) with notes naming its dataset indices and, from a worker, the
    worker's traceback.

    A worker process that dies (the out-of-memory killer, say) raises a ``RuntimeError``
    naming its pid and the dataset indices of its batch as soon as it is seen dead,
    whether it died loading the batch or after sending it (whose shared memory then
    cannot be received). The pool starts a new worker, so the next pass works.

    Leaving a pass early (``break``) gives back the batches it had in flight: those that
    have arrived are freed at once, the others when the next pass begins, which first
    waits for them.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np, mxnet as mx
    >>> data = mx.gluon.data.SimpleDataset(
    ...     [(np.zeros((3, 4, 4), 'float32'), np.ones((k + 1, 5), 'float32'))
    ...      for k in range(5)])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     loader = DetectionDataLoader(data, batch_size=2, last_batch='keep')
    >>> [labels.shape for _, labels in loader]
    [(2, 2, 5), (2, 4, 5), (1, 5, 5)]

    A sample that fails to load raises its own exception, the indices in a note:

    >>> class Missing(mx.gluon.data.SimpleDataset):
    ...     def __getitem__(self, index):
    ...         raise KeyError('image-%d' % index)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     broken = DetectionDataLoader(Missing([0, 1, 2]), batch_size=2)
    >>> try:
    ...     next(iter(broken))
    ... except KeyError as error:
    ...     print(repr(error), error.__notes__)
    KeyError('image-0') ['raised while loading dataset samples [0, 1]']
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, timeout=120):
        warnings.warn('DetectionDataLoader is deprecated; use mxnet.gluon.data.DataLoader '
                      'with gluonbatch batchify functions', stacklevel=2)
        super().__init__(dataset, batch_size, shuffle, sampler, last_batch, batch_sampler,
                         batchify_fn or default_pad_batchify_fn, num_workers, timeout=timeout)


class RandomTransformDataLoader(PooledLoader):
    """DataLoader that applies a transform chosen at random every ``interval`` batches.

    Multi-scale training: e.g. one YOLOv3 transform per input size, switched every 10
    batches so that a batch holds images of one size.

    Parameters
    ----------
    transform_fns : iterable of callables
        Candidate transforms, each applied to a sample as ``dataset.transform(fn)`` does.
    dataset : mxnet.gluon.data.Dataset
        The untransformed dataset.
    interval : int, default 1
        A new transform is drawn (``numpy.random``) every ``interval`` batches.
    batch_size, shuffle, sampler, last_batch, batch_sampler :
        As for ``mx.gluon.data.DataLoader``.
    batchify_fn, pin_memory, pin_device_id :
        As for ``mx.gluon.data.DataLoader``; ``batchify_fn`` defaults to
        :func:`default_batchify_fn`.
    num_workers : int, default 0
        Worker processes; 0 loads every batch in this process.
    prefetch : int, optional
        Batches in flight with workers, at least 1; default ``2 * num_workers``.
    timeout : float or None, default 120
        Seconds to wait for a worker's batch before raising (a stuck worker); None waits
        without limit. A worker that died raises at once.

    Raises
    ------
    TypeError
        ``interval``, ``num_workers`` or ``prefetch`` is not an integer (``prefetch`` may
        be None), ``timeout`` is not a number or None, or a transform is not callable.
    ValueError
        ``interval`` or ``prefetch`` is below 1, ``num_workers`` is negative, ``timeout``
        is not above 0, or there is no transform.

    Notes
    -----
    Errors while loading, dead workers and passes left early are handled as in
    :class:`DetectionDataLoader`: the original exception, with notes naming the dataset
    indices and any worker's traceback; a ``RuntimeError`` naming a dead worker and its
    batch; the batches of a pass left early freed.

    Examples
    --------
    >>> import numpy as np, mxnet as mx
    >>> data = mx.gluon.data.SimpleDataset([np.ones((2, 2), 'float32')] * 6)
    >>> loader = RandomTransformDataLoader([lambda x: x * 2, lambda x: x * 3], data,
    ...                                    interval=3, batch_size=1)
    >>> values = [batch.asnumpy()[0, 0, 0] for batch in loader]
    >>> len(set(values[:3])) == 1 and len(set(values[3:])) == 1
    True
    """

    def __init__(self, transform_fns, dataset, interval=1, batch_size=None, shuffle=False,
                 sampler=None, last_batch=None, batch_sampler=None, batchify_fn=None,
                 num_workers=0, pin_memory=False, pin_device_id=0, prefetch=None, timeout=120):
        transform_fns = list(transform_fns)
        if not transform_fns:
            raise ValueError('RandomTransformDataLoader needs at least one transform')
        for index, fn in enumerate(transform_fns):
            if not callable(fn):
                raise TypeError('transform %d must be callable, got %s' % (index, describe(fn)))
        self._interval = check_int(interval, 'interval', minimum=1)
        self._current = None
        super().__init__(dataset, batch_size, shuffle, sampler, last_batch, batch_sampler,
                         batchify_fn or default_batchify_fn, num_workers, pin_memory,
                         pin_device_id, prefetch, timeout, transforms=transform_fns)

    def _start_epoch(self):
        # gluoncv draws once as a pass begins and again for its first batch; drawing the
        # same way keeps seeded runs choosing the same transforms after migrating.
        self._current = np.random.randint(len(self._transforms))

    def _transform_for(self, batch_index):
        if batch_index % self._interval == 0:
            self._current = np.random.randint(len(self._transforms))
        return self._current
