"""One thread per DataLoader worker: OpenCV's and the BLAS / OpenMP libraries' thread pools
run on one thread in a forked worker process, the training process's left as they are.

With several workers, the workers are the parallelism: threads of their own in each worker
compete for the cores of the others. :func:`one_thread_per_worker` runs first thing in a
freshly forked worker (it changes process-wide settings, so never in the training
process); :func:`before_forking_workers` makes it cheap.

OpenCV is set with ``cv2.setNumThreads(0)``, not ``1``: in a forked child whose parent had
run OpenCV's threads, setting 1 waits forever for threads that exist only in the parent
(opencv-python 4.8.1.78: 10 children hung of 10 forked 50 ms after the parent's last
parallel call). 0 leaves the pool alone and runs every OpenCV function on the calling
thread (``cv2.getNumThreads()`` then reports 1). Do not change it again in the worker.

Examples
--------
>>> import multiprocessing
>>> import cv2
>>> context = multiprocessing.get_context('fork')
>>> receive, send = context.Pipe(duplex=False)
>>> def worker():
...     one_thread_per_worker()
...     send.send(cv2.getNumThreads())
>>> process = context.Process(target=worker)
>>> process.start()
>>> send.close()  # the worker's end: if it dies, recv() fails, not waits
>>> receive.recv()
1
>>> process.join()
>>> process.exitcode
0
"""
import os
import sys

import threadpoolctl

__all__ = ['one_thread_per_worker', 'before_forking_workers', 'LOAD_TIME_VARIABLES']

#: The variables a library reads when it loads (OpenCV: when its pool is first used), each
#: set to ``'1'`` in the worker for the libraries it loads, and the processes it starts,
#: after the call. ``OPENBLAS_CORETYPE`` (the CPU kernels OpenBLAS picks) is not touched.
LOAD_TIME_VARIABLES = ('OPENCV_FOR_THREADS_NUM', 'OMP_NUM_THREADS', 'OPENBLAS_NUM_THREADS',
                       'MKL_NUM_THREADS')


def one_thread_per_worker() -> None:
    """Run OpenCV, BLAS and OpenMP on one thread in this process, from now on.

    Call it in a freshly forked DataLoader worker, before it loads anything. OpenCV, if
    imported, runs its functions on the calling thread (``cv2.getNumThreads()`` is 1); the
    BLAS and OpenMP libraries loaded (numpy's OpenBLAS among them) are limited to one thread
    by threadpoolctl; and :data:`LOAD_TIME_VARIABLES` are set to ``'1'`` in
    ``os.environ``, so that an OpenCV or BLAS library loaded later runs on one thread too.
    MXNet's engine settings are left alone. Calling it again changes nothing.

    Returns
    -------
    None

    Examples
    --------
    In a forked child, every BLAS and OpenMP library loaded then runs on one thread:

    >>> import multiprocessing
    >>> import threadpoolctl
    >>> context = multiprocessing.get_context('fork')
    >>> receive, send = context.Pipe(duplex=False)
    >>> def worker():
    ...     one_thread_per_worker()
    ...     send.send({pool['num_threads'] for pool in threadpoolctl.threadpool_info()})
    >>> process = context.Process(target=worker)
    >>> process.start()
    >>> send.close()
    >>> receive.recv()
    {1}
    >>> process.join()
    """
    for name in LOAD_TIME_VARIABLES:
        os.environ[name] = '1'
    # Only an OpenCV already imported: importing it here would cost a worker about 23 ms,
    # and one imported later reads OPENCV_FOR_THREADS_NUM. None in sys.modules blocks
    # the import (as without OpenCV).
    cv2 = sys.modules.get('cv2')
    if cv2 is not None:
        # 0, not 1: see the module's docstring (1 can hang a forked child).
        cv2.setNumThreads(0)
    # Applied when made (the object would restore the limits only as a context manager).
    threadpoolctl.threadpool_limits(1)


def before_forking_workers() -> None:
    """In the training process, before it forks workers: let threadpoolctl find the
    libraries loaded, so that each worker inherits what it found and
    :func:`one_thread_per_worker` takes about 3 ms there instead of 9. Changes no setting.

    Examples
    --------
    >>> before_forking_workers()
    """
    threadpoolctl.threadpool_info()
