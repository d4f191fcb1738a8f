"""Loading in threads of the training process (``thread_pool=True``): the same interface as
:class:`~gluonbatch.dataloader.pool.WorkerPool`, without processes to lose.

Threads share the process's generators: a seeded read holds the process's read lock
(:func:`~gluonbatch.seeded.keys.read_seeded`), so seeded batches stay those of any other
number of workers.

Examples
--------
>>> from gluonbatch.dataloader.pool import Task
>>> from gluonbatch.dataloader.worker import Job
>>> threads = ThreadWorkers(Job([10, 20, 30], [], list, False, False), num_workers=2)
>>> threads.submit(Task(0, [1, 2], None))
>>> [(task.sequence, ok, value) for task, ok, value in threads.collect()]
[(0, True, [20, 30])]
>>> threads.close()
"""
import concurrent.futures
import queue
from typing import Any

from mxnet.util import set_np

from ..samplers import KeyBatch
from .pool import Task
from .worker import Job, Owned, error_payload, dataset_indices, load_batch, owned_by, pick

__all__ = ['ThreadWorkers']


class ThreadWorkers:
    """``num_workers`` threads loading tasks; :meth:`collect` gives what they finished."""

    restarts = 0  # threads are never replaced
    pids: list[int] = []  # no worker processes

    def __init__(self, job: Job, num_workers: int, timeout: float = float('inf')) -> None:
        self._job, self._timeout = job, timeout
        self._owned: Owned = {}
        self._executor = concurrent.futures.ThreadPoolExecutor(
            num_workers, thread_name_prefix='gluonbatch-loader',
            initializer=set_np, initargs=(job.numpy_shape, job.numpy_array))
        self._finished: queue.SimpleQueue[tuple[Task, bool, Any]] = queue.SimpleQueue()
        self.outstanding = 0

    def submit(self, task: Task) -> None:
        """Load ``task`` in a thread."""
        self.outstanding += 1
        self._executor.submit(self._load, task)

    def _load(self, task):
        job = self._job
        try:
            generators = (owned_by(self._owned, job.dataset, job.transforms, task.transform)
                          if isinstance(task.batch, KeyBatch) else None)
            value = True, load_batch(job.dataset, task.batch, pick(job.transforms, task.transform),
                                     job.batchify_fn, generators)
        except BaseException as error:  # as from a worker process: with its notes
            value = False, error_payload(error, dataset_indices(task.batch))
        self._finished.put((task,) + value)

    def collect(self, timeout: float | None = None) -> list[tuple[Task, bool, Any]]:
        """Wait up to ``timeout`` seconds (None: ``timeout`` of the pool) for a finished
        task; ``[(task, ok, value)]``. RuntimeError if none finished within the pool's
        ``timeout``: a thread is stuck, and cannot be replaced."""
        limit = self._timeout if timeout is None else min(timeout, self._timeout)
        try:
            finished = [self._finished.get(timeout=None if limit == float('inf') else limit)]
        except queue.Empty:
            if timeout is not None and timeout < self._timeout:
                return []
            raise RuntimeError('no batch was loaded within %g s: a loader thread is stuck '
                               '(threads cannot be replaced as worker processes are)'
                               % self._timeout) from None
        while True:
            try:
                finished.append(self._finished.get_nowait())
            except queue.Empty:
                break
        self.outstanding -= len(finished)
        return finished

    def close(self) -> None:
        """Drop the tasks not begun; threads busy finish theirs on their own (a stuck one
        is not waited for)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
