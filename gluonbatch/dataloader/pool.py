"""The worker pool behind ``DetectionDataLoader`` and ``RandomTransformDataLoader``.

The workers (:mod:`gluonbatch.dataloader.worker`) are forked once, with the dataset, the
transforms and the batchify function, and send batches back as pickled bytes whose
NDArrays travel as shared-memory file descriptors. An error while loading a batch is
raised as the original exception (same type, arguments and message), with notes
(``BaseException.add_note``) naming the dataset indices of the batch and, from a worker,
the worker's traceback.

A worker that dies is a ``RuntimeError`` naming its pid and the dataset indices of the
batch it was loading. Every task carries a sequence number, and the worker that starts it
records its pid in a small array shared with the main process
(:class:`~gluonbatch.dataloader.worker.Claims`); the main process waits for a batch in
short slices and, between them, asks whether the worker loading it still lives. A batch
whose worker died after sending it cannot be unpickled (its file descriptors left with the
worker): the error then names the batch that worker was loading as it died, found among
the tasks not yet received by its claim, and the batch that could not be received.

A pass over the data left early (a ``break``) gives its batches in flight back: those
already arrived are unpickled and dropped at once, which frees their shared memory; the
others are as the next pass begins: before it hands the workers anything, it waits for
them for at most ``timeout`` and ten seconds. A worker still loading one then is stuck, or
slow on a batch nobody wants: it is terminated, and the pool starts another. Sequence
numbers are never reused within a loader, and the claims have room for many times the
tasks in flight, so a task left behind is never mistaken for a task of the current pass.

:meth:`PooledLoader.close` (or the end of a ``with`` block, or garbage collection) frees
the batches in flight the same way, then lets the workers leave on their own, so that
their exit handlers run (:mod:`~gluonbatch.dataloader.shutdown`); workers still busy are
terminated. Workers use the main process's multiprocessing temp directory, so that even a
terminated or killed worker leaves nothing in ``/tmp`` once the main process exits.

Examples
--------
>>> import numpy as np, mxnet as mx
>>> from gluonbatch.batchify import Stack
>>> data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(5)])
>>> with PooledLoader(data, batch_size=2, batchify_fn=Stack(), num_workers=1) as loader:
...     [batch.asnumpy()[:, 0].tolist() for batch in loader]
[[0.0, 1.0], [2.0, 3.0], [4.0]]
"""
import collections
import itertools
import multiprocessing
import numbers
import pickle
import sys
import time

import mxnet as mx

from .._core.checks import check_int, describe
from .._core.process import share_temp_dir
from .._core.tree import map_arrays
from ..seeded import KeyBatch
from .resume import Resumable, seeded_batch_sampler
from .shutdown import alive, stop_stragglers, stop_workers, wait_until_gone
from .worker import (CONTEXT, Claims, add_note, dataset_indices, indices_note, load_batch,
                     load_batch_in_worker, owned_by, pick, raise_worker_error,
                     set_worker_state)

__all__ = ['PooledLoader', 'load_batch']

#: Seconds between looks at the worker loading a batch the main process waits for.
_POLL = 0.05
#: Seconds a batch may take to arrive after the worker that returned it died (the pool's
#: result thread may still be passing it on).
_GRACE = 1.0
#: Seconds at most that a pass waits for the batches of a pass left before it (and ``close``
#: for those in flight), however long ``timeout`` is: workers still loading one then are
#: terminated, since nobody waits for their batch.
_DRAIN_LIMIT = 10.0
#: Seconds the workers get to leave when the loader closes, then to be terminated.
_LEAVE_LIMIT = 5.0
#: What unpickling a batch raises when its file descriptors cannot be fetched from the
#: worker that sent it (ConnectionError and FileNotFoundError are OSErrors).
_TRANSPORT_ERRORS = (EOFError, OSError)


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


class _Task:
    """A batch handed to the pool: its sequence number, dataset indices and result."""

    __slots__ = ('sequence', 'indices', 'result', 'received', 'batch')

    def __init__(self, sequence, indices, result, batch):
        self.sequence, self.indices, self.result = sequence, indices, result
        self.batch = batch  # what the sampler gave: indices, or a KeyBatch
        self.received = False  # the result was taken: nothing of it is left to free


class PooledLoader(Resumable, mx.gluon.data.DataLoader):
    """A DataLoader whose errors keep their type and name the dataset indices that failed.

    An exception raised while loading a batch (by the dataset, a transform or the
    batchify function) reaches the caller as the very exception raised -- its type,
    ``args``, ``str`` and attributes such as ``errno`` and ``filename`` unchanged -- with
    notes (``__notes__``, shown below the traceback) naming the batch's dataset indices
    and, when a worker loaded it, that worker's traceback. An exception a worker cannot
    send back (it does not pickle, or not rebuild from its pickle) arrives as a
    ``RuntimeError`` naming its type and message, with the same notes.

    A worker process that dies (killed by the out-of-memory killer, say) raises a
    ``RuntimeError`` naming its pid and the dataset indices of the batch it was loading,
    as soon as it is seen dead (within about a tenth of a second), and of the batch this
    process waited for if that is another one (sent by the worker before it died, and lost
    with it). A batch that does not arrive within ``timeout`` seconds raises a
    ``RuntimeError`` naming its indices and the worker loading it, if one started. The
    pool replaces a dead worker, so the next pass works.

    A pass over the data left early (``break``, or an error) gives back the batches it
    had in flight: those that have arrived are freed at once, the others as the next pass
    begins, which first waits for them (up to ``timeout`` and at most 10 seconds in all,
    even with ``timeout=None``; the workers load them first anyway). A worker still
    loading one then is terminated and replaced. So however often a loop breaks off, the
    loader holds the shared memory of at most ``prefetch`` batches it no longer needs,
    and never more than one pass does.

    :meth:`close` stops the workers: the batches in flight are freed first (waited for as
    above), then the workers leave on their own, or are terminated if some are still
    busy. Afterwards iterating raises ``ValueError``. A ``with`` block closes the loader
    as it ends, and garbage collection closes one that was not. Nothing is left in the
    temp directory: what multiprocessing makes there for a worker is removed as it leaves,
    or, for a worker terminated or killed, as this process exits.

    Workers receive the dataset, the transforms and the batchify function once, when the
    pool starts, so none of them is pickled per batch (lambdas work too). Subclasses pick
    the transform of every batch by its index in ``transforms`` (``_transform_for``).

    Parameters
    ----------
    dataset, batch_size, shuffle, sampler, last_batch, batch_sampler, batchify_fn :
        As for ``mx.gluon.data.DataLoader``.
    num_workers : int, default 0
        Worker processes; 0 loads every batch in this process.
    pin_memory, pin_device_id :
        As for ``mx.gluon.data.DataLoader``.
    prefetch : int, optional
        Batches in flight with workers, at least 1; default ``2 * num_workers``.
    timeout : float or None, default 120
        Seconds to wait for a worker's batch before raising (a stuck worker); None waits
        without limit. A worker seen dead raises at once.
    transforms : sequence of callables
        The transforms ``_transform_for`` picks from, applied as ``dataset.transform``.
    seed : int or None, default None
        Seeded loading (:mod:`gluonbatch.seeded`): the order of every epoch, and every
        sample's random draws, from ``(seed, epoch, position)``, the same batches for any
        ``num_workers``; :meth:`state_dict` and :meth:`load_state_dict` resume at any batch.
        The batches come from ``batch_size``, ``shuffle`` and ``last_batch`` (and a
        :class:`~gluonbatch.sampler.SplitSampler`'s rank, or a
        :class:`~gluonbatch.webdataset.ShardWindowSampler`'s order and rank, made with
        the same seed), or a :class:`~gluonbatch.seeded.SeededBatchSampler`. None:
        unseeded, as MXNet's loader.

    Raises
    ------
    TypeError
        ``num_workers``, ``prefetch`` or ``seed`` is not an integer (``prefetch`` and
        ``seed`` may be None), or ``timeout`` is not a number (or None).
    ValueError
        ``num_workers`` is negative, ``prefetch`` below 1 or ``timeout`` not positive; a
        ``seed`` outside ``[0, 2**64)``, or with a sampler other than a ``SplitSampler``
        or a ``ShardWindowSampler`` (of another seed or dataset length).

    Examples
    --------
    >>> import numpy as np, mxnet as mx
    >>> from gluonbatch.batchify import Stack
    >>> data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(6)])
    >>> with PooledLoader(data, batch_size=2, batchify_fn=Stack(), num_workers=2) as loader:
    ...     for batch in loader:
    ...         break  # the batches in flight are freed as the next pass begins
    ...     len(list(loader))
    3
    >>> try:
    ...     next(iter(loader))
    ... except ValueError as error:
    ...     print(str(error).split(';')[0])
    this PooledLoader is closed (by close() or at the end of its with block)
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, timeout=120, transforms=(), seed=None):
        num_workers = check_int(num_workers, 'num_workers', minimum=0)
        prefetch = check_int(prefetch, 'prefetch', minimum=1, allow_none=True)
        timeout = _check_timeout(timeout)
        if seed is not None:
            batch_sampler = seeded_batch_sampler(len(dataset), seed, batch_size, shuffle,
                                                 sampler, last_batch, batch_sampler)
            batch_size, shuffle, sampler, last_batch = None, False, None, None
            seed = batch_sampler.seed
        self._seed = seed
        self._owned = {}  # transform index -> generators it owns (seeded, no workers)
        self._delivered = None  # batches the pass under way delivered (None: no pass)
        super().__init__(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                         sampler=sampler, last_batch=last_batch, batch_sampler=batch_sampler,
                         batchify_fn=batchify_fn, num_workers=0, pin_memory=pin_memory,
                         pin_device_id=pin_device_id)
        self._num_workers = num_workers
        self._prefetch = prefetch if prefetch is not None else max(1, 2 * num_workers)
        self._timeout = timeout
        self._transforms = list(transforms)
        self._worker_pool = None
        self._sequences = itertools.count()
        self._abandoned = collections.deque()  # tasks of passes left early, still running
        self._tasks = {}  # sequence: task, of every task whose result was not taken
        self._closed = False
        if self._num_workers:
            # Many times the tasks in flight: no slot is taken over while asked about.
            self._claims = Claims(max(64, 4 * (self._prefetch + 1)))
            share_temp_dir()  # what terminated workers leave there goes as this process exits
            self._worker_pool = CONTEXT.Pool(
                self._num_workers, initializer=set_worker_state,
                initargs=(self._dataset, self._transforms, self._batchify_fn, self._claims))

    def _transform_for(self, batch_index, epoch=None):
        """Index into ``transforms`` of the transform for batch ``batch_index`` (of the pass
        over ``epoch``, when seeded); None: no transform."""
        return None

    def _numbered(self):
        """The pass's batches from the sampler, each as ``(transform index, batch)``."""
        for batch_index, batch in enumerate(self._batch_sampler):
            if isinstance(batch, KeyBatch):
                yield self._transform_for(batch.number, batch.epoch), batch
            else:
                yield self._transform_for(batch_index), batch

    def _deliver(self, batch):
        if self._pin_memory:
            pinned = mx.context.cpu_pinned(self._pin_device_id)
            return map_arrays(lambda array: array.as_in_context(pinned), batch)
        return batch

    def _start_epoch(self):
        """Called as each pass over the data begins."""

    def __iter__(self):
        self._check_open()
        self._start_epoch()
        if self._seed is not None:
            self._delivered = 0
        try:
            if self._worker_pool is None:
                yield from self._iter_here()
            else:
                yield from self._iter_workers()
        finally:
            self._delivered = None

    def _iter_here(self):
        for transform_index, indices in self._numbered():
            self._check_open()
            transform = pick(self._transforms, transform_index)
            owned = (owned_by(self._owned, self._dataset, self._transforms, transform_index)
                     if isinstance(indices, KeyBatch) else None)
            try:
                batch = load_batch(self._dataset, indices, transform, self._batchify_fn, owned)
            except Exception as error:
                add_note(error, indices_note(dataset_indices(indices)))
                raise
            self._delivering(indices)
            yield self._deliver(batch)

    def _iter_workers(self):
        # A pass left early may still have batches in flight: the pool would run them
        # first anyway, and waiting for them keeps no more batches in shared memory than
        # one pass has.
        self._drain_abandoned()
        pending = collections.deque()
        try:
            for transform_index, indices in self._numbered():
                pending.append(self._submit(transform_index, indices))
                if len(pending) > self._prefetch:
                    yield self._receive_first(pending)
            while pending:
                yield self._receive_first(pending)
        finally:
            # Runs when the loop breaks off too (the generator is closed).
            self._abandon(pending)

    def _submit(self, transform_index, indices):
        self._check_open()
        sequence = next(self._sequences)
        result = self._worker_pool.apply_async(
            load_batch_in_worker, (sequence, indices, transform_index))
        task = self._tasks[sequence] = _Task(sequence, dataset_indices(indices), result,
                                             indices)
        return task

    def _receive_first(self, pending):
        # Taken off only once received: a task that fails to arrive is given back.
        batch = self._receive(pending[0])
        self._delivering(pending.popleft().batch)
        return batch

    def _receive(self, task):
        self._check_open()
        loaded, pid, payload = self._wait(task)
        if not loaded:
            raise_worker_error(payload)
        try:
            batch = pickle.loads(payload)
        except _TRANSPORT_ERRORS as error:
            cause = '%s: %s' % (type(error).__name__, error)
            if not wait_until_gone(pid, _GRACE):
                raise RuntimeError('the batch of dataset samples %s could not be received '
                                   'from DataLoader worker process %d, which is still running '
                                   '(%s)' % (task.indices, pid, cause)) from error
            raise self._death(pid, 'the batch of dataset samples %s it had sent could not be '
                                   'received (%s)' % (task.indices, cause),
                              'the batch of dataset samples %s could not be received from '
                              'DataLoader worker process %d, which died after sending it (%s)'
                              % (task.indices, pid, cause)) from error
        return self._deliver(batch)

    def _held_by(self, pid):
        """The task worker ``pid`` was loading (it claimed it, and did not return it), or
        None."""
        for task in self._tasks.values():
            if self._claims.lookup(task.sequence) == (pid, False):
                return task
        return None

    def _death(self, pid, what_else, otherwise):
        """The RuntimeError for worker ``pid`` seen dead: it names the batch the worker
        was loading as it died and then ``what_else`` (what became of a batch it had
        finished); ``otherwise`` is the message if it was loading none."""
        held = self._held_by(pid)
        if held is None:
            return RuntimeError(otherwise)
        return RuntimeError('DataLoader worker process %d died while loading dataset samples '
                            '%s (killed, by the out-of-memory killer say, or exited); %s'
                            % (pid, held.indices, what_else))

    def _wait(self, task, deadline=None):
        """The task's result; a RuntimeError if its worker died, or at the ``deadline``
        (``time.monotonic()``; by default ``timeout`` seconds from now)."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        gone_since = None
        while True:
            try:
                outcome = task.result.get(max(0, min(_POLL, deadline - time.monotonic())))
                task.received = True
                self._tasks.pop(task.sequence, None)
                return outcome
            except multiprocessing.TimeoutError:
                pass
            claim = self._claims.lookup(task.sequence)
            if claim is not None and not alive(claim[0]):
                pid, returned = claim
                if not returned:
                    raise RuntimeError('DataLoader worker process %d died while loading '
                                       'dataset samples %s (killed, by the out-of-memory '
                                       'killer say, or exited)' % (pid, task.indices))
                # It returned the batch before dying: the pool may still be passing it on.
                gone_since = gone_since or time.monotonic()
                if time.monotonic() - gone_since > _GRACE:
                    raise self._death(pid, 'the batch of dataset samples %s it had loaded '
                                           'never arrived' % (task.indices,),
                                      'DataLoader worker process %d died after loading '
                                      'dataset samples %s, before their batch arrived'
                                      % (pid, task.indices))
            if time.monotonic() >= deadline:
                if claim is None:
                    where = 'no worker process has started loading it'
                elif claim[1]:
                    where = 'worker process %d returned it, but it never arrived' % claim[0]
                else:
                    where = 'worker process %d is still loading it (stuck?)' % claim[0]
                raise RuntimeError('the batch of dataset samples %s did not arrive within '
                                   '%g s: %s' % (task.indices, self._timeout, where))

    def _abandon(self, tasks):
        """Free the batches of a pass left early that have arrived; keep the others."""
        if self._closed:  # close() took care of them
            return
        for task in tasks:
            if task.received:
                continue
            if task.result.ready():
                self._discard(task)
            else:
                self._abandoned.append(task)

    def _drain_abandoned(self):
        """Wait for the batches of passes left early, and free them: up to ``timeout``
        in all, and never more than ``_DRAIN_LIMIT`` seconds (``timeout`` may be None).

        Then the workers still loading one are terminated (the pool starts others); a
        batch no worker has started yet is kept, to be waited for by the next pass.
        """
        deadline = time.monotonic() + min(self._timeout, _DRAIN_LIMIT)
        for task in self._abandoned:
            self._discard(task, deadline)
        self._abandoned = collections.deque(stop_stragglers(
            [task for task in self._abandoned if not task.received], self._claims))

    def _discard(self, task, deadline=None):
        try:
            loaded, _, payload = self._wait(task, deadline)
            if loaded:
                pickle.loads(payload)  # fetches its descriptors, and lets them go
        except Exception:  # noqa: a batch nobody waits for has no one to tell
            pass

    def _check_open(self):
        if self._closed:
            raise ValueError('this %s is closed (by close() or at the end of its with block); '
                             'make a new loader to load batches again' % type(self).__name__)

    def close(self):
        """Stop the worker processes, freeing the shared memory of the batches in flight
        first; iterating afterwards raises ValueError. Closing again does nothing.

        The batches not yet received (of passes running or left early) are waited for,
        for at most ``timeout`` and 10 seconds, and freed. Then, if no batch is pending,
        the workers leave on their own, which removes what multiprocessing made for them
        in the temp directory; else, and if they do not leave within 5 seconds, they are
        terminated. Leaving a ``with`` block closes the loader, and so does garbage
        collection of a loader not closed.
        """
        if getattr(self, '_closed', True):  # closed, or never fully made
            return
        self._closed = True
        pool, self._worker_pool = self._worker_pool, None
        if pool is None:
            return
        # Every batch not yet received; those that arrive in time are freed at once. As the
        # interpreter exits, multiprocessing has already terminated the workers.
        if not sys.is_finalizing():
            self._abandoned = collections.deque(
                sorted(self._tasks.values(), key=lambda task: task.sequence))
            self._drain_abandoned()
        idle = all(task.result.ready() for task in self._tasks.values())
        stop_workers(pool, idle, _LEAVE_LIMIT)

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        self.close()
