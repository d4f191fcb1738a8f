"""Per-thread scratch arrays that the presets reuse from sample to sample.

A preset's intermediate images (a warped image, its float32 copy, a colour-mapped image
before it is split into planes, the crop of a canvas) live only during one call, and fresh
pages for them cost more than the arithmetic done on them (up to 3x a whole preset). So
each thread keeps its own arrays and hands them out again:

- :func:`empty` leases a named array, any shape and dtype, of arbitrary content (like
  :func:`numpy.empty`);
- :func:`zeros` leases an all-zero array carved from one buffer, which the caller leaves
  all zeros again (zeroing only what it wrote: far less than the whole).

Both are context managers, and the array is the caller's only inside the ``with`` block.
They are safe to use from several threads at once (each has its own arrays); nested (an
array leased in this thread is never handed out again before its block ends: a nested
request gets a fresh array); and with varying sizes (a name's buffer grows to at most
:data:`MAX_BYTES`, and at most :data:`MAX_BUFFERS` names are kept per thread). A zero
buffer whose block ends with an exception is dropped, not trusted to be zero.

Examples
--------
>>> with empty('example', (2, 3), np.float32) as a:
...     a[...] = 1
...     with empty('example', (2, 3), np.float32) as b:  # nested: another array
...         np.shares_memory(a, b)
False
>>> with zeros((2, 2)) as z:
...     z[0, 0] = 5.0   # written ...
...     z[0, 0] = 0.0   # ... so zeroed again before the block ends
>>> with zeros((2, 2)) as z:
...     z.tolist()
[[0.0, 0.0], [0.0, 0.0]]
"""
import contextlib
import math
import threading

import numpy as np

__all__ = ['MAX_BYTES', 'MAX_BUFFERS', 'empty', 'zeros']

#: Largest array (bytes) served from a thread's kept buffers; larger ones are fresh.
MAX_BYTES = 32 << 20
#: Most named buffers kept per thread.
MAX_BUFFERS = 12


class _Local(threading.local):
    """One thread's arrays: a byte buffer per name, the names leased now, and the all-zero
    byte buffer. Each buffer grows to the largest array taken from it, then stays: shapes
    that change from sample to sample (crops, random-shape training) reuse it."""

    def __init__(self):
        super().__init__()
        self.named = {}
        self.leased = set()
        self.zeros = np.zeros(0, np.uint8)
        self.zeros_leased = False


_LOCAL = _Local()


def _nbytes(shape, dtype):
    return math.prod(shape) * dtype.itemsize  # Python ints: no overflow, no numpy call


def _carve(buf, shape, dtype, nbytes):
    """The first ``nbytes`` of the byte buffer ``buf`` as a C-contiguous array."""
    return buf[:nbytes].view(dtype).reshape(shape)


@contextlib.contextmanager
def empty(name, shape, dtype=np.float32):
    """Lease this thread's array ``name`` as ``shape`` and ``dtype``; its content is
    arbitrary (what an earlier lease left).

    Parameters
    ----------
    name : str
        What the array is for: a caller needing two arrays at once uses two names.
    shape : tuple of int
    dtype : numpy dtype, default float32

    Yields
    ------
    numpy.ndarray
        C-contiguous: a view of the thread's buffer ``name``, or a fresh array (nested use
        of ``name``, over :data:`MAX_BYTES`).

    Examples
    --------
    >>> with empty('doc', (4, 5), np.float32) as first:
    ...     pass
    >>> with empty('doc', (3,), np.uint8) as second:   # the same memory, reshaped
    ...     np.shares_memory(first, second)
    True
    """
    shape = tuple(shape)
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    local = _LOCAL
    if name in local.leased or nbytes > MAX_BYTES:
        yield np.empty(shape, dtype)
        return
    buf = local.named.get(name)
    if buf is None or buf.size < nbytes:
        if buf is None and len(local.named) >= MAX_BUFFERS:  # keep only the ones in use
            local.named = {k: v for k, v in local.named.items() if k in local.leased}
        buf = local.named[name] = np.empty(nbytes, np.uint8)
    local.leased.add(name)
    try:
        yield _carve(buf, shape, dtype, nbytes)
    finally:
        local.leased.discard(name)


@contextlib.contextmanager
def zeros(shape, dtype=np.float32):
    """Lease an all-zero array of ``shape`` and ``dtype`` from this thread's zero buffer.

    The caller must leave the array all zeros when the block ends normally (setting back
    to ``0`` whatever it wrote); if the block raises, the buffer is dropped instead.

    Parameters
    ----------
    shape : tuple of int
    dtype : numpy dtype, default float32
        One whose all-zero bytes mean zero (numbers).

    Yields
    ------
    numpy.ndarray
        C-contiguous and all zeros: a view of the thread's buffer, or a fresh array
        (nested use, over :data:`MAX_BYTES`).

    Examples
    --------
    >>> with zeros((2, 3), np.int32) as z:
    ...     z.dtype, z.any()
    (dtype('int32'), False)
    """
    shape = tuple(shape)
    dtype = np.dtype(dtype)
    nbytes = _nbytes(shape, dtype)
    local = _LOCAL
    if local.zeros_leased or nbytes > MAX_BYTES:
        yield np.zeros(shape, dtype)
        return
    if local.zeros.size < nbytes:
        local.zeros = np.zeros(nbytes, np.uint8)
    buf = local.zeros
    local.zeros_leased = True
    try:
        yield _carve(buf, shape, dtype, nbytes)
    except BaseException:
        # the caller may not have restored the zeros: never serve this buffer again
        local.zeros = np.zeros(0, np.uint8)
        raise
    finally:
        local.zeros_leased = False
