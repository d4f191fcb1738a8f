"""How the pool ends a worker process and learns how it ended: waiting for its end
without reaping it, killing it, reaping it, and saying how it ended.

A worker that ended stays a zombie until it is reaped, and while it is one its pid is no
other process's. That is when the ``/dev/shm`` names it left are removed
(``gluonbatch._core.shm.remove_names_left_by``): one killed while MXNet made a shared
array would otherwise keep that memory taken until the machine restarts.

Examples
--------
>>> import multiprocessing, os
>>> process = multiprocessing.get_context('fork').Process(target=os._exit, args=(3,))
>>> process.start()
>>> wait_ended(process, 60)
True
>>> open('/proc/%d/stat' % process.pid).read().rpartition(')')[2].split()[0]  # a zombie
'Z'
>>> reap(process)
>>> describe_exit(process.exitcode)
'exited with code 3'
"""
import multiprocessing.connection
import os
import signal
from multiprocessing.process import BaseProcess
from typing import cast

from .._core.shm import remove_names_left_by

__all__ = ['wait_ended', 'kill', 'reap', 'describe_exit']


def wait_ended(process: BaseProcess, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``process`` to end; whether it has. It is left
    a zombie, not reaped."""
    if not multiprocessing.connection.wait([process.sentinel], timeout):
        return False
    try:  # its descriptors, the sentinel's among them, close just before it becomes a zombie
        os.waitid(os.P_PID, _pid(process), os.WEXITED | os.WNOWAIT)
    except ChildProcessError:  # reaped already: multiprocessing reaps ended children too
        pass
    return True


def kill(process: BaseProcess) -> None:
    """Send ``process`` SIGKILL, which a stopped process obeys too."""
    try:
        os.kill(_pid(process), signal.SIGKILL)
    except ProcessLookupError:  # gone already
        pass


def reap(process: BaseProcess) -> None:
    """Reap ``process`` if it has ended, first removing the ``/dev/shm`` names it left.
    (A pid multiprocessing reaped first was freed moments ago; Linux reuses pids last.)"""
    if wait_ended(process, 0):
        remove_names_left_by(_pid(process))
        process.join()


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, from its ``exitcode``: ``'killed by signal 9 (SIGKILL)'`` or
    ``'exited with code 3'``.

    >>> describe_exit(-9), describe_exit(3)
    ('killed by signal 9 (SIGKILL)', 'exited with code 3')
    """
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = 'unknown'
        return 'killed by signal %d (%s)' % (-exitcode, name)
    return 'exited with code %s' % exitcode


def _pid(process):
    return cast(int, process.pid)  # a started process has one
