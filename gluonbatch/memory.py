"""Where batches live, and the error a batch that does not fit in shared memory raises.

MXNet sizes a file in ``/dev/shm`` for every ``cpu_shared`` array; that succeeds even when
the tmpfs has no room, and the first write past its free space kills the process with
SIGBUS ("Bus error"). gluonbatch checks the free space before every shared allocation and
then reserves the pages, so a batch that does not fit raises :class:`SharedMemoryError`
instead, in the main process or in a DataLoader worker.

Where batches live is a setting, ``set_memory(mode)`` or the ``GLUONBATCH_MEMORY``
environment variable:

* ``'shared'`` (default, as gluoncv): always ``cpu_shared``;
* ``'auto'``: ``cpu_shared`` only in worker processes, which send batches to the main
  process by file descriptor; plain ``cpu`` memory in the main process (``num_workers=0``,
  ``thread_pool=True``), where shared memory buys nothing and its page faults cost more;
* ``'cpu'``: never shared memory.

Examples
--------
>>> import gluonbatch
>>> gluonbatch.set_memory('cpu')
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).context
cpu(0)
>>> gluonbatch.set_memory('shared')
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).context
cpu_shared(0)
"""
import contextlib
import os

from ._core.checks import check_choice
from ._core.process import in_worker_process

__all__ = ['MODES', 'SharedMemoryError', 'set_memory', 'get_memory', 'use_memory',
           'use_shared_memory']

#: The memory settings.
MODES = ('shared', 'auto', 'cpu')
_ENV = 'GLUONBATCH_MEMORY'

_mode = None  # None: read the environment variable


class SharedMemoryError(MemoryError):
    """A batch does not fit in the free shared memory (``/dev/shm``)."""


def set_memory(mode):
    """Choose where batches live: ``'shared'``, ``'auto'`` or ``'cpu'`` (see module doc).

    Overrides ``GLUONBATCH_MEMORY``; worker processes forked afterwards inherit it.
    """
    global _mode
    _mode = check_choice(mode, 'the memory setting', MODES)


@contextlib.contextmanager
def use_memory(mode):
    """Use memory setting ``mode`` inside a ``with`` block, then restore the previous one.

    >>> import gluonbatch
    >>> with use_memory('cpu'):
    ...     gluonbatch.Stack()([[1, 2]]).context
    cpu(0)
    >>> gluonbatch.Stack()([[1, 2]]).context
    cpu_shared(0)
    """
    global _mode
    previous = _mode
    set_memory(mode)
    try:
        yield
    finally:
        _mode = previous


def get_memory():
    """The memory setting in force: ``set_memory``'s, else ``GLUONBATCH_MEMORY``'s, else
    ``'shared'``.

    >>> get_memory() in MODES
    True
    """
    if _mode is not None:
        return _mode
    return check_choice(os.environ.get(_ENV, 'shared'), 'the environment variable ' + _ENV,
                        MODES)


def use_shared_memory():
    """Whether a batch allocated now goes to ``cpu_shared`` memory."""
    mode = get_memory()
    if mode == 'auto':
        return in_worker_process()
    return mode == 'shared'
