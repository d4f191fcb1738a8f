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

from mxnet.util import set_np

from ..seeded import KeyBatch
from .worker import Job, error_payload, dataset_indices, load_batch, owned_by, pick

__all__ = ['ThreadWorkers']


class ThreadWorkers:
    """``num_workers`` threads loading tasks; :meth:`collect` gives what they finished."""

    restarts = 0  # threads are never replaced
    pids: list = []  # no worker processes

    def __init__(self, job: Job, num_workers: int):
        self._job, self._owned = job, {}
        self._executor = concurrent.futures.ThreadPoolExecutor(
            num_workers, thread_name_prefix='gluonbatch-loader',
            initializer=set_np, initargs=(job.numpy_shape, job.numpy_array))
        self._finished = queue.SimpleQueue()
        self.outstanding = 0

    def submit(self, task) -> None:
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
        except Exception as error:  # as from a worker process: with its notes
            value = False, error_payload(error, dataset_indices(task.batch))
        self._finished.put((task,) + value)

    def collect(self, timeout=None) -> list:
        """Wait up to ``timeout`` seconds (None: without limit) for a finished task;
        ``[(task, ok, value)]``."""
        try:
            finished = [self._finished.get(timeout=timeout)]
        except queue.Empty:
            return []
        while True:
            try:
                finished.append(self._finished.get_nowait())
            except queue.Empty:
                break
        self.outstanding -= len(finished)
        return finished

    def close(self) -> None:
        """Let the threads finish what they hold, and stop them."""
        self._executor.shutdown(wait=True, cancel_futures=True)
