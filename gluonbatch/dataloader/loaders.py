"""gluoncv's detection data loaders, as thin layers over
:class:`~gluonbatch.DataLoader` (its workers, errors, seeds and state)."""
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from .._core.checks import check_int, describe
from ..seeded.keys import batch_choice
from .batchify_fns import default_batchify_fn, default_pad_batchify_fn
from ..samplers.state import LastBatch
from .loader import MAX_RESTARTS, BatchifyFn, DataLoader

__all__ = ['DetectionDataLoader', 'RandomTransformDataLoader']


class DetectionDataLoader(DataLoader):
    """gluoncv's loader for detection datasets whose labels have different numbers of objects.

    Deprecated in gluoncv in favour of ``mx.gluon.data.DataLoader`` with batchify functions,
    and kept so that gluoncv code keeps working (making one warns). A layer over
    :class:`~gluonbatch.DataLoader`: its workers are replaced when they die,
    a batch that fails to load raises the original exception with notes naming its dataset
    indices, and with a ``seed`` a run repeats and resumes.

    Parameters
    ----------
    dataset : mxnet.gluon.data.Dataset
    batch_size, shuffle, sampler, last_batch, batch_sampler :
        As for ``mx.gluon.data.DataLoader``.
    batchify_fn : callable, optional
        Default :func:`default_pad_batchify_fn` (labels padded with -1).
    num_workers, timeout, seed, max_restarts :
        As for :class:`~gluonbatch.DataLoader` (defaults 0, 120 seconds,
        None: gluoncv's behaviour, 10).

    Raises
    ------
    TypeError, ValueError
        ``num_workers`` or ``timeout`` not a number, or out of range; a bad ``seed``, or a
        sampler that is not a SplitSampler or a ShardWindowSampler of the same seed with one.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np, mxnet as mx
    >>> data = mx.gluon.data.SimpleDataset(
    ...     [(np.zeros((3, 4, 4), 'float32'), np.ones((k + 1, 5), 'float32'))
    ...      for k in range(5)])
    >>> def make(dataset, **kwargs):
    ...     with warnings.catch_warnings():
    ...         warnings.simplefilter('ignore')
    ...         return DetectionDataLoader(dataset, batch_size=2, **kwargs)
    >>> [labels.shape for _, labels in make(data, last_batch='keep')]
    [(2, 2, 5), (2, 4, 5), (1, 5, 5)]

    Seeded, a run saves where it is and another continues from there:

    >>> seeded = make(data, shuffle=True, seed=7)
    >>> batches = iter(seeded)
    >>> first = next(batches)
    >>> state = seeded.state_dict()
    >>> state['epoch'], state['batch']
    (0, 1)
    >>> rest = [labels.shape for _, labels in batches]
    >>> seeded.load_state_dict(state)
    >>> [labels.shape for _, labels in seeded] == rest
    True

    A sample that fails to load raises its own exception, the indices in a note:

    >>> class Missing(mx.gluon.data.SimpleDataset):
    ...     def __getitem__(self, index):
    ...         raise KeyError('image-%d' % index)
    >>> try:
    ...     next(iter(make(Missing([0, 1, 2]))))
    ... except KeyError as error:
    ...     print(repr(error), error.__notes__)
    KeyError('image-0') ['raised while loading dataset samples [0, 1]']

    With worker processes, a ``with`` block stops them as it ends:

    >>> pooled = make(data, last_batch='keep', num_workers=2)
    >>> with pooled:
    ...     [labels.shape[1] for _, labels in pooled]
    [2, 4, 5]
    >>> list(pooled)
    Traceback (most recent call last):
    ...
    ValueError: this DetectionDataLoader is closed (by close() or at the end of its with
    block); make a new loader to load batches again
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, last_batch: LastBatch | None = None,
                 batch_sampler: Iterable[Sequence[Any]] | None = None,
                 batchify_fn: BatchifyFn | None = None, num_workers: int = 0,
                 timeout: float | None = 120, seed: int | None = None,
                 max_restarts: int = MAX_RESTARTS) -> None:
        warnings.warn('DetectionDataLoader is deprecated; use gluonbatch.DataLoader (or '
                      'mxnet.gluon.data.DataLoader) with gluonbatch batchify functions',
                      stacklevel=2)
        super().__init__(dataset, batch_size, shuffle, sampler, last_batch, batch_sampler,
                         batchify_fn or default_pad_batchify_fn, num_workers, timeout=timeout,
                         seed=seed, max_restarts=max_restarts)


class RandomTransformDataLoader(DataLoader):
    """gluoncv's loader that applies a transform chosen at random every ``interval`` batches.

    Multi-scale training: e.g. one YOLOv3 transform per input size, switched every 10
    batches so that a batch holds images of one size. A layer over
    :class:`~gluonbatch.DataLoader`, which handles its errors, dead
    workers, passes left early and closing.

    Parameters
    ----------
    transform_fns : iterable of callables
        Candidate transforms, each applied to a sample as ``dataset.transform(fn)`` does.
    dataset : mxnet.gluon.data.Dataset
        The untransformed dataset.
    interval : int, default 1
        A new transform is drawn every ``interval`` batches: from ``numpy.random``, or, with
        a ``seed``, from ``(seed, epoch, batch number // interval)``.
    batch_size, shuffle, sampler, last_batch, batch_sampler, pin_memory, pin_device_id :
        As for ``mx.gluon.data.DataLoader``.
    batchify_fn : callable, optional
        Default :func:`default_batchify_fn`.
    num_workers, prefetch, timeout, seed, max_restarts :
        As for :class:`~gluonbatch.DataLoader`.

    Raises
    ------
    TypeError
        ``interval``, ``num_workers``, ``prefetch`` or ``seed`` is not an integer
        (``prefetch`` and ``seed`` may be None), ``timeout`` is not a number or None, or a
        transform is not callable.
    ValueError
        ``interval`` or ``prefetch`` is below 1, ``num_workers`` is negative, ``timeout`` is
        not above 0, there is no transform, or a bad ``seed``.

    Examples
    --------
    >>> import numpy as np, mxnet as mx
    >>> data = mx.gluon.data.SimpleDataset([np.ones((2, 2), 'float32')] * 6)
    >>> loader = RandomTransformDataLoader([lambda x: x * 2, lambda x: x * 3], data,
    ...                                    interval=3, batch_size=1)
    >>> values = [batch.asnumpy()[0, 0, 0] for batch in loader]
    >>> len(set(values[:3])) == 1 and len(set(values[3:])) == 1
    True

    Worker processes stop when the loader is closed:

    >>> pooled = RandomTransformDataLoader([lambda x: x * 2], data, batch_size=2,
    ...                                    num_workers=2)
    >>> [batch.shape for batch in pooled]
    [(2, 2, 2), (2, 2, 2), (2, 2, 2)]
    >>> pooled.close()
    >>> pooled.close()  # again: nothing happens
    """

    def __init__(self, transform_fns: Iterable[Callable[..., Any]], dataset: Any,
                 interval: int = 1, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, last_batch: LastBatch | None = None,
                 batch_sampler: Iterable[Sequence[Any]] | None = None,
                 batchify_fn: BatchifyFn | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 timeout: float | None = 120, seed: int | None = None,
                 max_restarts: int = MAX_RESTARTS) -> None:
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
                         pin_device_id, prefetch, timeout=timeout, transforms=transform_fns,
                         seed=seed, max_restarts=max_restarts)

    def _start_epoch(self):
        # gluoncv draws once as a pass begins and again for its first batch; drawing the
        # same way keeps runs seeded the gluoncv way choosing the same transforms.
        if self._seed is None:
            self._current = np.random.randint(len(self._transforms))

    def _transform_for(self, batch_index, epoch=None):
        if self._seed is not None:
            return batch_choice(self._seed, epoch, batch_index // self._interval,
                                len(self._transforms))
        if batch_index % self._interval == 0:
            self._current = np.random.randint(len(self._transforms))
        return self._current
