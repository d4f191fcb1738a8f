"""OpenCV's float32 resizes of a canvas's crop, computed from the uint8 image.

:func:`~gluonbatch.transforms.crops.resize_crop` hands OpenCV a float32 crop: the image's
pixels converted (minus the fill's shift) and zeros for the fill, a buffer several times
the output that is written, read once and cleared again. :func:`resize` computes
OpenCV's float32 output to the bit from the uint8 image itself (``_canvas_*.c``), each
byte's converted value taken from a table (:func:`byte_values`, made by the very
conversion the crop uses), for three of gluoncv's five interpolations:

- **Nearest**: OpenCV's ``floor(d * scale)`` per side.
- **Area** where both sides shrink: OpenCV's cells, weights and float sums, in its order.
  Where a side grows OpenCV interpolates, and where a scale is a whole number it may sum
  cells otherwise (both scales whole, or one of the two passes a crop with rows of fill
  is averaged in, :func:`~gluonbatch.transforms.crops.resize_crop`): those stay OpenCV's.
- **Lanczos**: OpenCV's sample positions and weights, its sums across each row left to
  right and down the rows as its vector loop and its scalar tail order them.

OpenCV's build hands float32 linear and cubic resizes to Intel's IPP, whose sums are its
own: those stay OpenCV's. The vector loop's width is OpenCV's build's too, so each kind is
checked against ``cv2.resize`` on this machine at import, and a kind that differs keeps
OpenCV's path, as it does while OpenCV's settings differ from those of the import
(:func:`~gluonbatch.transforms.pixels.opencv_state`). :func:`applies` says where;
elsewhere (float32 images, an output the size of its source, which OpenCV copies) OpenCV
resizes the float32 crop, which :func:`part` builds from a uint8 image in one pass.

Examples
--------
>>> import cv2
>>> import numpy as np
>>> src = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
>>> scale = (3 / 7, 2 / 5)
>>> applies(src, (7, 5), scale, AREA)
True
>>> ours = resize(src, (0, 0), (7, 5), scale, AREA, byte_values(None))
>>> theirs = cv2.resize(src.astype(np.float32), None, fx=scale[0], fy=scale[1],
...                     interpolation=cv2.INTER_AREA)
>>> bool((ours == theirs).all())
True
"""
import operator
import sys
from collections.abc import Sequence

import cv2
import numpy as np

from .._core import compiled
from .pixels import (AREA, CHECKED_STATE, INTERPOLATIONS, LANCZOS, NEAREST, opencv_state,
                     shift_into)

__all__ = ['COMPILED', 'LARGEST', 'output_size', 'applies', 'byte_values', 'resize',
           'builds_part', 'part']

#: The float32 lanes of OpenCV's vector loops in its sums down the rows (its x86-64 and
#: ARM builds' baseline: 128 bits).
_LANES = 4

_kernels = compiled.load('gluonbatch.transforms._canvas_resize')
#: Every byte value in each of the three channels: ``(1, 256, 3)`` uint8.
_BYTES = np.ascontiguousarray(np.broadcast_to(np.arange(256, dtype=np.uint8)[None, :, None],
                                              (1, 256, 3)))


def output_size(size: Sequence[int], scale: Sequence[float]) -> tuple[int, int]:
    """The ``(width, height)`` OpenCV gives ``size`` resized by the factors ``scale``:
    each side times its factor, rounded half to even.

    >>> output_size((7, 5), (3 / 7, 0.5))
    (3, 2)
    """
    return round(size[0] * scale[0]), round(size[1] * scale[1])


def _whole(value):
    """Whether OpenCV takes ``value`` (a scale) for a whole number."""
    return abs(value - round(value)) < sys.float_info.epsilon


#: The interpolation codes computed here.
COMPILED = (NEAREST, AREA, LANCZOS)
#: The longest side of a part or an output computed here (OpenCV's own limit, ``INT_MAX``
#: pixels of 3 values, is near).
LARGEST = 2 ** 28
#: Output sizes that the checks at import resize a 17x13 image to, by the factors
#: ``out / in`` as the presets resize: rows of 3 x 5, 6, 7 and 8 values (every length
#: modulo the vector loops' width), growing and shrinking (area: shrinking, as OpenCV
#: averages only then).
_PROBES = {NEAREST: ((5, 9), (6, 30), (7, 4), (40, 11)),
           AREA: ((5, 9), (6, 11), (7, 4), (15, 7)),
           LANCZOS: ((5, 9), (6, 30), (7, 4), (40, 11), (16, 12))}


def _sums_as_opencv(interp):
    """Whether the compiled resize with the interpolation code ``interp`` gives
    ``cv2.resize``'s bits here (False where OpenCV refuses a probe)."""
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (13, 17, 3), dtype=np.uint8)
    values = byte_values(None)
    try:
        for width, height in _PROBES[interp]:
            scale = (width / 17, height / 13)
            want = cv2.resize(src.astype(np.float32), None, fx=scale[0], fy=scale[1],
                              interpolation=INTERPOLATIONS[interp])
            got = np.empty_like(want)
            _kernels.resize(interp, _LANES, src, values, 0, 0, 17, 13, *scale, got)
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                return False
    except Exception:  # keep OpenCV's path
        return False
    return True


def byte_values(shift: Sequence[float] | None) -> np.ndarray:
    """Per channel, the float32 value a crop stores for each byte, ``byte - shift``
    (:func:`~gluonbatch.transforms.pixels.shift_into`, the crop's own conversion):
    ``(3, 256)``.

    >>> byte_values(None)[:, 255]
    array([255., 255., 255.], dtype=float32)
    """
    values = np.empty((1, 256, 3), np.float32)
    shift_into(values, _BYTES, shift)
    return np.ascontiguousarray(values[0].T)


#: The interpolation codes whose compiled resize gives OpenCV's bits here.
_MATCHING = frozenset(interp for interp in COMPILED
                      if _kernels is not None and _sums_as_opencv(interp))


def applies(src: np.ndarray, size: Sequence[int], scale: Sequence[float], interp: int) -> bool:
    """Whether :func:`resize` computes OpenCV's resize of ``size = (width, height)`` by the
    factors ``scale = (fx, fy)`` with the interpolation code ``interp`` from the image
    ``src``: ``interp`` is one of :data:`COMPILED`, built and found to give OpenCV's bits
    at import, OpenCV's settings are those of the import, ``src`` is uint8 HWC with 3
    channels, the sides are at most :data:`LARGEST` and the output has other sizes than
    the source (OpenCV copies otherwise), at least 1 each; for area, both sides shrink
    (OpenCV's scales ``1 / f`` are at least 1) and neither scale is a whole number."""
    if (interp not in _MATCHING or src.dtype != np.uint8 or src.ndim != 3
            or src.shape[2] != 3 or max(size) > LARGEST or opencv_state() != CHECKED_STATE):
        return False
    out = output_size(size, scale)
    if min(out) < 1 or max(out) > LARGEST or tuple(out) == (size[0], size[1]):
        return False
    if interp != AREA:
        return True
    scales = (1.0 / scale[0], 1.0 / scale[1])
    return (min(scales) >= 1 and not any(_whole(s) for s in scales)
            and all(o < s for o, s in zip(out, size)))


def resize(src: np.ndarray, offset: Sequence[int], size: Sequence[int],
           scale: Sequence[float], interp: int, values: np.ndarray,
           out: np.ndarray | None = None) -> np.ndarray:
    """The resize by ``scale = (fx, fy)``, with the interpolation code ``interp`` (one of
    :data:`COMPILED`), of the ``size = (width, height)`` part, from ``(0, 0)``, of a canvas
    holding ``src`` (uint8 HWC, any strides) at ``offset = (x, y)``: ``values[c, byte]``
    where the image shows, ``0`` elsewhere. Bit for bit what ``cv2.resize`` gives that
    canvas as float32: a new array, or written into ``out`` (float32 of the output's
    shape, :func:`output_size`, whose rows are each contiguous and lie in order, as in a
    part of a larger image: ``big[top:bottom, left:right]``) and returned.

    Raises
    ------
    ValueError
        Where :func:`applies` is False (OpenCV computes otherwise, or it was not built), or
        ``out``'s shape or layout is not as above (a read-only ``out``: ``BufferError``).
    TypeError
        For offsets or sizes that are not integers, or ``values`` not ``(3, 256)``
        float32.

    Examples
    --------
    >>> big = np.full((4, 8, 3), -1, np.float32)
    >>> part = resize(np.full((6, 6, 3), 9, np.uint8), (0, 0), (6, 6), (0.5, 0.5), NEAREST,
    ...               byte_values(None), out=big[1:4, 2:5])
    >>> np.shares_memory(part, big)
    True
    >>> big[..., 0]
    array([[-1., -1., -1., -1., -1., -1., -1., -1.],
           [-1., -1.,  9.,  9.,  9., -1., -1., -1.],
           [-1., -1.,  9.,  9.,  9., -1., -1., -1.],
           [-1., -1.,  9.,  9.,  9., -1., -1., -1.]], dtype=float32)
    """
    if _kernels is None or not applies(src, size, scale, interp):
        raise ValueError('resize computes OpenCV\'s resize of %s by %s with interpolation %r '
                         'only where applies() is True' % (tuple(size), tuple(scale), interp))
    x, y, width, height = (operator.index(v) for v in (*offset, *size))
    out_width, out_height = output_size(size, scale)
    if out is None:
        out = np.empty((out_height, out_width, 3), np.float32)
    elif out.shape != (out_height, out_width, 3) or out.dtype != np.float32:
        raise ValueError('out must be float32 of shape %s, got %s %s'
                         % ((out_height, out_width, 3), out.dtype, out.shape))
    _kernels.resize(interp, _LANES, src, values, x, y, width, height, float(scale[0]),
                    float(scale[1]), out)
    return out


def builds_part(src: np.ndarray, size: Sequence[int]) -> bool:
    """Whether :func:`part` builds a part of ``size = (width, height)`` from ``src``: it
    was built, ``src`` is uint8 HWC with 3 channels, and the sides are at most
    :data:`LARGEST`."""
    return (_kernels is not None and src.dtype == np.uint8 and src.ndim == 3
            and src.shape[2] == 3 and max(*size, *src.shape[:2]) <= LARGEST)


def part(src: np.ndarray, offset: Sequence[int], values: np.ndarray, out: np.ndarray) -> None:
    """The part, of ``out``'s size from ``(0, 0)``, of a canvas holding ``src`` (uint8 HWC,
    any strides) at ``offset = (x, y)``, written into ``out`` (C-contiguous float32 HWC):
    ``values[c, byte]`` where the image shows, ``0`` elsewhere. The float32 crop that the
    resizes left to OpenCV read, in one pass (mirrored images included).

    Raises
    ------
    ValueError
        Where :func:`builds_part` is False.

    Examples
    --------
    >>> out = np.empty((2, 3, 3), np.float32)
    >>> part(np.full((1, 1, 3), 7, np.uint8), (1, 1), byte_values(None), out)
    >>> out[..., 0]
    array([[0., 0., 0.],
           [0., 7., 0.]], dtype=float32)
    """
    if _kernels is None or not builds_part(src, out.shape[1::-1]):
        raise ValueError('part builds the float32 values of a uint8 HWC image with 3 '
                         'channels and sides of at most 2**28, when it was built')
    x, y = (operator.index(v) for v in offset)
    _kernels.part(src, values, x, y, out)
