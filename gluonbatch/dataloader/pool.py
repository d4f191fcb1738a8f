"""The worker processes of a :class:`~gluonbatch.DataLoader`: how they
start, load, die, are replaced and stop. This is the one place that tells it.

**Start.** Each worker is a fork of the training process (:func:`~.worker.serve`), with a
channel of its own: a Unix socket pair (:mod:`~.channel`). The main process hands every
task to one worker, so it always knows which worker holds which batches, and in which
order they come back. Whenever it waits for a batch, it waits on every channel and on
every worker's process sentinel at once (``multiprocessing.connection.wait``): an answer
wakes it, and so does a worker's exit, busy or idle. (While the training process computes,
nobody watches: a death is seen as the loader next waits, with no timeout to run out.)
There is no shared queue, lock or table a dying worker could leave half-written.

**Answers.** A batch's shared-memory arrays travel as file descriptors inside the message
(``SCM_RIGHTS``). The kernel holds them until the main process reads the message, so a
batch a worker sent before it died is still received, and is not loaded again.

**Death.** A worker that exits (any signal, ``os._exit``, a segfault in a decoder) is
reaped as soon as it is seen. Its complete answers are taken, a message it was writing is
dropped, and every task it still held is given to the others and to the worker started in
its place, once every worker seen dead is reaped (workers often die together).
Each replacement warns once (``RuntimeWarning``): the pid, the signal or exit code, and
the dataset indices issued again. A seeded batch is a function of its keys alone, so the
stream stays identical; an unseeded epoch loses no sample and repeats none.

**Stall.** A worker holding tasks that has not answered for ``timeout`` seconds (stopped,
deadlocked) is killed (SIGKILL, which a stopped process obeys too) and dealt with as dead;
one loading a batch of a pass left early, after at most :data:`ABANDONED_SECONDS`. The
stall of a batch nobody waits for counts no strike, and the batch is not loaded again.

**Poison.** The task a worker was loading when it died or stalled gets a strike; a task
with two strikes raises a ``RuntimeError`` naming its dataset indices, the pids and what
happened to them, instead of killing worker after worker. More than ``max_restarts``
replacements in a loader's life raise a ``RuntimeError`` too.

**Inheritance.** A replacement forks the training process as it is when the death is seen:
its Python objects, the network's parameters, open files. MXNet stops its engine around a
fork and starts it again on both sides, so engine threads are not inherited in a running
state; the dataset, transforms and batchify function are the loader's own objects, as at
the loader's start. Workers run OpenCV and BLAS on one thread each, ignore Ctrl-C (the
training process handles it) and close the channels of other workers they inherited.

**Stop.** :meth:`WorkerPool.close` closes the main process's end of every channel: an idle
worker reads the end of its channel and exits, a busy one exits when it cannot send its
batch. Those not gone within :data:`LEAVE_SECONDS` are killed. All are reaped, so no
child, zombie, ``/dev/shm`` file or temp directory outlives ``close()`` (but a process the
kernel holds for :data:`LEAVE_SECONDS` after its SIGKILL, which multiprocessing reaps
later); descriptors of answers never read are released by the kernel with the socket. A
pool still open when the process that made it exits (the interpreter, or a multiprocessing
child) is closed the same way; a fork's copy of a pool closes only its own ends of the
channels. (A child made by ``os.fork`` itself must leave with ``os._exit``, as
multiprocessing's children do: Python's exit handler in it would terminate the children of
the process it was forked from, the workers among them.) How a worker's end is awaited
and reaped, and the ``/dev/shm`` names it left removed: :mod:`~.ending`.

Examples
--------
>>> from gluonbatch.dataloader.worker import Job
>>> pool = WorkerPool(Job([10, 20, 30], [], list, False, False), num_workers=2, timeout=60)
>>> pool.submit(Task(0, [2, 0], None))
>>> answers = []
>>> while not answers:
...     answers = pool.collect()
>>> [(task.sequence, ok, value) for task, ok, value in answers]
[(0, True, [30, 10])]
>>> pool.close()
"""
import collections
import multiprocessing
import multiprocessing.connection
import multiprocessing.util
import os
import pickle
import socket
import time
import warnings
import weakref
from multiprocessing.process import BaseProcess
from typing import Any

import mxnet as mx

from .._core.pickling import close_fds, loads_with_fds
from .._core.process import ProcessLocal
from .._core.threads import before_forking_workers
from .channel import Reader, send, socket_pair
from .ending import describe_exit, kill, reap, wait_ended
from .worker import SEQUENCE, Batch, Job, dataset_indices, error_payload, serve

__all__ = ['CONTEXT', 'LEAVE_SECONDS', 'ABANDONED_SECONDS', 'STRIKES', 'Task', 'WorkerPool']

#: Fork, not spawn or forkserver: workers inherit the dataset, transforms and batchify
#: function, which need not pickle.
CONTEXT = multiprocessing.get_context('fork')
#: Seconds workers get to leave when the pool closes, before they are killed.
LEAVE_SECONDS = 5.0
#: Seconds at most a worker may spend on a batch of a pass left early, however long
#: ``timeout`` is: nobody waits for that batch, and the batches behind it are wanted.
ABANDONED_SECONDS = 10.0
#: Deaths or stalls while loading a task that make it a poison sample.
STRIKES = 2


class Task:
    """One batch to load: its sequence number (never reused in a loader), what the sampler
    gave (indices, or a :class:`~gluonbatch.samplers.KeyBatch`), the transform's index, and
    the workers it killed or stalled (``strikes``: ``(pid, what happened)``)."""

    __slots__ = ('sequence', 'batch', 'transform', 'strikes', 'abandoned')

    def __init__(self, sequence: int, batch: Batch, transform: int | None) -> None:
        self.sequence, self.batch, self.transform = sequence, batch, transform
        self.strikes: list[tuple[int, str]] = []
        self.abandoned = False  # its pass was left early: nobody waits for it

    @property
    def indices(self) -> list[int]:
        """The batch's dataset indices."""
        return dataset_indices(self.batch)


class _Worker:
    """A worker process, the main process's end of its channel, and the tasks it holds in
    the order it answers them."""

    def __init__(self, process: BaseProcess, sock: socket.socket) -> None:
        self.process, self.sock, self.reader = process, sock, Reader(sock)
        self.gone = False  # a task could not be sent to it: it died
        self.tasks: collections.deque[Task] = collections.deque()
        self.answered = time.monotonic()  # when it last answered, or was given work idle


class WorkerPool:
    """Worker processes that load tasks, replaced when they die or stall.

    Parameters
    ----------
    job : Job
        What every worker inherits.
    num_workers : int
        Worker processes, at least 1.
    timeout : float
        Seconds a worker holding tasks may go without answering before it is deemed stuck
        (``inf``: never).
    max_restarts : int, default 10
        Replacements allowed in the pool's life.
    """

    def __init__(self, job: Job, num_workers: int, timeout: float,
                 max_restarts: int = 10) -> None:
        self._job, self._timeout, self._max_restarts = job, timeout, max_restarts
        self.restarts = 0
        self._broken: str | None = None  # why the pool can load no more, once it cannot
        # tasks no live worker took: given out as workers are replaced
        self._unsent: list[Task] = []
        self._workers: list[_Worker] = []
        self._owner = os.getpid()  # a fork that inherits the pool does not own its workers
        _OPEN.get().add(self)
        mx.nd.waitall()  # no engine operation in flight while forking
        before_forking_workers()
        for _ in range(num_workers):
            self._workers.append(self._start())

    @property
    def pids(self) -> list[int | None]:
        """The worker processes' pids."""
        return [worker.process.pid for worker in self._workers]

    @property
    def outstanding(self) -> int:
        """Tasks handed to workers and not yet answered."""
        return sum(len(worker.tasks) for worker in self._workers) + len(self._unsent)

    def _start(self):
        ours, theirs = socket_pair()
        process = CONTEXT.Process(target=serve, args=(theirs, self._job), daemon=True,
                                  name='gluonbatch-worker')
        try:
            process.start()
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return _Worker(process, ours)

    def submit(self, task: Task) -> None:
        """Hand ``task`` to the live worker holding fewest tasks (or keep it for the next
        :meth:`collect`, if none takes it)."""
        self._check_working()
        message = pickle.dumps((task.sequence, task.batch, task.transform),
                               pickle.HIGHEST_PROTOCOL)
        for worker in sorted(self._workers, key=lambda each: len(each.tasks)):
            if worker.gone:
                continue
            try:
                send(worker.sock, message)
            except OSError:  # it died: its sentinel says so too
                worker.gone = True
                continue
            if not worker.tasks:
                worker.answered = time.monotonic()
            worker.tasks.append(task)
            return
        self._unsent.append(task)

    def collect(self, timeout: float | None = None) -> list[tuple[Task, bool, Any]]:
        """Wait up to ``timeout`` seconds (None: until something happens) for answers;
        ``[(task, ok, value)]``, ``value`` the batch or the pickled error. Deaths and stalls
        seen meanwhile are dealt with (see the module)."""
        self._check_working()
        stall_in = self._stall_in()
        if timeout is None or (stall_in is not None and stall_in < timeout):
            timeout = stall_in
        if self._unsent:
            timeout = 0
        handles: dict[Any, _Worker] = {}  # by its socket and by its sentinel
        for worker in self._workers:
            handles[worker.sock] = handles[worker.process.sentinel] = worker
        ready = multiprocessing.connection.wait(list(handles), timeout)
        answers = []
        for worker in {handles[handle] for handle in ready}:
            answers.extend(self._read(worker))
        now = time.monotonic()
        lost: list[tuple[_Worker, str | None]] = []
        for worker in list(self._workers):
            if worker.gone or worker.reader.closed or wait_ended(worker.process, 0):
                lost.append((worker, None))
            elif worker.tasks and now - worker.answered >= self._patience(worker):
                lost.append((worker, 'stopped answering for %g s' % self._patience(worker)))
        if lost or self._unsent:
            answers.extend(self._replace(lost))
        return answers

    def _check_working(self):
        if self._broken is not None:
            raise RuntimeError(self._broken)

    def _patience(self, worker):
        """Seconds ``worker`` may go without answering: ``timeout``, and at most
        :data:`ABANDONED_SECONDS` for a batch nobody waits for (even with no timeout)."""
        if worker.tasks and worker.tasks[0].abandoned:
            return min(self._timeout, ABANDONED_SECONDS)
        return self._timeout

    def _stall_in(self):
        """Seconds until the first worker holding tasks counts as stuck, or None."""
        times = [worker.answered + self._patience(worker) for worker in self._workers
                 if worker.tasks]
        if not times or min(times) == float('inf'):
            return None
        return max(0.0, min(times) - time.monotonic())

    def _read(self, worker):
        answers, messages = [], worker.reader.available()
        for number, (payload, fds) in enumerate(messages):
            (sequence,) = SEQUENCE.unpack_from(payload)
            if not worker.tasks or worker.tasks[0].sequence != sequence:
                for _, rest in messages[number:]:  # answers come in order: this is a bug
                    close_fds(rest)
                raise RuntimeError('worker process %d answered task %d, which it did not '
                                   'hold' % (worker.process.pid, sequence))
            task = worker.tasks.popleft()
            try:
                ok, value = loads_with_fds(memoryview(payload)[SEQUENCE.size:], fds)
            except Exception as error:  # out of descriptors or memory, say: this batch's
                ok, value = False, error_payload(error, task.indices)
            worker.answered = time.monotonic()
            answers.append((task, ok, value))
        return answers

    def _replace(self, lost):
        """Reap the workers of ``lost`` (``(worker, why it stalled or None)``; a stalled
        one is killed first), take their answers, start others and give their tasks out
        again, tasks nobody took before too. RuntimeError for a poison batch or too many
        restarts; every dead worker is reaped first, so a task handed to a worker that died
        beside another is not struck for it."""
        answers, reports, orphans = [], [], self._unsent
        self._unsent = []
        for worker, stalled in lost:
            if stalled is not None:
                kill(worker.process)
            ended = wait_ended(worker.process, LEAVE_SECONDS)
            if not ended:  # no channel, yet lives on
                kill(worker.process)
                ended = wait_ended(worker.process, LEAVE_SECONDS)
            exitcode = reap(worker.process)
            answers.extend(self._read(worker))  # sent before it died: the kernel kept them
            worker.reader.drop_partial()
            worker.sock.close()
            self._workers.remove(worker)
            cause = stalled or (describe_exit(exitcode) if ended else
                                'did not end %g s after SIGKILL' % LEAVE_SECONDS)
            held = [task for task in worker.tasks if not task.abandoned]
            if held and held[0] is worker.tasks[0]:  # what it was loading
                held[0].strikes.append((worker.process.pid, cause))
            # a stall on a batch nobody waits for is the loop's break, not the worker's fault
            counts = not (stalled and worker.tasks and worker.tasks[0].abandoned)
            reports.append((worker.process.pid, cause, held, counts))
            orphans.extend(held)
        poisoned = [task for task in orphans if len(task.strikes) >= STRIKES]
        self._restart(reports)
        for task in orphans:
            if task not in poisoned:
                self.submit(task)
        for pid, cause, held, _ in reports:
            warnings.warn('DataLoader worker process %d %s%s; a new worker process replaces '
                          'it%s' % (pid, cause, _holding(held),
                                    ' and loads them again' if held else ''),
                          RuntimeWarning, stacklevel=5)
        if poisoned:
            raise RuntimeError(_poison_message(poisoned[0]))
        return answers

    def _restart(self, reports):
        """Start a worker for each dead one of ``reports``; RuntimeError past
        ``max_restarts`` or when no process can be started."""
        for pid, cause, held, counts in reports:
            if counts and self.restarts >= self._max_restarts:
                self._broken = (
                    'DataLoader worker process %d %s%s; the loader has replaced %d workers, '
                    'its max_restarts: it loads no more (raise max_restarts if workers are '
                    'expected to die this often)' % (pid, cause, _holding(held),
                                                     self.restarts))
                raise RuntimeError(self._broken)
            self.restarts += counts
            mx.nd.waitall()
            try:
                self._workers.append(self._start())
            except OSError as error:  # out of memory or processes: no worker to be had
                self._broken = ('no worker process could be started in place of process %d '
                                '(%s): %s' % (pid, cause, error))
                raise RuntimeError(self._broken) from error

    def close(self) -> None:
        """Stop every worker (see the module); closing again does nothing."""
        workers, self._workers = self._workers, []
        self._broken = 'the loader is closed'
        _OPEN.get().discard(self)
        for worker in workers:
            worker.sock.close()  # idle: end of file; busy: its answer cannot be sent
            worker.reader.drop_partial()  # descriptors of a message read in part
        if os.getpid() != self._owner:  # a copy in a fork: the workers are not its children
            return
        deadline = time.monotonic() + LEAVE_SECONDS
        for worker in workers:
            if not wait_ended(worker.process, max(0.0, deadline - time.monotonic())):
                kill(worker.process)
                wait_ended(worker.process, LEAVE_SECONDS)  # one in the kernel may take longer
            reap(worker.process)


def _open_pools() -> 'weakref.WeakSet[WorkerPool]':
    """A process's set of pools not closed yet, closed as the process exits: by
    multiprocessing's exit handler (the interpreter's, or a multiprocessing child's), among
    the finalizers it runs before it terminates the children it still has, which would end
    the workers wherever they are (making a shared array, say)."""
    pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
    multiprocessing.util.Finalize(None, _close_all, args=(pools,), exitpriority=10)
    return pools


def _close_all(pools: 'weakref.WeakSet[WorkerPool]') -> None:
    for pool in list(pools):
        try:
            pool.close()
        except Exception:  # the others are closed all the same
            pass


#: This process's pools not closed yet (each process has its own).
_OPEN: ProcessLocal = ProcessLocal(_open_pools)


def _poison_message(task):
    return ('dataset samples %s are a poison batch: loading them cost %d worker processes '
            '(%s); it is not loaded again. Find what in these samples kills or stalls a '
            'worker (a corrupt image a decoder crashes on, say)'
            % (task.indices, len(task.strikes),
               '; '.join('process %d %s' % strike for strike in task.strikes)))


def _holding(tasks):
    """What a dead worker held, for its message."""
    if not tasks:
        return ' while idle'
    return ' while loading dataset samples %s' % '; '.join(str(task.indices)
                                                           for task in tasks)
