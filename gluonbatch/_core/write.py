"""Writing samples into their slots of an output view: one write per output byte.

Each sample is copied once into the leading corner of its slot; only the part of the slot
the sample does not cover is filled with the pad value. Large batches are copied by a few
threads (numpy releases the GIL while copying), which also spreads the page faults of
fresh shared memory over the cores; a DataLoader worker writes on its own thread instead
(:func:`write_on_calling_thread`). A :class:`~gluonbatch._core.deferred.Deferred` sample
is computed straight into its slot.
"""
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .deferred import Deferred
from .process import ProcessLocal

__all__ = ['write_slot', 'write_batch', 'write_slots', 'write_on_calling_thread']

# Below this many output bytes, thread hand-off costs more than it saves.
PARALLEL_MIN_BYTES = 4 << 20
# Below this, samples padded only on their first axis (box labels) take a short path
# whose cost is one fill and a slice assignment per sample, and no region bookkeeping.
SMALL_BATCH_BYTES = 1 << 20
_MAX_THREADS = 4
_THREADS = max(1, min(_MAX_THREADS, os.cpu_count() or 1))

# A forked DataLoader worker inherits the pool object but none of its threads: one pool
# per process.
_POOL = ProcessLocal(lambda: ThreadPoolExecutor(_THREADS, thread_name_prefix='gluonbatch-copy'))
# Set in a DataLoader worker: no copy threads there.
_ON_CALLING_THREAD = False


def write_on_calling_thread(enabled: bool = True) -> bool:
    """Write every batch of this process on the calling thread from now on (or, with
    ``enabled=False``, with copy threads again); returns the setting before.

    A DataLoader worker does, as its OpenCV and BLAS run on one thread (see
    :mod:`gluonbatch._core.threads`): the workers are the parallelism, and handing a
    batch's writes to copy threads costs CPU the other workers could use (one process
    writing SSD300 batches of deferred images: 1.76 ms of CPU an image with them, 1.66
    without).

    >>> before = write_on_calling_thread()
    >>> write_on_calling_thread(before)
    True
    """
    global _ON_CALLING_THREAD
    before, _ON_CALLING_THREAD = _ON_CALLING_THREAD, bool(enabled)
    return before


def padding_regions(sample_shape, slot_shape):
    """Disjoint index tuples that together cover the slot outside the sample's corner.

    >>> padding_regions((2, 3), (4, 5))
    [(slice(2, 4, None), slice(None, None, None)), (slice(0, 2, None), slice(3, 5, None))]
    """
    regions = []
    for ax, (have, want) in enumerate(zip(sample_shape, slot_shape)):
        if have < want:
            regions.append(tuple(slice(0, d) for d in sample_shape[:ax])
                           + (slice(have, want),)
                           + (slice(None),) * (len(slot_shape) - ax - 1))
    return regions


def write_slot(slot, sample, pad_val=0):
    """Copy ``sample`` into the corner of ``slot`` and fill the rest with ``pad_val``.

    >>> import numpy as np
    >>> slot = np.empty((2, 3), 'int64')
    >>> write_slot(slot, np.array([[1], [2]]), pad_val=-1)
    >>> slot
    array([[ 1, -1, -1],
           [ 2, -1, -1]])
    """
    padded = sample.shape != slot.shape
    corner = slot[tuple(slice(0, d) for d in sample.shape)] if padded else slot
    if isinstance(sample, Deferred) and sample.dtype == slot.dtype:
        sample.write(corner)
    else:
        corner[...] = sample
    if not padded:
        return
    for region in padding_regions(sample.shape, slot.shape):
        slot[region] = pad_val


def _write_rows(out, samples, pad_val):
    """``write_batch`` for samples that differ only in their first axis (box labels).

    The batch is small: where a sample is short, filling all of it with the pad value
    first, then each sample's rows, is one numpy call per sample instead of two, which
    costs more than the bytes written twice. (The pad value is checked before: one that
    the dtype cannot hold never comes here, where ``fill`` would cast it silently.)"""
    longest = out.shape[1]
    if any(len(sample) < longest for sample in samples):
        out.fill(pad_val)
    for index, sample in enumerate(samples):
        out[index, :len(sample)] = sample


def write_batch(out, samples, pad_val=0):
    """Write ``samples[i]`` into ``out[i]`` for every i, in parallel when the batch is large.

    ``out[i, ...]`` (not ``out[i]``) keeps 0-d slots writable views instead of scalars.

    >>> import numpy as np
    >>> out = np.empty((2, 2), 'float32')
    >>> write_batch(out, [np.array([1.]), np.array([2., 3.])], pad_val=0)
    >>> out
    array([[1., 0.],
           [2., 3.]], dtype=float32)
    """
    if out.nbytes < SMALL_BATCH_BYTES and out.ndim > 1 and all(
            sample.shape[1:] == out.shape[2:]
            and (type(sample) is np.ndarray or not isinstance(sample, Deferred))
            for sample in samples):
        _write_rows(out, samples, pad_val)
        return
    write_slots([(out[index, ...], sample, pad_val) for index, sample in enumerate(samples)],
                out.nbytes)


def write_slots(jobs, nbytes):
    """Run :func:`write_slot` for every ``(slot, sample, pad_val)`` job.

    ``nbytes`` (the bytes the jobs write) decides whether threads are worth it; each thread
    takes a contiguous run of jobs, so it writes one region of memory.

    >>> import numpy as np
    >>> a, b = np.empty(3, 'int32'), np.empty(2, 'int32')
    >>> write_slots([(a, np.array([7]), -1), (b, np.array([8, 9]), 0)], a.nbytes + b.nbytes)
    >>> a, b
    (array([ 7, -1, -1], dtype=int32), array([8, 9], dtype=int32))
    """
    if nbytes < PARALLEL_MIN_BYTES or _THREADS == 1 or _ON_CALLING_THREAD or len(jobs) == 1:
        for slot, sample, pad_val in jobs:
            write_slot(slot, sample, pad_val)
        return
    chunk = -(-len(jobs) // _THREADS)

    def write_run(start):
        for slot, sample, pad_val in jobs[start:start + chunk]:
            write_slot(slot, sample, pad_val)

    futures = [_POOL.get().submit(write_run, start) for start in range(0, len(jobs), chunk)]
    for future in futures:
        future.result()
