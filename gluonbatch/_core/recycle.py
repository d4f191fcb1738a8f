"""Recycled shared memory: a DataLoader worker writes each batch into pages it already owns.

A fresh ``cpu_shared`` array costs a page fault and a zeroed page for every 4 KiB, about
nine times the copy that fills it. :class:`SegmentPool` keeps the segments of the batches a
process sent and hands one out again once nobody else uses it. Why a segment is never
reused while in use (MXNet's count shared by all processes and this process's holders, read
by :mod:`~gluonbatch._core.native`), how segments are sized and dropped, and which
processes recycle is told in the docs' shared-memory page (``docs/memory.rst``, "Recycled
shared memory in workers"). :func:`self_check` runs once, when first needed
(:func:`unavailable`), and recycling stays off if MXNet's counts do not behave as that page
says (another MXNet build).

Examples
--------
>>> import numpy as np, mxnet as mx
>>> pool = SegmentPool()
>>> segment = mx.nd.empty((capacity_for(1000),), ctx=SHARED_CONTEXT, dtype='float32')
>>> batch = pool.add(segment, (10, 100))
>>> batch.shape, pool.take((10, 100), np.dtype('float32')) is None  # in use: not taken
((10, 100), True)
>>> del batch
>>> pool.take((10, 100), np.dtype('float32')).shape  # let go of: taken again
(10, 100)
"""
import logging
import os
import threading

import mxnet as mx
import numpy as np

from .native import SHARED_CONTEXT, holders, numpy_view, shared_count
from .process import ProcessLocal

__all__ = ['MIN_BYTES', 'MAX_SEGMENTS', 'SegmentPool', 'capacity_for',
           'pool', 'self_check', 'unavailable']

#: Outputs smaller than this are allocated fresh: their page faults cost little.
MIN_BYTES = 64 << 10
#: Segments a process keeps at most: batches in flight times outputs per batch, with room.
MAX_SEGMENTS = 64

_LOG = logging.getLogger('gluonbatch')


def capacity_for(size):
    """Elements to allocate for a request of ``size``: rounded up to one of eight steps per
    doubling, so batches whose sizes vary a little share segments (at most 1/8 unused).

    >>> capacity_for(1000), capacity_for(1024), capacity_for(1025)
    (1024, 1024, 1152)
    """
    if size <= 8:
        return size
    step = 1 << (size.bit_length() - 4)
    return -(-size // step) * step


class _Segment:
    __slots__ = ('array', 'dtype', 'capacity', 'baseline')

    def __init__(self, array):
        self.array = array
        self.dtype = np.dtype(array.dtype)
        self.capacity = array.size
        self.baseline = shared_count(array)  # the exports made so far are the pool's own

    @property
    def nbytes(self):
        return self.capacity * self.dtype.itemsize

    def is_free(self):
        # no array of this process but the pool's own holds it (a batch, a view, a pending
        # engine operation would), and no other process maps it or has yet to receive it
        return holders(self.array) == 1 and shared_count(self.array) == self.baseline

    def view(self, shape, size):
        # at offset 0: the receiving process maps a segment from its start
        return self.array._slice(0, size).reshape(shape)


class SegmentPool:
    """The shared-memory segments of one process, least recently used first.

    Parameters
    ----------
    limit : int, default MAX_SEGMENTS
        Segments kept at most.
    """

    def __init__(self, limit=MAX_SEGMENTS):
        self._limit = limit
        self._segments = []
        self._lock = threading.Lock()
        self._counters = dict(reused=0, allocated=0, evicted=0)
        #: Whether this process has sent arrays to another one (set by the reducer).
        self.sends = False

    def take(self, shape, dtype):
        """A view of shape ``shape`` on the smallest free segment of ``dtype`` that holds it
        and at most twice its size, or None if there is none."""
        size = int(np.prod(shape))
        with self._lock:
            best = None
            for segment in self._segments:
                if (segment.dtype == dtype and size <= segment.capacity <= 2 * size
                        and (best is None or segment.capacity < best.capacity)
                        and segment.is_free()):
                    best = segment
            if best is None:
                return None
            self._segments.remove(best)
            self._segments.append(best)
            self._counters['reused'] += 1
            return best.view(shape, size)

    def add(self, array, shape):
        """Keep the fresh, reserved 1-d ``array`` and return a view of shape ``shape`` on it.

        Only exports made before this call are the pool's; every later one is a user's.
        Then the pool shrinks: beyond its limit the least recently used segments go, free or
        not (a batch sent but never received keeps its segment busy for good), and free
        segments go, least recently used first, while they hold more bytes than the busy
        ones (batches of sizes not seen again).
        """
        segment = _Segment(array)
        view = segment.view(shape, int(np.prod(shape)))  # holds it: busy, never dropped below
        with self._lock:
            self._segments.append(segment)
            self._counters['allocated'] += 1
            while len(self._segments) > self._limit:
                self._drop([self._segments[0]])
            free = [s for s in self._segments if s.is_free()]
            spare = sum(s.nbytes for s in free)
            busy = sum(s.nbytes for s in self._segments) - spare
            dropped = []
            for idle in free:
                if spare <= busy:
                    break
                dropped.append(idle)
                spare -= idle.nbytes
            self._drop(dropped)
        return view

    def release_idle(self):
        """Drop every free segment, so its pages go back to ``/dev/shm``; how many."""
        with self._lock:
            free = [segment for segment in self._segments if segment.is_free()]
            self._drop(free)
        return len(free)

    def _drop(self, segments):
        dropped = set(map(id, segments))
        self._segments = [s for s in self._segments if id(s) not in dropped]
        self._counters['evicted'] += len(dropped)

    def stats(self):
        """Counts of this pool: ``segments`` and their ``bytes`` now, at most ``limit``
        segments; ``allocated``, ``reused`` and ``evicted`` since it was made."""
        with self._lock:
            return dict(segments=len(self._segments), limit=self._limit,
                        bytes=sum(segment.nbytes for segment in self._segments),
                        **self._counters)


# Per process; a forked child keeps its parent's segments unfreed, since freeing them would
# lower counts the parent relies on.
_POOLS = ProcessLocal(SegmentPool, keep_inherited=True)


def pool():
    """This process's :class:`SegmentPool`."""
    return _POOLS.get()


def self_check():
    """None if MXNet's shared-memory counts behave as recycling relies on, else why not.

    Allocates a small segment, exports it and maps it as a receiving process would, makes
    and drops a view, frees the mapping, and compares both counts with what they must be.

    >>> self_check() is None
    True
    """
    try:
        segment = mx.nd.empty((4096,), ctx=SHARED_CONTEXT, dtype='uint8')
        counts = [shared_count(segment)]
        pid, fd, shape, dtype = segment._to_shared_mem()
        counts.append(shared_count(segment))
        mapping = mx.nd.NDArray(mx.nd.ndarray._new_from_shared_mem(
            pid, os.dup(fd), shape, dtype))  # the mapping owns (and closes) its descriptor
        counts.append(shared_count(segment))
        numpy_view(mapping, readonly=False)[:] = 7
        same_memory = bool((numpy_view(segment, readonly=True) == 7).all())
        view = segment[0:16]
        held = [holders(segment)]
        del view
        held.append(holders(segment))
        del mapping
        mx.nd.waitall()  # MXNet frees the mapping on its engine
        counts.append(shared_count(segment))
    except Exception as err:  # no /dev/shm, another layout: anything means "do not rely"
        return 'the check failed: %s: %s' % (type(err).__name__, err)
    if counts != [1, 2, 2, 1]:
        return ('the shared count went %s (created, exported, mapped, mapping freed); '
                'expected [1, 2, 2, 1]' % counts)
    if held != [2, 1]:
        return 'the holders went %s (with a view, without); expected [2, 1]' % held
    if not same_memory:
        return 'a mapping of the exported segment does not show its memory'
    return None


_UNCHECKED = object()
_unavailable = _UNCHECKED  # self_check's answer once asked; children forked later inherit it


def unavailable():
    """Why recycling is off for this MXNet build, or None: :func:`self_check`, run the
    first time it is asked for (the reason is logged as a debug message).

    >>> unavailable() is None
    True
    """
    global _unavailable
    if _unavailable is _UNCHECKED:
        # two threads asking at once both check, harmlessly: the answer is the same
        reason = self_check()
        if reason is not None:
            _LOG.debug('gluonbatch: shared-memory recycling is off: %s', reason)
        _unavailable = reason
    return _unavailable
