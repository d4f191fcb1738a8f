"""The memory settings: where batches live (``set_memory``) and whether worker processes
recycle shared memory (``set_recycling``), with the state they set.

:mod:`gluonbatch.memory` is their public front, and its documentation says what each
setting does. The allocator (:mod:`.alloc`) reads them here.

Examples
--------
>>> with use_memory('cpu'):
...     get_memory(), use_shared_memory()
('cpu', False)
"""
import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Literal, TypeAlias

from . import recycle
from .checks import check_choice
from .process import in_worker_process

__all__ = ['MODES', 'set_memory', 'get_memory', 'use_memory', 'use_shared_memory',
           'set_recycling', 'get_recycling', 'use_recycling', 'recycling_unavailable',
           'recycling_stats']

#: The memory settings.
MODES = ('shared', 'auto', 'cpu')
#: One of :data:`MODES`.
MemoryMode: TypeAlias = Literal['shared', 'auto', 'cpu']
_ENV = 'GLUONBATCH_MEMORY'
_RECYCLE_ENV = 'GLUONBATCH_RECYCLE'

_mode: MemoryMode | None = None  # None: read the environment variable
_recycling: bool | None = None  # None: read the environment variable


def set_memory(mode: MemoryMode) -> None:
    """Choose where batches live: ``'shared'``, ``'auto'`` or ``'cpu'`` (see module doc).

    Overrides ``GLUONBATCH_MEMORY``; worker processes forked afterwards inherit it.
    """
    global _mode
    _mode = check_choice(mode, 'the memory setting', MODES)


@contextlib.contextmanager
def use_memory(mode: MemoryMode) -> Iterator[None]:
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


def get_memory() -> MemoryMode:
    """The memory setting in force: ``set_memory``'s, else ``GLUONBATCH_MEMORY``'s, else
    ``'shared'``.

    >>> get_memory() in MODES
    True
    """
    if _mode is not None:
        return _mode
    return check_choice(os.environ.get(_ENV, 'shared'), 'the environment variable ' + _ENV,
                        MODES)


def use_shared_memory() -> bool:
    """Whether a batch allocated now goes to ``cpu_shared`` memory."""
    mode = get_memory()
    if mode == 'auto':
        return in_worker_process()
    return mode == 'shared'


def set_recycling(enabled: bool) -> None:
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
    if enabled and recycle.unavailable() is not None:
        warnings.warn('shared-memory recycling is unavailable: ' + recycle.unavailable(),
                      stacklevel=2)


@contextlib.contextmanager
def use_recycling(enabled: bool) -> Iterator[None]:
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


def get_recycling() -> bool:
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
    return enabled and recycle.unavailable() is None


def recycling_unavailable() -> str | None:
    """None if this MXNet build counts shared-memory users as recycling relies on, else why
    not: gluonbatch checks once, when first needed (and logs the reason as a debug message).

    >>> recycling_unavailable() is None
    True
    """
    return recycle.unavailable()


def recycling_stats() -> dict[str, int]:
    """This process's recycled shared memory: a dict of ``segments`` and ``bytes`` held now,
    the ``limit`` of segments kept, and the segments ``allocated``, ``reused`` and
    ``evicted`` so far.

    Only processes that send batches to another (DataLoader workers) recycle, so call it in
    one, in a batchify function, say; in the training process every count is 0.

    >>> recycling_stats()
    {'segments': 0, 'limit': 64, 'bytes': 0, 'reused': 0, 'allocated': 0, 'evicted': 0}
    """
    return recycle.pool().stats()
