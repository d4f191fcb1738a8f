"""What runs in a worker process of :class:`~gluonbatch.DataLoader`.

A worker is a fork of the training process (:mod:`~gluonbatch.dataloader.pool` tells its
whole life): it inherits the :class:`Job` -- the dataset, the transforms, the batchify
function, numpy mode -- so none of them need pickle, and lambdas work. :func:`serve`
answers each task with its batch, or with the error, pickled with notes naming the
batch's dataset indices and the worker's traceback.

Examples
--------
>>> load_batch([1, 2, 3], [2, 0], None, list)
[3, 1]
"""
import io
import os
import pickle
import signal
import socket
import struct
import traceback
from collections.abc import Iterable
from typing import Any, Callable, NamedTuple, NoReturn, Sequence, TypeAlias

import numpy as np

from mxnet.util import set_np

from .._core.pickling import close_fds, dumps_with_fds
from .._core.threads import one_thread_per_worker
from .._core.write import write_on_calling_thread
from ..samplers import KeyBatch
from ..seeded.keys import owned_generators, read_seeded
from .channel import Reader, send

__all__ = ['Job', 'serve', 'SEQUENCE', 'load_batch', 'dataset_indices', 'owned_by', 'pick',
           'add_note', 'indices_note', 'error_payload', 'raise_worker_error']

#: What leads every answer: the sequence number of the task it answers.
SEQUENCE = struct.Struct('<Q')

#: One batch as a sampler gives it: dataset indices, or a :class:`~gluonbatch.samplers.KeyBatch`.
Batch: TypeAlias = Sequence[int] | KeyBatch
#: The generators a dataset and each of its transforms own, by the transform's index.
Owned: TypeAlias = dict[int | None, list[np.random.RandomState]]


class Job(NamedTuple):
    """What every worker of a loader inherits as it is forked."""

    dataset: Any
    transforms: Sequence[Callable]
    batchify_fn: Callable
    numpy_shape: bool
    numpy_array: bool


def serve(sock: socket.socket, job: Job) -> None:
    """A worker process's life: answer the tasks arriving at ``sock`` until the loader
    closes its end (or sends None).

    A task is ``(sequence, batch, transform index)``; the answer is the sequence number,
    then ``(True, batch)`` or ``(False, pickled error)`` pickled with the batch's
    descriptors beside it.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the training process's to handle
    one_thread_per_worker()
    write_on_calling_thread()  # as OpenCV: the workers are the parallelism
    set_np(shape=job.numpy_shape, array=job.numpy_array)
    reader = Reader(sock)
    owned: Owned = {}
    while True:
        message = reader.next()
        if message is None:
            return
        payload, fds = message
        close_fds(fds)
        task = pickle.loads(payload)
        if task is None:
            return
        sequence, batch, transform_index = task
        answer, fds = _answer(job, owned, batch, transform_index)
        try:
            send(sock, SEQUENCE.pack(sequence) + answer, fds)
        except OSError:  # the loader closed its end: nobody waits for the batch
            return
        finally:
            close_fds(fds)  # the message holds its own references


def _answer(job, owned, batch, transform_index):
    """The pickled answer to one task, and the descriptors to pass with it."""
    try:
        generators = (owned_by(owned, job.dataset, job.transforms, transform_index)
                      if isinstance(batch, KeyBatch) else None)
        value = load_batch(job.dataset, batch, pick(job.transforms, transform_index),
                           job.batchify_fn, generators)
        return dumps_with_fds((True, value))
    except Exception as error:
        return pickle.dumps((False, error_payload(error, dataset_indices(batch)))), []


def add_note(error: BaseException, note: str) -> None:
    """Add ``note`` to ``error`` once: an exception object raised again keeps one copy."""
    if note not in getattr(error, '__notes__', ()):
        error.add_note(note)


def indices_note(indices: Iterable[int]) -> str:
    """The note that names the dataset indices of the batch an error came from."""
    return 'raised while loading dataset samples %s' % list(indices)


def load_batch(dataset: Any, indices: Batch, transform: Callable[..., Any] | None,
               batchify_fn: Callable[[list[Any]], Any],
               owned: list[np.random.RandomState] | None = None) -> Any:
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


def dataset_indices(batch: Batch) -> list[int]:
    """The dataset indices of a batch of indices or of sample keys.

    >>> dataset_indices([4, 5])
    [4, 5]
    """
    if isinstance(batch, KeyBatch):
        return [key.index for key in batch]
    return list(batch)


def owned_by(cache: Owned, dataset: Any, transforms: Sequence[Callable[..., Any]],
             transform_index: int | None) -> list[np.random.RandomState]:
    """The generators ``dataset`` and its transform number ``transform_index`` own, found
    once per transform and kept in the dict ``cache``."""
    if transform_index not in cache:
        cache[transform_index] = owned_generators(dataset, pick(transforms, transform_index))
    return cache[transform_index]


def pick(transforms: Sequence[Callable[..., Any]], index: int | None
         ) -> Callable[..., Any] | None:
    """The transform at ``index``, or None for no transform."""
    return None if index is None else transforms[index]


def error_payload(error: BaseException, indices: Iterable[int]) -> bytes:
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


def raise_worker_error(payload: bytes) -> NoReturn:
    """In the main process: raise the error a worker sent, its notes added."""
    error, notes = pickle.loads(payload)
    for note in notes:
        add_note(error, note)
    raise error


