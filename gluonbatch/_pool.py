"""The worker pool behind ``DetectionDataLoader`` and ``RandomTransformDataLoader``.

Workers are forked (an explicit ``fork`` context, whatever the platform's default): each
receives the dataset, the candidate transforms and the batchify function once, when the
pool starts, by inheriting them rather than by pickling them per batch, so lambdas work.
A worker keeps them in a :class:`~gluonbatch._core.process.ProcessLocal`, so the state of
one process is never mistaken for another's. Batches come back as pickled bytes whose
NDArrays travel as shared-memory file descriptors.

An error while loading a batch is raised as the original exception (same type, arguments
and message), with notes (``BaseException.add_note``) naming the dataset indices of the
batch and, from a worker, the worker's traceback.

Examples
--------
>>> import numpy as np, mxnet as mx
>>> from gluonbatch.batchify import Stack
>>> data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(5)])
>>> loader = PooledLoader(data, batch_size=2, batchify_fn=Stack(), num_workers=1)
>>> [batch.asnumpy()[:, 0].tolist() for batch in loader]
[[0.0, 1.0], [2.0, 3.0], [4.0]]
"""
import collections
import io
import multiprocessing
import os
import pickle
import traceback
from multiprocessing.reduction import ForkingPickler

import mxnet as mx

from ._core.checks import check_int
from ._core.process import ProcessLocal
from ._core.tree import map_arrays

__all__ = ['PooledLoader', 'load_batch']

# Fork, not spawn or forkserver: the workers inherit the dataset, transforms and batchify
# function, which need not be picklable.
_CONTEXT = multiprocessing.get_context('fork')

# In a worker: what the pool initializer handed over; empty in any other process.
_worker_state = ProcessLocal(dict)


def _set_worker_state(dataset, transforms, batchify_fn):
    """Pool initializer: runs once in every worker process."""
    _worker_state.get().update(dataset=dataset, transforms=transforms,
                               batchify_fn=batchify_fn)


def _add_note(error, note):
    """Add ``note`` to ``error`` once: an exception object raised again keeps one copy."""
    if note not in getattr(error, '__notes__', ()):
        error.add_note(note)


def _indices_note(indices):
    return 'raised while loading dataset samples %s' % list(indices)


def load_batch(dataset, indices, transform, batchify_fn):
    """Read ``dataset[i]`` for every index (through ``transform``), then batchify.

    >>> load_batch([1, 2, 3], [2, 0], None, list)
    [3, 1]
    """
    view = dataset if transform is None else dataset.transform(transform)
    return batchify_fn([view[index] for index in indices])


def _pick(transforms, index):
    return None if index is None else transforms[index]


def _error_payload(error, indices):
    """``error`` pickled with the notes to add to it: its dataset indices, this traceback.

    The notes travel beside the exception (which is left as it is), so a worker that
    raises one stored exception again does not pile notes onto it, and types whose
    pickling drops ``__notes__`` keep them. An exception that cannot be pickled, or not
    rebuilt from its pickle, is replaced by a RuntimeError naming its type and message:
    the main process must get something.
    """
    notes = list(getattr(error, '__notes__', ()))
    notes.append(_indices_note(indices))
    notes.append('in DataLoader worker process %d:\n%s' % (
        os.getpid(), ''.join(traceback.format_exception(error)).rstrip('\n')))
    try:
        payload = _own_pickle((error, notes))
        pickle.loads(payload)  # some exceptions pickle but cannot be rebuilt
        return payload
    except Exception as failure:
        stand_in = RuntimeError('%s.%s: %s (the worker could not send the exception itself: '
                                '%s: %s)' % (type(error).__module__, type(error).__qualname__,
                                             error, type(failure).__name__, failure))
        return _own_pickle((stand_in, notes))


def _own_pickle(value):
    """``value`` pickled by its types' own reductions, ignoring reducers registered with
    ``copyreg``: a library can register one for every exception type (``distributed``,
    through ``tblib``), and what a worker sends must not depend on what it imported."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {}
    pickler.dump(value)
    return buffer.getvalue()


def _raise_worker_error(payload):
    error, notes = pickle.loads(payload)
    for note in notes:
        _add_note(error, note)
    raise error


def _load_batch_in_worker(indices, transform_index):
    """``(True, pickled batch)``, or ``(False, pickled error)`` if loading failed."""
    state = _worker_state.get()
    try:
        batch = load_batch(state['dataset'], indices,
                           _pick(state['transforms'], transform_index), state['batchify_fn'])
        # NDArrays travel as shared-memory file descriptors (MXNet registers the reducer).
        return True, bytes(ForkingPickler.dumps(batch, pickle.HIGHEST_PROTOCOL))
    except Exception as error:
        # Returned, not raised: the pool would wrap it, and could hang on one that fails
        # to unpickle.
        return False, _error_payload(error, indices)


class PooledLoader(mx.gluon.data.DataLoader):
    """A DataLoader whose errors keep their type and name the dataset indices that failed.

    An exception raised while loading a batch (by the dataset, a transform or the
    batchify function) reaches the caller as the very exception raised -- its type,
    ``args``, ``str`` and attributes such as ``errno`` and ``filename`` unchanged -- with
    notes (``__notes__``, shown below the traceback) naming the batch's dataset indices
    and, when a worker loaded it, that worker's traceback. An exception a worker cannot
    send back (it does not pickle, or not rebuild from its pickle) arrives as a
    ``RuntimeError`` naming its type and message, with the same notes.

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
    timeout : float, default 120
        Seconds to wait for a worker's batch before raising (a worker that died).
    transforms : sequence of callables
        The transforms ``_transform_for`` picks from, applied as ``dataset.transform``.

    Raises
    ------
    TypeError
        ``num_workers`` or ``prefetch`` is not an integer (``prefetch`` may be None).
    ValueError
        ``num_workers`` is negative or ``prefetch`` below 1.
    """

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, timeout=120, transforms=()):
        num_workers = check_int(num_workers, 'num_workers', minimum=0)
        prefetch = check_int(prefetch, 'prefetch', minimum=1, allow_none=True)
        super().__init__(dataset=dataset, batch_size=batch_size, shuffle=shuffle,
                         sampler=sampler, last_batch=last_batch, batch_sampler=batch_sampler,
                         batchify_fn=batchify_fn, num_workers=0, pin_memory=pin_memory,
                         pin_device_id=pin_device_id)
        self._num_workers = num_workers
        self._prefetch = prefetch if prefetch is not None else max(1, 2 * num_workers)
        self._timeout = timeout
        self._transforms = list(transforms)
        self._worker_pool = None
        if self._num_workers:
            self._worker_pool = _CONTEXT.Pool(
                self._num_workers, initializer=_set_worker_state,
                initargs=(self._dataset, self._transforms, self._batchify_fn))

    def _transform_for(self, batch_index):
        """Index into ``transforms`` of the transform for this batch (None: no transform)."""
        return None

    def _deliver(self, batch):
        if self._pin_memory:
            pinned = mx.context.cpu_pinned(self._pin_device_id)
            return map_arrays(lambda array: array.as_in_context(pinned), batch)
        return batch

    def _start_epoch(self):
        """Called as each pass over the data begins."""

    def __iter__(self):
        self._start_epoch()
        if self._worker_pool is None:
            for batch_index, indices in enumerate(self._batch_sampler):
                transform = _pick(self._transforms, self._transform_for(batch_index))
                try:
                    batch = load_batch(self._dataset, indices, transform, self._batchify_fn)
                except Exception as error:
                    _add_note(error, _indices_note(indices))
                    raise
                yield self._deliver(batch)
        else:
            yield from self._iter_workers()

    def _iter_workers(self):
        pending = collections.deque()
        for batch_index, indices in enumerate(self._batch_sampler):
            pending.append(self._worker_pool.apply_async(
                _load_batch_in_worker, (indices, self._transform_for(batch_index))))
            if len(pending) > self._prefetch:
                yield self._receive(pending.popleft())
        while pending:
            yield self._receive(pending.popleft())

    def _receive(self, result):
        try:
            loaded, payload = result.get(self._timeout)
        except multiprocessing.TimeoutError:
            raise RuntimeError('a worker did not deliver a batch within %s s; it may have '
                               'died (out of memory?)' % self._timeout) from None
        if not loaded:
            _raise_worker_error(payload)
        return self._deliver(pickle.loads(payload))

    def __del__(self):
        if getattr(self, '_worker_pool', None) is not None:
            self._worker_pool.terminate()
            self._worker_pool = None
