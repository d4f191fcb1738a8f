"""glibc's heap settings for a process: how large a freed block may be before it goes back
to the system, and how large an allocation may be served from the heap.

glibc adapts both itself unless the process was started with ``MALLOC_TRIM_THRESHOLD_`` or
``MALLOC_MMAP_THRESHOLD_``; :func:`heap_for_large_arrays` steps around fixed settings for
a block of code, and :func:`keep_freed_heap` makes a DataLoader worker keep what its
batches free for the next batch.
"""
import contextlib
import ctypes
import os
import threading

from .process import ProcessLocal

__all__ = ['heap_for_large_arrays', 'keep_freed_heap', 'KEPT_BYTES']

# glibc's mallopt parameters, and the environment variables that set them at start
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_FIXED = {_M_TRIM_THRESHOLD: 'MALLOC_TRIM_THRESHOLD_', _M_MMAP_THRESHOLD: 'MALLOC_MMAP_THRESHOLD_'}
_GLIBC_DEFAULT = 128 * 1024
#: glibc's largest mmap threshold on a 64-bit system: allocations up to it can be heap blocks
_MMAP_MAX = 32 << 20
#: The free memory a worker's heap keeps at its top before it returns any to the system.
KEPT_BYTES = 512 << 20


class _HeapUsers:
    """The threads inside :func:`heap_for_large_arrays`, counted under a lock: per
    process (a forked child starts with none, and with a lock no thread holds)."""

    def __init__(self):
        self.lock, self.count = threading.Lock(), 0


_HEAP_USERS = ProcessLocal(_HeapUsers)


def _fixed():
    """The settings this process was started with, by mallopt parameter (None: unset)."""
    return {option: os.environ.get(name) for option, name in _FIXED.items()}


def _libc():
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, 'mallopt') and hasattr(libc, 'malloc_trim') else None
    except OSError:
        return None


@contextlib.contextmanager
def heap_for_large_arrays(size=256 << 20):
    """Within this block, glibc serves allocations of up to ``size`` bytes from its heap and
    keeps what is freed, where the process was started with fixed malloc thresholds.

    ``distributed``'s nanny starts every worker with ``MALLOC_TRIM_THRESHOLD_=65536``
    (``distributed.nanny.pre-spawn-environ``), to return memory to the system early. That
    also fixes glibc's mmap threshold at 128 KiB: every larger numpy temporary is then a
    fresh ``mmap``, its pages faulted in one by one, and unmapped when freed, which made
    resharding on a worker a fifth slower. A process started without those variables
    adapts its thresholds itself and is left alone. On exit the thresholds are the
    environment's again and the heap is trimmed. Threads share one setting: it holds while
    any of them is inside the block.

    Examples
    --------
    >>> with heap_for_large_arrays():
    ...     total = sum(bytearray(1 << 20)[0] for _ in range(3))
    >>> total
    0
    """
    fixed = _fixed()
    libc = _libc() if any(value is not None for value in fixed.values()) else None
    if libc is None:
        yield
        return
    users = _HEAP_USERS.get()
    with users.lock:
        users.count += 1
        if users.count == 1:
            libc.mallopt(_M_MMAP_THRESHOLD, size)
            libc.mallopt(_M_TRIM_THRESHOLD, size)
    try:
        yield
    finally:
        with users.lock:
            users.count -= 1
            if not users.count:
                for option, value in fixed.items():
                    try:
                        restored = int(value) if value is not None else _GLIBC_DEFAULT
                    except ValueError:
                        restored = _GLIBC_DEFAULT
                    libc.mallopt(option, restored)
                libc.malloc_trim(0)


def _keep():
    """Set the kept heap in this process, unless its start fixed the settings; whether
    set."""
    if any(value is not None for value in _fixed().values()):
        return False
    libc = _libc()
    if libc is None:
        return False
    libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_MAX)
    libc.mallopt(_M_TRIM_THRESHOLD, KEPT_BYTES)
    return True


_KEPT = ProcessLocal(_keep)


def keep_freed_heap():
    """From now on, this process's heap keeps what it frees (up to :data:`KEPT_BYTES` at its
    top) and serves arrays of up to 32 MiB from it; once per process. Whether the settings
    are this process's now.

    A DataLoader worker frees its batch's intermediate images (tens of MB) together when
    the batch is done. glibc's own thresholds then hand the memory back to the system, and
    the next batch faults every page of it in again, zeroed: about 170 page faults and a
    tenth of the CPU time of a YOLOv3-416 sample from a JPEG file. Kept, the next batch
    reuses it. A process started with ``MALLOC_TRIM_THRESHOLD_`` or
    ``MALLOC_MMAP_THRESHOLD_`` keeps its settings; so does one without glibc.
    """
    return _KEPT.get()
