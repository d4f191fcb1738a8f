"""gluoncv's detection data loaders, as thin layers over
:class:`~gluonbatch.dataloader.loader.DataLoader` (its workers, errors, seeds and state)."""
import warnings

import numpy as np

from .._core.checks import check_int, describe
from ..seeded.keys import batch_choice
from .batchify_fns import default_batchify_fn, default_pad_batchify_fn
from .loader import MAX_RESTARTS, DataLoader

__all__ = ['DetectionDataLoader', 'RandomTransformDataLoader']


class DetectionDataLoader(DataLoader):
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
        Seconds a worker holding batches may go without answering before it is deemed
        stuck, killed and replaced (:class:`~gluonbatch.dataloader.loader.DataLoader`);
        None: never.
    seed : int or None, default None
        Seeded loading: every epoch's order and every sample's augmentation a function of
        ``(seed, epoch, position)``, the same batches for any ``num_workers``, resumable
        with :meth:`state_dict` / :meth:`load_state_dict` (see
        :class:`~gluonbatch.dataloader.loader.DataLoader`). None: gluoncv's behaviour.
    max_restarts : int, default 10
        Worker replacements allowed in the loader's life, as for
        :class:`~gluonbatch.dataloader.loader.DataLoader`.

    Raises
    ------
    TypeError, ValueError
        ``num_workers`` is not an integer, or is negative; ``timeout`` is not a number (or
        None), or not above 0; a bad ``seed``, or a sampler that is not a SplitSampler
        or a ShardWindowSampler of the same seed with one.

    Notes
    -----
    A batch that fails to load raises the original exception (type, arguments and
    message unchanged) with notes naming its dataset indices and, from a worker, the
    worker's traceback.

    Workers that die or stall are replaced and their batches loaded again, passes left
    early resume where they stopped, and ``close()`` or a ``with`` block stops the
    workers, as for :class:`~gluonbatch.dataloader.loader.DataLoader`.

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

    Seeded, a run saves where it is and another continues from there:

    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     seeded = DetectionDataLoader(data, batch_size=2, shuffle=True, seed=7)
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
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     broken = DetectionDataLoader(Missing([0, 1, 2]), batch_size=2)
    >>> try:
    ...     next(iter(broken))
    ... except KeyError as error:
    ...     print(repr(error), error.__notes__)
    KeyError('image-0') ['raised while loading dataset samples [0, 1]']

    With worker processes, a ``with`` block stops them as it ends:

    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter('ignore')
    ...     pooled = DetectionDataLoader(data, batch_size=2, last_batch='keep', num_workers=2)
    >>> with pooled:
    ...     [labels.shape[1] for _, labels in pooled]
    [2, 4, 5]
    >>> list(pooled)
    Traceback (most recent call last):
    ...
    ValueError: this DetectionDataLoader is closed (by close() or at the end of its with
    block); make a new loader to load batches again
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, timeout=120, seed=None,
                 max_restarts=MAX_RESTARTS):
        warnings.warn('DetectionDataLoader is deprecated; use gluonbatch.DataLoader (or '
                      'mxnet.gluon.data.DataLoader) with gluonbatch batchify functions',
                      stacklevel=2)
        super().__init__(dataset, batch_size, shuffle, sampler, last_batch, batch_sampler,
                         batchify_fn or default_pad_batchify_fn, num_workers, timeout=timeout,
                         seed=seed, max_restarts=max_restarts)


class RandomTransformDataLoader(DataLoader):
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
        A new transform is drawn every ``interval`` batches: from ``numpy.random``, or,
        with a ``seed``, from ``(seed, epoch, batch number // interval)``.
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
        Seconds a worker holding batches may go without answering before it is deemed
        stuck, killed and replaced (:class:`~gluonbatch.dataloader.loader.DataLoader`);
        None: never.
    seed : int or None, default None
        Seeded loading, as for :class:`DetectionDataLoader`; the transform of every batch
        (YOLOv3's input size) is then a function of ``(seed, epoch, batch number)`` too.
    max_restarts : int, default 10
        As for :class:`DetectionDataLoader`.

    Raises
    ------
    TypeError
        ``interval``, ``num_workers``, ``prefetch`` or ``seed`` is not an integer
        (``prefetch`` and ``seed`` may be None), ``timeout`` is not a number or None, or a
        transform is not callable.
    ValueError
        ``interval`` or ``prefetch`` is below 1, ``num_workers`` is negative, ``timeout``
        is not above 0, there is no transform, or a bad ``seed``.

    Notes
    -----
    Errors while loading, dead workers, passes left early and closing are handled as by
    :class:`~gluonbatch.dataloader.loader.DataLoader`.

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

    def __init__(self, transform_fns, dataset, interval=1, batch_size=None, shuffle=False,
                 sampler=None, last_batch=None, batch_sampler=None, batchify_fn=None,
                 num_workers=0, pin_memory=False, pin_device_id=0, prefetch=None, timeout=120,
                 seed=None, max_restarts=MAX_RESTARTS):
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
