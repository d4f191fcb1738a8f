"""How the worker processes of a :class:`~gluonbatch.dataloader.pool.PooledLoader` end:
whether one still lives, terminating the ones stuck on batches nobody waits for, and
stopping them all -- gracefully when they are idle, within a bound whatever happens.

A worker that leaves on its own -- the pool's sentinel, sent once ``Pool.close()`` finds no
task pending -- runs multiprocessing's exit handlers: the socket its resource sharer listened
on (for the file descriptors of the batches it sent) is removed, and the descriptors it
still kept for the main process are closed. A worker that is terminated (SIGTERM) or killed
runs none of them. The workers use the main process's multiprocessing temp directory
(:func:`~gluonbatch._core.process.share_temp_dir`), so what a terminated worker leaves there
goes with the main process's exit handlers all the same, and nothing stays in ``/tmp``.

``Pool.join()`` and ``Pool.terminate()`` wait without limit: for a task that never ends,
and, once a worker was killed while it held the lock of the pool's task queue (an idle
worker waits for its next task holding it), for that lock, forever. So each step runs in a
daemon thread that the caller waits for a bounded time; the last resort kills the workers.

Examples
--------
>>> import multiprocessing
>>> before = set(multiprocessing.active_children())
>>> pool = multiprocessing.get_context('fork').Pool(1)
>>> workers = [child for child in multiprocessing.active_children() if child not in before]
>>> pool.apply(abs, (-3,))
3
>>> stop_workers(pool, idle=True, seconds=10)
'graceful'
>>> [worker.exitcode for worker in workers]  # left on its own (terminated: -15)
[0]
"""
import os
import signal
import sys
import threading
import time

__all__ = ['alive', 'wait_until_gone', 'stop_stragglers', 'stop_workers']


def alive(pid):
    """Whether process ``pid`` exists: the pool reaps a dead worker at once, so a dead
    worker's pid is soon gone.

    >>> alive(os.getpid())
    True
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, if not as ours: leave it to the timeout
        return True
    return True


def wait_until_gone(pid, seconds):
    """Whether process ``pid`` is gone, given up to ``seconds`` to be reaped."""
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def stop_stragglers(tasks, claims):
    """Terminate the workers still loading ``tasks`` (batches nobody waits for any more,
    each with a ``sequence`` number, the key of its :class:`~.worker.Claims`); the pool
    starts others. The tasks that may still arrive: those not started yet, and those
    returned by a live worker, which may be sending them (terminating it then could leave
    the pool's result queue locked for good).
    """
    kept = []
    for task in tasks:
        claim = claims.lookup(task.sequence)
        if claim is None or (claim[1] and alive(claim[0])):
            kept.append(task)
        elif not claim[1]:
            try:
                os.kill(claim[0], signal.SIGTERM)
            except ProcessLookupError:  # it died already
                pass
    return kept


def _within(action, seconds):
    """Run ``action()`` in a daemon thread; whether it returned within ``seconds``.

    An action that raises counts as returned: the pool is then stopped or broken either
    way, and nobody is left to tell.
    """
    finished = threading.Event()

    def run():
        try:
            action()
        except Exception:  # noqa: see above
            pass
        finally:
            finished.set()

    if sys.is_finalizing():  # the interpreter is shutting down: a new thread never runs
        run()
        return True
    threading.Thread(target=run, name='gluonbatch-stop-workers', daemon=True).start()
    return finished.wait(seconds)


def stop_workers(pool, idle, seconds):
    """Stop the worker processes of ``pool`` within about ``2 * seconds``; how they left.

    Parameters
    ----------
    pool : multiprocessing.pool.Pool
    idle : bool
        Whether every task handed to the pool has finished. Only then can its workers
        leave on their own: the pool sends them its sentinel once no task is pending, and
        a task whose worker died is pending for good.
    seconds : float
        How long each step may take: the workers leaving, then their termination.

    Returns
    -------
    str
        ``'graceful'`` (the workers left on their own), ``'terminated'`` (SIGTERM) or
        ``'killed'`` (SIGKILL, after termination did not finish in time).
    """
    if idle and not sys.is_finalizing():
        pool.close()
        if _within(pool.join, seconds):
            return 'graceful'
    if _within(pool.terminate, seconds):
        return 'terminated'
    # Termination waits on the task queue's lock, which a killed worker may hold for good:
    # kill what is left, which lets any join end; the waiting thread may stay blocked.
    for worker in list(getattr(pool, '_pool', ())):
        if worker.exitcode is None:
            worker.kill()
    return 'killed'
