"""The train presets' image with its last pass deferred to the batch.

A train preset made with ``deferred=True`` returns its image as a :class:`DeferredImage`:
the pixels before the preset's last pass (the colour map with ``to_tensor`` and
``normalize``, the mirror, the CHW split) and what that pass needs. gluonbatch's batchify
functions (``Stack``, ``Pad`` and the detection ones built on them) run the pass straight
into the image's slot of the batch, so the image is written once instead of written, then
copied. The batch is the one the preset with ``deferred=False`` gives, to the bit.

Anything else reads a deferred image as an array, computed then: ``numpy.asarray(image)``
is the preset's ``deferred=False`` image, and gluoncv's batchify functions (which go
through ``numpy.asarray``) take it too.

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
import numpy as np

from .._core.deferred import Deferred
from . import pixels as pixel_ops

__all__ = ['DeferredImage']


class DeferredImage(Deferred):
    """An HWC image to be written through a 3x4 colour map (and mirrored if ``flip_x``),
    CHW if ``chw`` else HWC, float32 (:func:`~gluonbatch.transforms.pixels.affine_chw`).

    Parameters
    ----------
    pixels : numpy.ndarray
        HWC uint8 or float32 pixels, 3 channels; kept as they are (a read-only view), so
        the caller leaves them unchanged too.
    matrix : array-like
        3x4: ``matrix[:, :3] @ pixel + matrix[:, 3]`` per pixel.
    flip_x : bool
        Mirror left-right.
    shift : array-like of 3, optional
        Added to every pixel before ``matrix``.
    chw : bool
        Write ``(3, H, W)``; else ``(H, W, 3)``.
    """

    def __init__(self, pixels, matrix, flip_x=False, shift=None, chw=True):
        if not (isinstance(pixels, np.ndarray) and pixels.dtype in (np.uint8, np.float32)
                and pixels.ndim == 3 and pixels.shape[2] == 3):
            raise TypeError('pixels must be a uint8 or float32 HWC numpy array with 3 '
                            'channels, got %r' % (getattr(pixels, 'dtype', type(pixels)),))
        matrix = np.array(matrix, np.float64)
        if matrix.shape != (3, 4):
            raise ValueError('matrix must be 3x4, got shape %s' % (matrix.shape,))
        self.pixels = pixels.view()
        self.pixels.flags.writeable = False  # written any number of times, alike
        self.matrix = matrix
        self.shift = None if shift is None else np.array(shift, np.float64)
        self.flip_x, self.chw = bool(flip_x), bool(chw)
        height, width = pixels.shape[:2]
        self.shape = (3, height, width) if self.chw else (height, width, 3)

    def write(self, out):
        """The image into ``out`` (float32 of :attr:`shape`)."""
        affine = pixel_ops.affine_chw if self.chw else pixel_ops.affine_hwc
        affine(self.pixels, self.matrix, self.flip_x, self.shift, out)

    def __repr__(self):
        return 'DeferredImage(shape=%s, flip_x=%s)' % (self.shape, self.flip_x)
