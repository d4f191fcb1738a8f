"""OpenCV's area resize of a canvas's crop, read straight from the uint8 image.

Where both sides shrink, OpenCV averages each output's cell of source pixels (INTER_AREA).
:func:`~gluonbatch.transforms.crops.resize_crop` hands it a float32 crop: the image's
pixels converted (minus the fill's shift) and zeros for the fill, a buffer several times
the output that is written, read once and cleared again. :func:`resize` computes the same
float32 output, to the bit, from the uint8 image itself (``_area.c``): the same cells and
weights, the same float sums in the same order, with each byte's converted value taken from
a table (:func:`byte_values`, made by the very conversion the crop uses) and the fill's
zeros skipped. It applies (:func:`applies`) where OpenCV takes its general area path: both
sides shrink, and neither scale is a whole number (OpenCV's exact-multiple path sums
otherwise).

Examples
--------
>>> import cv2
>>> import numpy as np
>>> src = np.arange(5 * 7 * 3, dtype=np.uint8).reshape(5, 7, 3)
>>> scale = (3 / 7, 2 / 5)
>>> applies(src, (7, 5), scale)
True
>>> ours = resize(src, (0, 0), (7, 5), scale, byte_values(None))
>>> theirs = cv2.resize(src.astype(np.float32), None, fx=scale[0], fy=scale[1],
...                     interpolation=cv2.INTER_AREA)
>>> bool((ours == theirs).all())
True
"""
import sys
from collections.abc import Callable, Sequence

import numpy as np

from .._core import compiled

__all__ = ['applies', 'output_size', 'byte_values', 'resize']

_area = compiled.load('gluonbatch.transforms._area')
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


def applies(src: np.ndarray, size: Sequence[int], scale: Sequence[float]) -> bool:
    """Whether :func:`resize` computes OpenCV's area resize of ``size = (width, height)``
    by the factors ``scale = (fx, fy)`` from the image ``src``: it was built, ``src`` is
    uint8, both sides shrink (OpenCV's scales ``1 / f`` are at least 1) to other sizes of
    at least 1, and neither scale is a whole number."""
    if _area is None or src.dtype != np.uint8:
        return False
    scales = (1.0 / scale[0], 1.0 / scale[1])
    out = output_size(size, scale)
    return (min(scales) >= 1 and not any(_whole(s) for s in scales)
            and all(1 <= o < s for o, s in zip(out, size)))


def byte_values(shift: Sequence[float] | None,
                convert: Callable[..., None] | None = None) -> np.ndarray:
    """Per channel, the float32 value a crop stores for each byte: ``(3, 256)``.

    ``convert(target, block, shift)`` writes a uint8 block's float32 crop values into
    ``target``, as the crop is made (an element-wise conversion; by default the byte's
    value, which is what the crop stores where ``shift`` is ``None``).

    >>> byte_values(None)[:, 255]
    array([255., 255., 255.], dtype=float32)
    """
    values = np.empty((1, 256, 3), np.float32)
    if convert is None:
        np.copyto(values, _BYTES, casting='unsafe')
    else:
        convert(values, _BYTES, shift)
    return np.ascontiguousarray(values[0].T)


def resize(src: np.ndarray, offset: Sequence[int], size: Sequence[int],
           scale: Sequence[float], values: np.ndarray) -> np.ndarray:
    """The area resize by ``scale = (fx, fy)`` of the ``size = (width, height)`` part, from
    ``(0, 0)``, of a canvas holding ``src`` (uint8 HWC, any strides) at ``offset = (x,
    y)``: ``values[c, byte]`` where the image shows, ``0`` elsewhere. A new float32
    array, bit for bit what ``cv2.resize`` with ``INTER_AREA`` gives that canvas as float32,
    where :func:`applies` (``RuntimeError`` where the extension was not built)."""
    if _area is None:
        raise RuntimeError('the area resize was not built; see applies()')
    width, height = output_size(size, scale)
    out = np.empty((height, width, 3), np.float32)
    _area.area_resize(src, values, int(offset[0]), int(offset[1]), int(size[0]),
                      int(size[1]), float(scale[0]), float(scale[1]), out)
    return out
