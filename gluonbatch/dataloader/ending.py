"""How the pool ends a worker process and learns how it ended: waiting for its end
without reaping it, killing it, reaping it, and saying how it ended.

A worker that ended stays a zombie until it is reaped, and while it is one its pid is no
other process's in this pid namespace. That is when the ``/dev/shm`` names it left are
removed (``gluonbatch._core.shm.remove_names_left_by``): one killed while MXNet made a
shared array would otherwise keep that memory taken until the machine restarts. A worker
that multiprocessing reaped first (``Process.start`` and ``active_children`` reap every
ended child of the process) keeps what it left: its pid may be another process's by then.

Examples
--------
>>> import multiprocessing, os
>>> process = multiprocessing.get_context('fork').Process(target=os._exit, args=(3,))
>>> process.start()
>>> wait_ended(process, 60)
True
>>> open('/proc/%d/stat' % process.pid).read().rpartition(')')[2].split()[0]  # a zombie
'Z'
>>> describe_exit(reap(process))
'exited with code 3'
"""
import multiprocessing.connection
import os
import signal
import time
from multiprocessing.process import BaseProcess
from typing import cast

from .._core.shm import remove_names_left_by

__all__ = ['wait_ended', 'kill', 'reap', 'describe_exit']

_RUNNING, _ZOMBIE, _REAPED = 'running', 'zombie', 'reaped'


def wait_ended(process: BaseProcess, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for the started ``process`` to end, leaving it
    unreaped.

    Parameters
    ----------
    process : multiprocessing.process.BaseProcess
        A child process of this one.
    timeout : float
        Seconds at most (finite); 0 looks once.

    Returns
    -------
    bool
        Whether it has ended.
    """
    deadline = time.monotonic() + timeout
    while _state(process) == _RUNNING:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        # The sentinel's descriptor closes as it exits, just before it becomes a zombie;
        # a child of its own may keep that descriptor, or it may close it early: so the
        # wait is in slices, the process's state looked at between them.
        if multiprocessing.connection.wait([process.sentinel], min(left, 0.05)):
            time.sleep(min(left, 0.001))
    return True


def kill(process: BaseProcess) -> None:
    """Send the started ``process`` SIGKILL, which a stopped process obeys too."""
    try:
        os.kill(_pid(process), signal.SIGKILL)
    except ProcessLookupError:  # gone already
        pass


def reap(process: BaseProcess) -> int | None:
    """Reap the started ``process`` if it has ended, first removing the ``/dev/shm`` names
    it left while it is a zombie (not once multiprocessing reaped it: see the module).

    Parameters
    ----------
    process : multiprocessing.process.BaseProcess
        A child process of this one.

    Returns
    -------
    int or None
        Its exit code (minus the signal that ended it); None while it runs, or if another
        waiter than multiprocessing reaped it.
    """
    state = _state(process)
    if state == _RUNNING:
        return None
    if state == _ZOMBIE:
        remove_names_left_by(_pid(process))
    process.join()
    return process.exitcode


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, from its ``exitcode`` (None: unknown): ``'killed by signal 9
    (SIGKILL)'`` or ``'exited with code 3'``.

    >>> describe_exit(-9), describe_exit(3)
    ('killed by signal 9 (SIGKILL)', 'exited with code 3')
    """
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = 'unknown'
        return 'killed by signal %d (%s)' % (-exitcode, name)
    if exitcode is None:
        return 'ended, its exit code unknown'
    return 'exited with code %d' % exitcode


def _state(process):
    """Whether ``process`` runs, is a zombie, or was reaped, without reaping it."""
    try:
        ended = os.waitid(os.P_PID, _pid(process), os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return _REAPED
    return _RUNNING if ended is None else _ZOMBIE


def _pid(process):
    return cast(int, process.pid)  # a started process has one
