"""The train presets' image with its last pass deferred to the batch.

A train preset made with ``deferred=True`` returns its image as a :class:`DeferredImage`:
the pixels before the preset's last pass (the colour map with ``to_tensor`` and
``normalize``, the mirror, the CHW split) and what that pass needs. gluonbatch's batchify
functions (``Stack``, ``Pad`` and the detection ones built on them) run the pass straight
into the image's slot of the batch, so the image is written once instead of written, then
copied. The batch is the one the preset with ``deferred=False`` gives, to the bit.

Anything else reads a deferred image as an array, computed then: ``numpy.asarray(image)``
is the preset's ``deferred=False`` image. gluoncv's ``Stack`` and ``Append`` take it as
they are; gluoncv's ``Pad`` takes arrays only (``numpy.asarray`` first).

Examples
--------
>>> import numpy as np
>>> from gluonbatch.batchify import Stack
>>> pixels = np.full((2, 2, 3), 10, np.uint8)
>>> halve = np.hstack([np.eye(3) / 2, np.zeros((3, 1))])
>>> image = DeferredImage(pixels, halve)
>>> image.shape, np.asarray(image)[:, 0, 0]
((3, 2, 2), array([5., 5., 5.], dtype=float32))
>>> Stack()([image, image]).shape
(2, 3, 2, 2)
"""
from typing import Self

import numpy as np
from numpy.typing import ArrayLike

from .._core.checks import described
from .._core.deferred import Deferred
from . import pixels as pixel_ops

__all__ = ['DeferredImage']


class DeferredImage(Deferred):
    """An HWC image to be written through a 3x4 colour map (and mirrored if ``flip_x``),
    CHW if ``chw`` else HWC, float32 (:func:`~gluonbatch.transforms.pixels.affine_chw`).

    Its pixels, matrix and shift are its own (copies), read-only from outside: it is
    written alike any number of times.

    Parameters
    ----------
    pixels : numpy.ndarray
        HWC uint8 or float32 pixels, 3 channels (copied; see :meth:`from_owned`).
    matrix : array-like
        3x4 numbers: ``matrix[:, :3] @ pixel + matrix[:, 3]`` per pixel.
    flip_x : bool
        Mirror left-right.
    shift : array-like of 3, optional
        Numbers added to every pixel before ``matrix``.
    chw : bool
        Write ``(3, H, W)``; else ``(H, W, 3)``.

    Raises
    ------
    TypeError
        ``pixels`` is not a uint8 or float32 numpy array, or ``matrix`` or ``shift`` not
        numbers.
    ValueError
        ``pixels`` is not HWC with 3 channels, ``matrix`` not 3x4 or ``shift`` not 3
        values.
    """

    def __init__(self, pixels: np.ndarray, matrix: ArrayLike, flip_x: bool = False,
                 shift: ArrayLike | None = None, chw: bool = True) -> None:
        pixel_ops.check_pixels(pixels, 'pixels')
        self._keep(np.array(pixels), matrix, flip_x, shift, chw)

    @classmethod
    def from_owned(cls, pixels: np.ndarray, matrix: ArrayLike, flip_x: bool = False,
                   shift: ArrayLike | None = None, chw: bool = True) -> Self:
        """The same, keeping a view of ``pixels``: for pixels no one writes while the image
        lives (a preset's fresh array, or an image written at once)."""
        pixel_ops.check_pixels(pixels, 'pixels')
        image = cls.__new__(cls)
        image._keep(pixels, matrix, flip_x, shift, chw)
        return image

    def _keep(self, pixels, matrix, flip_x, shift, chw):
        self._pixels = _read_only(pixels)
        self._matrix = _read_only(_numbers(matrix, 'matrix', (3, 4)))
        self._shift = None if shift is None else _read_only(_numbers(shift, 'shift', (3,)))
        self.flip_x, self.chw = bool(flip_x), bool(chw)
        height, width = pixels.shape[:2]
        self.shape = (3, height, width) if self.chw else (height, width, 3)

    @property
    def pixels(self) -> np.ndarray:
        """The HWC pixels, read-only."""
        return _read_only(self._pixels)

    @property
    def matrix(self) -> np.ndarray:
        """The 3x4 colour map, float64, read-only."""
        return _read_only(self._matrix)

    @property
    def shift(self) -> np.ndarray | None:
        """The 3 values added before the map (float64, read-only), or ``None``."""
        return None if self._shift is None else _read_only(self._shift)

    def write(self, out: np.ndarray) -> None:
        """The image into ``out`` (float32 of ``shape``)."""
        affine = pixel_ops.affine_chw if self.chw else pixel_ops.affine_hwc
        affine(self._pixels, self._matrix, self.flip_x, self._shift, out)

    def __repr__(self):
        return 'DeferredImage(shape=%s, flip_x=%s)' % (self.shape, self.flip_x)


def _read_only(array):
    """A read-only view of ``array``."""
    view = array.view()
    view.flags.writeable = False
    return view


def _numbers(values, name, shape):
    """``values`` as a new float64 array of ``shape``, or the error saying why not."""
    try:
        array = np.array(values, np.float64)
    except (TypeError, ValueError):
        raise TypeError('%s must be numbers, got %s' % (name, described(values))) from None
    if array.shape != shape:
        raise ValueError('%s must have shape %s, got shape %s' % (name, shape, array.shape))
    return array
