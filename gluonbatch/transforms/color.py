"""Colour operations as float64 3x4 affine matrices; no pixels here.

A matrix ``m`` maps an RGB pixel ``x`` (a column) to ``m[:, :3] @ x + m[:, 3]``; OpenCV's
``cv2.transform`` applies it to a whole HWC image. Every step of gluoncv's
``experimental.image.random_color_distort`` (brightness, contrast, saturation, hue), and
``to_tensor`` followed by ``normalize``, is such a map, so a chain of them folds into one
matrix with :func:`compose` and the image is touched once.

Examples
--------
>>> import numpy as np
>>> m = compose(brightness(10.0), contrast(2.0))      # (x + 10) * 2
>>> apply(m, [1.0, 2.0, 3.0])
array([22., 24., 26.])
>>> apply(normalize((0.5, 0.5, 0.5), (0.25, 0.25, 0.25)), [0.0, 127.5, 255.0])
array([-2.,  0.,  2.])
"""
import math

import numpy as np
from numpy.typing import ArrayLike

from .draws import ColorDistort

__all__ = ['GRAY', 'identity', 'brightness', 'contrast', 'saturation', 'hue', 'compose',
           'invert', 'apply', 'normalize', 'distort']

#: gluoncv's (and ITU-R 601's) luma weights of R, G, B, used by the saturation step.
GRAY = (0.299, 0.587, 0.114)

# gluoncv's hue step: RGB -> YIQ, rotate I/Q, back; the two matrices as gluoncv writes them
# (they are not exact inverses, so hue by 0 is not quite the identity: keep them as they are).
_TYIQ = np.array([[0.299, 0.587, 0.114],
                  [0.596, -0.274, -0.321],
                  [0.211, -0.523, 0.311]])
_ITYIQ = np.array([[1.0, 0.956, 0.621],
                   [1.0, -0.272, -0.647],
                   [1.0, -1.107, 1.705]])


def identity() -> np.ndarray:
    """The map that leaves pixels as they are.

    >>> identity()
    array([[1., 0., 0., 0.],
           [0., 1., 0., 0.],
           [0., 0., 1., 0.]])
    """
    return np.eye(3, 4)


def brightness(delta: float) -> np.ndarray:
    """``x + delta`` on every channel (gluoncv's ``src += delta``)."""
    m = identity()
    m[:, 3] = delta
    return m


def contrast(alpha: float) -> np.ndarray:
    """``x * alpha`` (gluoncv's contrast step: a plain scaling, not a blend with the mean)."""
    return np.eye(3, 4) * alpha


def saturation(alpha: float) -> np.ndarray:
    """``alpha * x + (1 - alpha) * gray(x)`` with ``gray`` the :data:`GRAY` weighted sum."""
    m = identity() * alpha
    m[:, :3] += (1.0 - alpha) * np.array(GRAY)[np.newaxis, :]
    return m


def hue(angle: float) -> np.ndarray:
    """gluoncv's hue rotation by ``angle``; gluoncv takes ``cos(angle * pi)`` and
    ``sin(angle * pi)`` of an angle drawn in ``[-18, 18]``, and so does this.

    >>> np.allclose(hue(2.0)[:, :3], _ITYIQ @ _TYIQ)   # a full turn
    True
    """
    u = math.cos(angle * math.pi)
    w = math.sin(angle * math.pi)
    rotation = np.array([[1.0, 0.0, 0.0],
                         [0.0, u, -w],
                         [0.0, w, u]])
    m = np.zeros((3, 4))
    m[:, :3] = _ITYIQ @ rotation @ _TYIQ
    return m


def compose(*matrices: ArrayLike) -> np.ndarray:
    """One matrix doing ``matrices[0]`` first, then ``matrices[1]``, and so on.

    >>> compose(contrast(2.0), brightness(1.0))[:, 3]    # x * 2 + 1
    array([1., 1., 1.])
    """
    out = identity()
    for m in matrices:
        m = np.asarray(m, dtype=np.float64)
        out = np.concatenate([m[:, :3] @ out[:, :3], (m[:, :3] @ out[:, 3] + m[:, 3])[:, None]],
                             axis=1)
    return out


def invert(m: ArrayLike) -> np.ndarray:
    """The inverse map of an invertible 3x4 ``m`` (else ``ValueError``).

    The 3x3 inverse is the adjugate over the determinant, not LAPACK's: a LAPACK call
    wakes the BLAS library's threads, which then spin for a while after it, and a preset
    calls this for every expanded image, so in a DataLoader worker they would never sleep
    and take a core from the other workers. The cofactors are products and differences
    of single entries, taken in Python's floats, which round them as numpy does (without
    its floating-point warnings).

    >>> np.allclose(compose(saturation(0.7), invert(saturation(0.7))), identity())
    True
    >>> invert(contrast(0.0))
    Traceback (most recent call last):
    ...
    ValueError: the colour map is not invertible (determinant 0.0)
    """
    m = np.asarray(m, dtype=np.float64)
    if m.shape != (3, 4):
        raise ValueError('a colour map is 3x4, got shape %s' % (m.shape,))
    rows = m[:, :3]
    # row i of the cofactor matrix: row i+1 cross row i+2 (numpy's cross in a dozen
    # calls, one here)
    (a0, a1, a2), (b0, b1, b2), (c0, c1, c2) = rows.tolist()
    cofactors = np.array([[b1 * c2 - b2 * c1, b2 * c0 - b0 * c2, b0 * c1 - b1 * c0],
                          [c1 * a2 - c2 * a1, c2 * a0 - c0 * a2, c0 * a1 - c1 * a0],
                          [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]])
    det = float(rows[0] @ cofactors[0])
    if det == 0 or not math.isfinite(det):
        raise ValueError('the colour map is not invertible (determinant %r)' % det)
    linear = cofactors.T / det
    return np.concatenate([linear, (-linear @ m[:, 3])[:, None]], axis=1)


def apply(m: np.ndarray, pixels: ArrayLike) -> np.ndarray:
    """``m`` applied to an array of pixels ``(..., 3)`` in float64 (a reference, for tests
    and single colours; images go through ``cv2.transform``)."""
    pixels = np.asarray(pixels, dtype=np.float64)
    return pixels @ m[:, :3].T + m[:, 3]


def normalize(mean: ArrayLike, std: ArrayLike, to_tensor: bool = True) -> np.ndarray:
    """gluoncv's ``to_tensor`` (``x / 255``, if ``to_tensor``) then
    ``normalize(mean, std)``: ``(x / 255 - mean) / std`` per channel."""
    mean = np.asarray(mean, dtype=np.float64).reshape(3)
    std = np.asarray(std, dtype=np.float64).reshape(3)
    scale = 1.0 / (255.0 * std) if to_tensor else 1.0 / std
    m = np.zeros((3, 4))
    m[:, :3] = np.diag(scale)
    m[:, 3] = -mean / std
    return m


def distort(params: ColorDistort) -> np.ndarray:
    """The matrix of one drawn ``random_color_distort``: ``params`` is a
    :class:`gluonbatch.transforms.draws.ColorDistort` (steps left out are ``None``),
    composed in the drawn order.

    >>> from gluonbatch.transforms.draws import ColorDistort
    >>> distort(ColorDistort(brightness=None, contrast_first=True, contrast=None,
    ...                      saturation=None, hue=None))
    array([[1., 0., 0., 0.],
           [0., 1., 0., 0.],
           [0., 0., 1., 0.]])
    """
    steps = []
    if params.brightness is not None:
        steps.append(brightness(params.brightness))
    jitter = [None if params.saturation is None else saturation(params.saturation),
              None if params.hue is None else hue(params.hue)]
    scale = None if params.contrast is None else contrast(params.contrast)
    jitter = [scale] + jitter if params.contrast_first else jitter + [scale]
    steps.extend(m for m in jitter if m is not None)
    return compose(*steps)
