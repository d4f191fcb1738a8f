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

In DataLoader worker processes, batches are written into **recycled** shared memory: a
worker keeps the segments of the batches it sent and reuses one once the main process has
let go of it (MXNet's shared reference count and the worker's own count of the arrays using
it both say so), which saves the page faults of fresh memory, most of the cost of a large
batch. ``set_recycling(False)`` or
``GLUONBATCH_RECYCLE=0`` turns it off; :func:`recycling_stats` shows what a process's pool
holds and did.

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
import warnings

from ._core import recycle
from ._core.checks import check_choice
from ._core.process import in_worker_process

__all__ = ['MODES', 'SharedMemoryError', 'set_memory', 'get_memory', 'use_memory',
           'use_shared_memory', 'set_recycling', 'get_recycling', 'use_recycling',
           'recycling_unavailable', 'recycling_stats']

#: The memory settings.
MODES = ('shared', 'auto', 'cpu')
_ENV = 'GLUONBATCH_MEMORY'
_RECYCLE_ENV = 'GLUONBATCH_RECYCLE'

_mode = None  # None: read the environment variable
_recycling = None  # None: read the environment variable


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


def set_recycling(enabled):
    """Turn recycled shared memory in worker processes on (the default) or off.

    Overrides ``GLUONBATCH_RECYCLE`` (``1`` or ``0``); worker processes forked afterwards
    inherit it. Off, every batch is a fresh allocation, as in gluoncv. Turning it on warns
    if this MXNet build cannot recycle (:func:`recycling_unavailable`).

    Raises
    ------
    TypeError
        ``enabled`` is not a bool.
    """
    global _recycling
    _recycling = check_choice(enabled, 'the recycling setting', (True, False))
    if enabled and recycle.SELF_CHECK is not None:
        warnings.warn('shared-memory recycling is unavailable: ' + recycle.SELF_CHECK,
                      stacklevel=2)


@contextlib.contextmanager
def use_recycling(enabled):
    """Use recycling setting ``enabled`` inside a ``with`` block, then restore the previous.

    >>> with use_recycling(False):
    ...     get_recycling()
    False
    """
    global _recycling
    previous = _recycling
    set_recycling(enabled)
    try:
        yield
    finally:
        _recycling = previous


def get_recycling():
    """Whether worker processes recycle shared memory: the setting (``set_recycling``'s,
    else ``GLUONBATCH_RECYCLE``'s, else on), unless this MXNet build cannot
    (:func:`recycling_unavailable`).

    >>> get_recycling()
    True
    """
    enabled = _recycling
    if enabled is None:
        enabled = check_choice(os.environ.get(_RECYCLE_ENV, '1'), 'the environment variable '
                               + _RECYCLE_ENV, ('1', '0')) == '1'
    return enabled and recycle.SELF_CHECK is None


def recycling_unavailable():
    """None if this MXNet build counts shared-memory users as recycling relies on, else why
    not: gluonbatch checks at import (and logs the reason as a debug message).

    >>> recycling_unavailable() is None
    True
    """
    return recycle.SELF_CHECK


def recycling_stats():
    """This process's recycled shared memory: a dict of ``segments`` and ``bytes`` held now,
    the ``limit`` of segments kept, and the segments ``allocated``, ``reused`` and
    ``evicted`` so far.

    Only processes that send batches to another (DataLoader workers) recycle, so call it in
    one, in a batchify function, say; in the training process every count is 0.

    >>> recycling_stats()
    {'segments': 0, 'limit': 64, 'bytes': 0, 'reused': 0, 'allocated': 0, 'evicted': 0}
    """
    return recycle.pool().stats()
