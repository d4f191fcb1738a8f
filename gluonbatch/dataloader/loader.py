"""``gluonbatch.DataLoader``: MXNet's DataLoader whose runs survive their workers.

The same parameters as ``mx.gluon.data.DataLoader`` (MXNet 1.9), in the same order, and
``seed``, ``max_restarts``. Workers are forked once and kept for the loader's life
(:mod:`~gluonbatch.dataloader.pool` tells how they are started, replaced and stopped);
with ``thread_pool=True`` they are threads of this process.
"""
import collections
import itertools
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self

import mxnet as mx
from mxnet.util import is_np_array, is_np_shape

from .._core.checks import check_int, describe, is_int
from .._core.tree import map_arrays
from .._core.typing import BatchifyFn
from ..samplers import KeyBatch, SeededBatchSampler
from ..samplers.state import LastBatch, warn_empty_passes, warn_no_batches
from .batchify_fns import default_batchify_fn
from .pool import Task, WorkerPool
from .resume import Resumable, seeded_batch_sampler
from .thread_pool import ThreadWorkers
from .worker import (Job, Owned, add_note, dataset_indices, indices_note, load_batch, owned_by,
                     pick, raise_worker_error)

__all__ = ['DataLoader', 'MAX_RESTARTS']


#: The default ``max_restarts``: room for the rare out-of-memory kill in a long run, while a
#: worker that dies every time it starts ends the run within seconds.
MAX_RESTARTS = 10


def _check_timeout(timeout):
    """``timeout`` as a float (None: infinity): TypeError if it is not a real number,
    ValueError unless it is above 0."""
    if timeout is None:  # gluoncv's loaders waited without limit then
        return float('inf')
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError('timeout must be a number of seconds, got %r (%s)'
                        % (timeout, describe(timeout)))
    if not timeout > 0:
        raise ValueError('timeout must be a number of seconds > 0, got %r' % (timeout,))
    return float(timeout)


def _warn_empty_passes(dataset, batch_size, sampler, last_batch):
    """Warn if MXNet's batches of ``batch_size`` over ``sampler`` (the dataset's indices
    without one; a rank's part with a SplitSampler) leave every pass empty."""
    count = len(sampler) if hasattr(sampler, '__len__') else None
    if sampler is None and hasattr(dataset, '__len__'):
        count = len(dataset)
    # arguments MXNet will refuse are left for it to name
    if count is not None and is_int(batch_size) and batch_size > 0:
        warn_empty_passes(count, batch_size, last_batch or 'keep')


class DataLoader(Resumable, mx.gluon.data.DataLoader):
    """``mx.gluon.data.DataLoader``, whose workers may die without the run noticing, with
    seeded, resumable batches.

    A gluoncv or MXNet script changes one import. A worker that dies (any signal, a segfault
    in a decoder) or stops answering for ``timeout`` seconds is replaced and its batches are
    loaded again: a seeded loader's batches stay bit for bit those of an uninterrupted run,
    an unseeded epoch loses no sample and repeats none (:mod:`~gluonbatch.dataloader.pool`
    tells how). An error while loading a batch reaches the caller as the very exception
    raised, with notes (``__notes__``) naming the batch's dataset indices and, from a worker,
    its traceback; one that cannot travel arrives as a ``RuntimeError`` naming its type and
    message.

    Parameters
    ----------
    dataset, batch_size, shuffle, sampler, last_batch, batch_sampler, pin_memory, pin_device_id :
        As for ``mx.gluon.data.DataLoader``. With ``last_batch`` ``'discard'`` or ``'rollover'`` and
        fewer samples than ``batch_size`` (a pass's: a rank's part with a sampler), passes
        are empty (``'rollover'``: the first ones, then a batch every few passes): a
        ``UserWarning`` says so as the loader is made.
    batchify_fn : callable, optional
        Makes a batch of a list of samples; default
        :func:`~gluonbatch.dataloader.default_batchify_fn` (into shared memory).
    num_workers : int, default 0
        Worker processes (threads with ``thread_pool``); 0 loads every batch in this
        process.
    prefetch : int, optional
        Batches in flight with workers, at least 1; default ``2 * num_workers``.
    thread_pool : bool, default False
        Load in threads of this process instead of worker processes.
    timeout : float or None, default 120
        Seconds a worker holding batches may go without answering before it is deemed
        stuck, killed and replaced; None: never. With ``thread_pool``, a ``RuntimeError``
        if no batch is loaded within it (a thread cannot be replaced).
    auto_reload : bool, default False
        Accepted for MXNet's signature; every pass makes a fresh iterator anyway.
    seed : int or None, default None
        Seeded loading (:mod:`gluonbatch.seeded`): every epoch's order and every sample's
        random draws from ``(seed, epoch, position)``, the same batches for any
        ``num_workers``; :meth:`state_dict` and :meth:`load_state_dict` resume at any
        batch. The batches come from ``batch_size``, ``shuffle`` and ``last_batch`` (and a
        :class:`~gluonbatch.samplers.SplitSampler`'s rank, or a
        :class:`~gluonbatch.samplers.ShardWindowSampler`'s order and rank, of the same
        seed), or a :class:`~gluonbatch.samplers.SeededBatchSampler`. None: MXNet's order.
    max_restarts : int, default 10
        Worker replacements allowed in the loader's life; one more raises ``RuntimeError``.
    transforms : sequence of callables, default ()
        For subclasses: the transforms ``_transform_for`` picks from for each batch.

    Raises
    ------
    TypeError
        ``num_workers``, ``prefetch``, ``max_restarts`` or ``seed`` is not an integer
        (``prefetch`` and ``seed`` may be None), ``timeout`` is not a number or None.
    ValueError
        ``num_workers`` or ``max_restarts`` negative, ``prefetch`` below 1, ``timeout``
        not above 0; a ``seed`` outside ``[0, 2**64)`` or with a sampler that orders the
        samples otherwise.

    Notes
    -----
    Each pass begins where :meth:`state_dict` says: after a pass left early (``break``, an
    error), at the batch after the last one delivered, in the same epoch; after a finished
    pass, at the next epoch's first batch (seeded loaders; :meth:`set_epoch` starts another).
    An unseeded loader's every pass is a new epoch, as MXNet's. :meth:`close`, the end of a
    ``with`` block, garbage collection or the exit of the process that made the loader
    stops the workers; iterating afterwards raises ``ValueError``.

    Examples
    --------
    >>> import numpy as np, mxnet as mx
    >>> from gluonbatch import DataLoader
    >>> data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(6)])
    >>> with DataLoader(data, batch_size=2, num_workers=2, seed=7) as loader:
    ...     for number, batch in enumerate(loader):
    ...         if number == 1:
    ...             break
    ...     state = loader.state_dict()
    ...     rest = [batch.asnumpy()[:, 0].tolist() for batch in loader]
    >>> state['epoch'], state['batch'], len(rest)   # the epoch goes on where it stopped
    (0, 2, 1)
    >>> again = DataLoader(data, batch_size=2, seed=7)
    >>> again.load_state_dict(state)
    >>> [batch.asnumpy()[:, 0].tolist() for batch in again] == rest
    True
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False,
                 sampler: Iterable[int] | None = None, last_batch: LastBatch | None = None,
                 batch_sampler: Iterable[Sequence[Any]] | None = None,
                 batchify_fn: BatchifyFn | None = None, num_workers: int = 0,
                 pin_memory: bool = False, pin_device_id: int = 0, prefetch: int | None = None,
                 thread_pool: bool = False, timeout: float | None = 120,
                 auto_reload: bool = False, seed: int | None = None,
                 max_restarts: int = MAX_RESTARTS,
                 transforms: Sequence[Callable[..., Any]] = ()) -> None:
        num_workers = check_int(num_workers, 'num_workers', minimum=0)
        prefetch = check_int(prefetch, 'prefetch', minimum=1, allow_none=True)
        max_restarts = check_int(max_restarts, 'max_restarts', minimum=0)
        timeout = _check_timeout(timeout)
        if seed is None and isinstance(batch_sampler, SeededBatchSampler):
            seed = batch_sampler.seed  # its batches are seeded: so are the loader's
        if seed is not None:
            batch_sampler = seeded_batch_sampler(len(dataset), seed, batch_size, shuffle,
                                                 sampler, last_batch, batch_sampler)
            batch_size, shuffle, sampler, last_batch = None, False, None, None
            seed = batch_sampler.seed
        elif batch_sampler is None:  # a seeded sampler said it already, if it had to
            _warn_empty_passes(dataset, batch_size, sampler, last_batch)
        elif hasattr(batch_sampler, '__len__') and hasattr(dataset, '__len__'):
            warn_no_batches(batch_sampler, len(dataset))
        self._seed = seed
        # transform index -> generators it owns (seeded, in this process)
        self._owned: Owned = {}
        self._delivered = None  # batches the pass under way delivered (None: no pass)
        self._workers = None
        self._closed = True  # until fully made: close() then has nothing to do
        # MXNet's own pool is never started: workers are this class's.
        super().__init__(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                         sampler=sampler, last_batch=last_batch, batch_sampler=batch_sampler,
                         batchify_fn=batchify_fn or default_batchify_fn, num_workers=0,
                         pin_memory=pin_memory, pin_device_id=pin_device_id)
        self._num_workers, self._thread_pool = num_workers, bool(thread_pool)
        self._prefetch = prefetch if prefetch is not None else max(1, 2 * num_workers)
        self._timeout = timeout
        self._transforms = list(transforms)
        self._sequences = itertools.count()
        self._closed = False
        if num_workers:
            job = Job(self._dataset, self._transforms, self._batchify_fn, is_np_shape(),
                      is_np_array())
            self._workers = (ThreadWorkers(job, num_workers, timeout) if self._thread_pool
                             else WorkerPool(job, num_workers, timeout, max_restarts))

    @property
    def worker_pids(self) -> list:
        """The pids of the worker processes now (empty without worker processes)."""
        return [] if self._workers is None else list(self._workers.pids)

    @property
    def restarts(self) -> int:
        """Workers replaced so far in the loader's life."""
        return 0 if self._workers is None else self._workers.restarts

    def _transform_for(self, batch_index, epoch=None):
        """Index into ``transforms`` of the transform for batch ``batch_index`` (of the pass
        over ``epoch``, when seeded); None: no transform."""
        return None

    def _start_epoch(self):
        """Called as each pass over the data begins."""

    def _numbered(self):
        """The pass's batches from the sampler, each as ``(transform index, batch)``."""
        batches = iter(self._batch_sampler)
        self._begin_pass()  # the sampler's pass has begun: count what it delivers
        for batch_index, batch in enumerate(batches):
            if isinstance(batch, KeyBatch):
                yield self._transform_for(batch.number, batch.epoch), batch
            else:
                yield self._transform_for(batch_index), batch

    def _deliver(self, batch):
        if self._pin_memory:
            pinned = mx.context.cpu_pinned(self._pin_device_id)
            return map_arrays(lambda array: array.as_in_context(pinned), batch)
        return batch

    def __iter__(self) -> Iterator[Any]:
        self._check_open()
        self._start_epoch()
        try:
            if self._workers is None:
                yield from self._iter_here()
            else:
                yield from self._iter_workers()
        finally:
            self._end_pass()

    def _iter_here(self):
        for transform_index, batch in self._numbered():
            self._check_open()
            owned = (owned_by(self._owned, self._dataset, self._transforms, transform_index)
                     if isinstance(batch, KeyBatch) else None)
            try:
                value = load_batch(self._dataset, batch, pick(self._transforms, transform_index),
                                   self._batchify_fn, owned)
            except Exception as error:
                add_note(error, indices_note(dataset_indices(batch)))
                raise
            self._delivering(batch)
            yield self._deliver(value)

    def _iter_workers(self):
        pending = collections.deque()  # this pass's tasks, in the order they are delivered
        arrived = {}  # sequence: (ok, value) of this pass's tasks answered ahead of their turn
        try:
            yield from self._deliver_in_order(pending, arrived, self._numbered())
        finally:  # their answers are dropped as they come; a lost one is not loaded again
            for task in pending:
                task.abandoned = True

    def _deliver_in_order(self, pending, arrived, batches):
        exhausted = False
        while True:
            self._check_open()
            # In flight: batches with workers (of passes left early too) and those arrived
            # ahead of their turn; one more than prefetch while the next is awaited.
            while (not exhausted
                   and self._workers.outstanding + len(arrived) <= self._prefetch):
                try:
                    transform_index, batch = next(batches)
                except StopIteration:
                    exhausted = True
                    break
                task = Task(next(self._sequences), batch, transform_index)
                pending.append(task)
                self._workers.submit(task)
            if not pending:
                if exhausted:
                    return
                self._workers.collect()  # tasks of a pass left early count against the prefetch
                continue
            head = pending[0]
            while head.sequence not in arrived:
                self._check_open()
                if not self._workers.outstanding:
                    raise RuntimeError('the batch of dataset samples %s was lost: no worker '
                                       'holds it' % (head.indices,))
                wanted = {task.sequence for task in pending}
                for task, ok, value in self._workers.collect():
                    if task.sequence in wanted:
                        arrived[task.sequence] = ok, value
                    # else: of a pass left early; dropping it frees its shared memory
            ok, value = arrived.pop(pending.popleft().sequence)
            if not ok:
                raise_worker_error(value)
            self._delivering(head.batch)
            yield self._deliver(value)

    def _check_open(self):
        if self._closed:
            raise ValueError('this %s is closed (by close() or at the end of its with block); '
                             'make a new loader to load batches again' % type(self).__name__)

    def close(self) -> None:
        """Stop the workers (:mod:`~gluonbatch.dataloader.pool`); iterating afterwards
        raises ValueError. Closing again does nothing."""
        if getattr(self, '_closed', True):  # closed, or never fully made
            return
        self._closed = True
        workers, self._workers = self._workers, None
        if workers is not None:
            workers.close()

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self):
        self.close()
