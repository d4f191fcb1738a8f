"""CenterNet's affine warp of pixels and boxes, as gluoncv 0.10.5 computes it.

gluoncv's CenterNet presets crop and scale an image around a centre ``c`` by a side ``s``
with one affine map (:func:`get_affine_transform`, the same matrix as gluoncv's
``get_affine_transform`` without rotation), warp the uint8 pixels with it
(:func:`warp_image`: ``cv2.warpAffine``, bilinear, border 0) and move the box corners with
the same kind of map onto the (smaller) output grid (:func:`warp_boxes`). Everything here
gives gluoncv's numbers bit for bit; in particular :func:`warp_boxes` keeps two quirks:

- each corner is cast to float32 before the float64 product, and the result is written back
  in the label's dtype;
- columns 0 and 1 (``xmin, ymin``) are clipped to ``[0, width - 1]`` and columns 2 and 3
  (``xmax, ymax``) to ``[0, height - 1]`` -- ``ymin`` against the width and ``xmax``
  against the height, as gluoncv does. Kept on purpose: it is what gluoncv's models were
  trained on.

Examples
--------
>>> import numpy as np
>>> center = np.array([50., 40.], np.float32)
>>> m = get_affine_transform(center, 100.0, (25, 25))
>>> (m.round(6) + 0.0).tolist()
[[0.25, 0.0, 0.0], [0.0, 0.25, 2.5]]
>>> warp_boxes(np.array([[10., 20., 90., 60., 3.]]), m, (25, 20))
array([[ 2.5,  7.5, 19. , 17.5,  3. ]])
"""
import itertools
from collections.abc import Sequence

import cv2
import numpy as np
from numpy.typing import ArrayLike

from .._core import compiled
from .pixels import CHECKED_STATE, opencv_state, written

_warp = compiled.load('gluonbatch.transforms._warp')

__all__ = ['COMPILED_WARP', 'get_border', 'get_affine_transform', 'warp_image', 'warp_boxes']


def get_border(border: int, size: int) -> int:
    """The margin CenterNet's train preset keeps between the drawn centre and the image
    edges: ``border`` halved (rounding down) until it is less than half of ``size``.

    >>> get_border(128, 500), get_border(128, 200), get_border(128, 1)
    (128, 64, 0)
    """
    if size < 1:
        raise ValueError('size must be at least 1, got %r' % (size,))
    while 2 * border >= size:
        border //= 2
    return border


def _quarter_turn(fixed, moving):
    """The point that makes a right angle with ``fixed`` -> ``moving`` at ``moving``
    (float32, the arithmetic of the matrix's third point pair)."""
    step = fixed - moving
    return moving + np.array([-step[1], step[0]], dtype=np.float32)


def get_affine_transform(center: ArrayLike, side: float, size: Sequence[int],
                         inverse: bool = False) -> np.ndarray:
    """The 2x3 float64 map of the square of ``side`` centred at ``center`` onto an image of
    ``size = (width, height)`` (the square's width fills the width), or its inverse.

    The map is made as ``cv2.getAffineTransform`` of three float32 point pairs -- the
    centres, the centres of the top edges, and a point a quarter turn further -- with the
    rounding steps of gluoncv's ``get_affine_transform`` without rotation or shift, so the
    matrix equals gluoncv's to the bit.

    Parameters
    ----------
    center : numpy.ndarray
        ``(x, y)``, float32 in the presets.
    side : float
        The side of the square (rounded to float32 first, as gluoncv does).
    size : sequence of 2 ints
        ``(width, height)`` of the output.
    inverse : bool
        Return the map from the output back to the input.

    Returns
    -------
    numpy.ndarray
        The float64 ``(2, 3)`` matrix.
    """
    half_side = float(np.float32(side)) * 0.5
    width, height = size
    source = np.empty((3, 2), dtype=np.float32)
    source[0] = center
    # the centre plus a float64 offset, rounded once to float32
    source[1] = np.asarray(center) + np.array([0.0, -half_side])
    source[2] = _quarter_turn(source[0], source[1])
    target = np.empty((3, 2), dtype=np.float32)
    target[0] = (width * 0.5, height * 0.5)
    target[1] = np.array((width * 0.5, height * 0.5), np.float32) + np.array(
        (0, width * -0.5), np.float32)
    target[2] = _quarter_turn(target[0], target[1])
    if inverse:
        return cv2.getAffineTransform(target, source)
    return cv2.getAffineTransform(source, target)


def warp_image(pixels: np.ndarray, matrix: np.ndarray, size: Sequence[int],
               out: np.ndarray | None = None) -> np.ndarray:
    """``pixels`` (HWC uint8 or float32) warped by ``matrix`` onto a ``size = (width,
    height)`` image: gluoncv's ``cv2.warpAffine(img, trans_input, size,
    flags=cv2.INTER_LINEAR)``, so the same bilinear sampling (fixed-point on uint8) and a
    border of 0 (black, not the mean). Into ``out`` (C-contiguous ``(height, width, 3)``,
    the dtype of ``pixels``) if given.

    A uint8 image's warp by a map without rotation or shear (CenterNet's) is compiled
    (``_warp.c``): OpenCV's integer arithmetic, so its bytes, as sums across two source
    rows and one down, two to five times OpenCV's speed on one thread. It is checked
    against OpenCV at import (:data:`COMPILED_WARP`); OpenCV warps other images and maps,
    and everything while OpenCV's settings differ from the import's.

    >>> warp_image(np.full((2, 2, 3), 9, np.uint8), np.array([[1., 0, 1], [0, 1, 0]]),
    ...            (3, 2))[..., 0]
    array([[0, 9, 9],
           [0, 9, 9]], dtype=uint8)
    """
    if not pixels.flags.c_contiguous:
        pixels = np.ascontiguousarray(pixels)
    dsize = (int(size[0]), int(size[1]))
    if _warp is not None and _compiled_warp(pixels, matrix, dsize, out):
        target = np.empty((dsize[1], dsize[0], 3), np.uint8) if out is None else out
        # OpenCV's fixed-point arithmetic, compiled: False for maps it leaves to OpenCV
        if _warp.warp_affine(pixels, tuple(float(v) for v in np.ravel(matrix)), target):
            return target
    return written(out, cv2.warpAffine(pixels, matrix, dsize, dst=out, flags=cv2.INTER_LINEAR))


def _compiled_warp(pixels, matrix, dsize, out):
    """Whether the compiled warp (``_warp.c``) may compute this one: :data:`COMPILED_WARP`,
    OpenCV's settings those of the import, a uint8 image of 3 channels, a finite float32 or
    float64 2x3 map, sides of 1 to 2**15 - 2 (OpenCV's limit) and an output of its own. It
    leaves maps with rotation or shear to OpenCV itself."""
    return (COMPILED_WARP and pixels.dtype == np.uint8 and pixels.ndim == 3
            and pixels.shape[2] == 3 and 1 <= min(*pixels.shape[:2], *dsize)
            and max(*pixels.shape[:2], *dsize) < 2 ** 15 - 1 and isinstance(matrix, np.ndarray)
            and matrix.shape == (2, 3) and matrix.dtype in (np.float32, np.float64)
            and bool(np.isfinite(matrix).all()) and opencv_state() == CHECKED_STATE
            and (out is None or (out.dtype == np.uint8 and out.shape == (dsize[1], dsize[0], 3)
                                 and out.flags.c_contiguous
                                 and not np.may_share_memory(out, pixels))))


def _warp_matches():
    """Whether the compiled warp gives ``cv2.warpAffine``'s bytes here, for maps that scale
    and move or mirror (with float noise off the diagonal), images narrower than its vector
    reads, and rows of every length modulo 16 values; and leaves maps that turn to
    OpenCV."""
    if _warp is None:
        return False
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (23, 31, 3), dtype=np.uint8)
    aligned = [[[1.37, 0, -3.2], [0, 1.37, 4.9]], [[0.61, 0, 5.5], [0, 0.61, -2.25]],
               [[-1.1, 0, 30.0], [0, 0.9, 1.0]], [[1.2, 1e-17, 0.3], [-2e-17, 1.2, 0.7]]]
    # the first map on rows of every length modulo 16 values, the others on two sizes
    sizes = [(width, 9) for width in range(16, 32)] + [(45, 30)]
    probes = [(aligned[0], size) for size in sizes] + [
        (forward, size) for forward in aligned[1:] for size in ((17, 12), (45, 30))]
    try:
        for (forward, size), image in itertools.product(probes, (src, src[:, :2].copy())):
            matrix = np.array(forward)
            want = cv2.warpAffine(image, matrix, size, flags=cv2.INTER_LINEAR)
            got = np.empty_like(want)
            if not (_warp.warp_affine(image, tuple(matrix.ravel()), got)
                    and np.array_equal(got, want)):
                return False
        turned = (0.9, 0.2, -1.0, -0.3, 1.1, 2.0)
        return not _warp.warp_affine(src, turned, np.empty((9, 16, 3), np.uint8))
    except Exception:  # keep OpenCV's path
        return False


#: Whether the compiled warp runs: built, and found at import to give OpenCV's bytes.
COMPILED_WARP = _warp_matches()


def warp_boxes(label: np.ndarray, matrix: ArrayLike, size: Sequence[int]) -> np.ndarray:
    """A copy of ``label`` (``(N, 4+)``, dtype kept) with its corners moved by ``matrix``
    and clipped as gluoncv clips them: columns 0, 1 to ``[0, size[0] - 1]`` and columns
    2, 3 to ``[0, size[1] - 1]`` (``size = (width, height)``; the swap is gluoncv's).

    Each corner goes through gluoncv's ``affine_transform``: cast to float32, then a
    float64 matrix-vector product. The products of all corners are made by one
    ``numpy.matmul`` over a stack of vectors, which runs the same BLAS matrix-vector
    kernel as gluoncv's ``np.dot`` per corner, so the results are the same to the bit.
    Extra columns (class, ...) are copied untouched.

    >>> m = np.array([[0.5, 0, 0], [0, 0.5, 0]])
    >>> warp_boxes(np.array([[2, 4, 30, 40, 1]], np.int64), m, (8, 16))
    array([[ 1,  2, 15, 15,  1]])
    """
    out = label.copy()
    count = len(label)
    if count:
        # rows: xmin, ymin, 1 then xmax, ymax, 1 of each box, as float32 values in float64
        corners = np.ones((2 * count, 3, 1))
        corners[0::2, :2, 0] = label[:, 0:2].astype(np.float32)
        corners[1::2, :2, 0] = label[:, 2:4].astype(np.float32)
        moved = np.matmul(np.ascontiguousarray(matrix, dtype=np.float64), corners)[:, :, 0]
        out[:, 0:2] = moved[0::2]
        out[:, 2:4] = moved[1::2]
    out[:, :2] = np.clip(out[:, :2], 0, size[0] - 1)
    out[:, 2:4] = np.clip(out[:, 2:4], 0, size[1] - 1)
    return out
