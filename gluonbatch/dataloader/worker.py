"""What runs in the worker processes of :class:`~gluonbatch.dataloader.pool.PooledLoader`,
and what they share with the main process.

Workers are forked (an explicit ``fork`` context, whatever the platform's default): each
receives the dataset, the candidate transforms, the batchify function and the task claims
once, when the pool starts, by inheriting them rather than by pickling them per batch, so
lambdas work. A worker keeps them in a :class:`~gluonbatch._core.process.ProcessLocal`, so
the state of one process is never mistaken for another's.

A worker returns a batch as pickled bytes whose NDArrays travel as shared-memory file
descriptors, or an error pickled with notes naming the batch's dataset indices and the
worker's traceback. Before it loads a task, and again once it has returned it, it records
its pid for the task's sequence number in :class:`Claims`, so the main process can tell
which worker died holding which batch.

Examples
--------
>>> load_batch([1, 2, 3], [2, 0], None, list)
[3, 1]
"""
import io
import mmap
import multiprocessing
import os
import pickle
import traceback
from multiprocessing.reduction import ForkingPickler

from .._core.process import ProcessLocal
from ..seeded import KeyBatch
from ..seeded.keys import owned_generators, read_seeded

__all__ = ['CONTEXT', 'Claims', 'set_worker_state', 'load_batch', 'load_batch_in_worker',
           'dataset_indices', 'owned_by', 'pick', 'add_note', 'indices_note', 'raise_worker_error']

#: Fork, not spawn or forkserver: the workers inherit the dataset, transforms and
#: batchify function, which need not be picklable.
CONTEXT = multiprocessing.get_context('fork')

# In a worker: what the pool initializer handed over; empty in any other process.
_worker_state = ProcessLocal(dict)


def set_worker_state(dataset, transforms, batchify_fn, claims):
    """Pool initializer: runs once in every worker process."""
    _worker_state.get().update(dataset=dataset, transforms=transforms,
                               batchify_fn=batchify_fn, claims=claims)


class Claims:
    """Which worker process loads which task, in memory shared with the workers.

    Slot ``sequence % size`` holds one 64-bit number packing the task's sequence number,
    the worker's pid and whether the worker has returned the batch. One number is written
    with one store, so the main process never reads half a claim, and a slot that a later
    task has taken over is told apart by its sequence number. There is no lock: a worker
    killed while holding it would block the main process.

    Parameters
    ----------
    size : int
        Slots; more than the tasks that can be in flight at once, so that the slot of a
        task is not taken over while the main process may still ask about it.

    Examples
    --------
    >>> claims = Claims(4)
    >>> claims.mark(6, 1234)
    >>> claims.lookup(6), claims.lookup(2), claims.lookup(7)
    ((1234, False), None, None)
    >>> claims.mark(6, 1234, returned=True)
    >>> claims.lookup(6)
    (1234, True)
    """

    _PID_BITS = 23  # Linux pids stay below 2 ** 22

    def __init__(self, size):
        self._size = size
        # An anonymous shared mapping, inherited by the forked workers: no file, and freed
        # with the last process that maps it (multiprocessing's Array would keep a
        # /dev/shm arena open in this process for good).
        self._memory = mmap.mmap(-1, 8 * size)
        self._memory.write(b'\xff' * (8 * size))  # every slot -1: unclaimed
        self._slots = memoryview(self._memory).cast('q')

    def mark(self, sequence, pid, returned=False):
        """In a worker: task ``sequence`` is loaded (or was returned) by process ``pid``."""
        if pid >> self._PID_BITS:
            return  # no room for it: the task stays unclaimed, and only the timeout applies
        self._slots[sequence % self._size] = (
            sequence << (self._PID_BITS + 1) | int(returned) << self._PID_BITS | pid)

    def lookup(self, sequence):
        """``(pid, returned)`` of the worker that started task ``sequence``, or None."""
        value = self._slots[sequence % self._size]
        if value < 0 or value >> (self._PID_BITS + 1) != sequence:
            return None
        return value & ((1 << self._PID_BITS) - 1), bool(value >> self._PID_BITS & 1)


def add_note(error, note):
    """Add ``note`` to ``error`` once: an exception object raised again keeps one copy."""
    if note not in getattr(error, '__notes__', ()):
        error.add_note(note)


def indices_note(indices):
    """The note that names the dataset indices of the batch an error came from."""
    return 'raised while loading dataset samples %s' % list(indices)


def load_batch(dataset, indices, transform, batchify_fn, owned=None):
    """Read ``dataset[i]`` for every index (through ``transform``), then batchify. A
    :class:`~gluonbatch.seeded.SampleKey` is read with the generators seeded from it,
    those ``dataset`` and ``transform`` own (``owned``, found here if None) too.

    >>> load_batch([1, 2, 3], [2, 0], None, list)
    [3, 1]
    """
    view = dataset if transform is None else dataset.transform(transform)
    if not isinstance(indices, KeyBatch):
        return batchify_fn([view[index] for index in indices])
    if owned is None:
        owned = owned_generators(dataset, transform)
    return batchify_fn([read_seeded(view, key, owned) for key in indices])


def dataset_indices(batch):
    """The dataset indices of a batch of indices or of sample keys.

    >>> dataset_indices([4, 5])
    [4, 5]
    """
    if isinstance(batch, KeyBatch):
        return [key.index for key in batch]
    return list(batch)


def owned_by(cache, dataset, transforms, transform_index):
    """The generators ``dataset`` and its transform number ``transform_index`` own, found
    once per transform and kept in the dict ``cache``."""
    if transform_index not in cache:
        cache[transform_index] = owned_generators(dataset, pick(transforms, transform_index))
    return cache[transform_index]


def pick(transforms, index):
    """The transform at ``index``, or None for no transform."""
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
    notes.append(indices_note(indices))
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


def raise_worker_error(payload):
    """In the main process: raise the error a worker sent, its notes added."""
    error, notes = pickle.loads(payload)
    for note in notes:
        add_note(error, note)
    raise error


def load_batch_in_worker(sequence, indices, transform_index):
    """``(True, pid, pickled batch)``, or ``(False, pid, pickled error)`` if loading failed.

    The task is marked with this process's pid as it starts and as it is returned, so the
    main process can tell a worker that died while loading it.
    """
    state = _worker_state.get()
    pid = os.getpid()
    state['claims'].mark(sequence, pid)
    try:
        owned = owned_by(state.setdefault('owned', {}), state['dataset'], state['transforms'],
                         transform_index) if isinstance(indices, KeyBatch) else None
        batch = load_batch(state['dataset'], indices,
                           pick(state['transforms'], transform_index), state['batchify_fn'],
                           owned)
        # NDArrays travel as shared-memory file descriptors (MXNet registers the reducer).
        outcome = True, pid, bytes(ForkingPickler.dumps(batch, pickle.HIGHEST_PROTOCOL))
    except Exception as error:
        # Returned, not raised: the pool would wrap it, and could hang on one that fails
        # to unpickle.
        outcome = False, pid, _error_payload(error, dataset_indices(indices))
    state['claims'].mark(sequence, pid, returned=True)
    return outcome
