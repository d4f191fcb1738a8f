"""CenterNet's numpy colour jitter, folded into one affine map per pixel.

gluoncv's ``experimental.image.np_random_color_distort`` (CenterNet's colour augmentation)
takes the image's gray ``gs`` (``cv2.COLOR_BGR2GRAY`` of the RGB image, so the weights are
0.114 on R, 0.587 on G and 0.299 on B) and its mean ``gs_mean`` once, then runs brightness,
contrast and saturation in a shuffled order, then lighting:

- brightness ``x <- a x``;
- contrast ``x <- a x + (1 - a) gs_mean``;
- saturation ``x <- a x + (1 - a) gs`` (the gray of the image *before* the jitter);
- lighting ``x <- x + eig_vec @ (eig_val * alpha)``.

Given ``gs_mean`` (a statistic of the whole image) each step is affine in the original pixel
``x0``, and so is the chain: ``x = p x0 + q gray(x0) + r + d`` per channel, a 3x4 matrix
(:func:`jitter_matrix`). gluoncv's ``to_tensor`` scale and ``normalize`` fold into it too
(:func:`color_matrix`), and OpenCV applies the product in one pass
(:func:`gluonbatch.transforms.pixels.affine_chw` or ``affine_hwc``, the pass the SSD presets
use too). Nothing is clipped, in gluoncv or here.

The draws (:func:`draw_jitter`) are gluoncv's: Python's ``random.shuffle`` of the three
steps, then three ``data_rng.uniform(-var, var)`` in the shuffled order, then
``data_rng.normal(scale=alphastd, size=3)``.

Examples
--------
>>> import random
>>> import numpy as np
>>> from gluonbatch.transforms import pixels
>>> params = draw_jitter(np.random.RandomState(123), random.Random(0))
>>> params.order
('brightness', 'saturation', 'contrast')
>>> image = np.full((1, 1, 3), 0.5, np.float32)
>>> m = jitter_matrix(params, gs_mean=gray_mean(image))
>>> pixels.affine_hwc(image, m).shape
(1, 1, 3)
"""
import random
from typing import NamedTuple, Tuple

import cv2
import numpy as np
from numpy.typing import ArrayLike

from .._core import compiled
from .._core.typing import PythonRandom
from . import color

__all__ = ['GRAY_WEIGHTS', 'EIG_VAL', 'EIG_VEC', 'JitterParams', 'draw_jitter',
           'jitter_matrix', 'color_matrix', 'gray_mean']

#: The weights ``cv2.COLOR_BGR2GRAY`` gives channels 0, 1, 2 (gluoncv passes RGB images,
#: so R gets the blue weight), as the float32 values OpenCV uses.
GRAY_WEIGHTS = np.array([0.114, 0.587, 0.299], dtype=np.float32)
_GRAY_WEIGHTS_64 = GRAY_WEIGHTS.astype(np.float64)
_colour = compiled.load('gluonbatch.transforms._colour')
#: gluoncv's (and CenterNet's) PCA lighting: eigenvalues and eigenvectors (columns).
EIG_VAL = np.array([0.2141788, 0.01817699, 0.00341571], dtype=np.float32)
EIG_VEC = np.array([[-0.58752847, -0.69563484, 0.41340352],
                    [-0.5832747, 0.00994535, -0.81221408],
                    [-0.56089297, 0.71832671, 0.41158938]], dtype=np.float32)

_STEPS = ('brightness', 'contrast', 'saturation')


class JitterParams(NamedTuple):
    """One draw of gluoncv's ``np_random_color_distort``: the order of the three steps,
    each step's factor ``1 + uniform(-var, var)``, and the lighting ``alpha`` (3 normal
    draws)."""
    order: Tuple[str, str, str]
    brightness: float
    contrast: float
    saturation: float
    lighting: Tuple[float, float, float]


def draw_jitter(data_rng: np.random.RandomState, py_rng: PythonRandom | None = None,
                var: float = 0.4, alphastd: float = 0.1) -> JitterParams:
    """gluoncv's draws for one ``np_random_color_distort(image, data_rng)``.

    Parameters
    ----------
    data_rng : numpy.random.RandomState
        The jitter's generator (the preset's own ``RandomState(123)``).
    py_rng : random.Random or module, optional
        The generator of the shuffle; Python's global ``random`` by default.
    var, alphastd : float
        gluoncv's ``var`` and ``alphastd``.

    Returns
    -------
    JitterParams
    """
    order = list(_STEPS)
    (random if py_rng is None else py_rng).shuffle(order)
    alphas = {}
    for name in order:
        alphas[name] = 1. + data_rng.uniform(low=-var, high=var)
    lighting = data_rng.normal(scale=alphastd, size=(3, ))
    first, second, third = order
    return JitterParams((first, second, third), alphas['brightness'], alphas['contrast'],
                        alphas['saturation'], tuple(lighting.tolist()))


def jitter_matrix(params: JitterParams, gs_mean: float, eig_val: np.ndarray | None = None,
                  eig_vec: np.ndarray | None = None) -> np.ndarray:
    """The 3x4 float64 map of the jitter ``params`` on an image whose gray mean is
    ``gs_mean`` (in the image's own units: ``[0, 1]`` for gluoncv's CenterNet).

    >>> p = JitterParams(('brightness', 'contrast', 'saturation'), 2.0, 1.0, 1.0, (0, 0, 0))
    >>> jitter_matrix(p, 0.3)
    array([[2., 0., 0., 0.],
           [0., 2., 0., 0.],
           [0., 0., 2., 0.]])
    """
    eig_val = EIG_VAL if eig_val is None else eig_val
    eig_vec = EIG_VEC if eig_vec is None else eig_vec
    scale, gray, shift = 1.0, 0.0, 0.0   # x = scale * x0 + gray * gray(x0) + shift
    for name in params.order:
        alpha = getattr(params, name)
        scale, gray, shift = scale * alpha, gray * alpha, shift * alpha
        if name == 'contrast':
            shift += (1 - alpha) * float(gs_mean)
        elif name == 'saturation':
            gray += 1 - alpha
    # gluoncv's lighting: image += np.dot(eigvec, eigval * alpha), in float64
    light = np.dot(eig_vec, eig_val * np.asarray(params.lighting, dtype=np.float64))
    m = np.zeros((3, 4))
    m[:, :3] = scale * np.eye(3) + gray * GRAY_WEIGHTS.astype(np.float64)[np.newaxis, :]
    m[:, 3] = shift + light
    return m


def color_matrix(params: JitterParams, gs_mean: float, input_scale: float = 1.0,
                 mean: ArrayLike | None = None, std: ArrayLike | None = None,
                 eig_val: np.ndarray | None = None,
                 eig_vec: np.ndarray | None = None) -> np.ndarray:
    """The whole colour chain of a CenterNet sample as one 3x4 map: scale the input by
    ``input_scale`` (``1 / 255`` from uint8 values, as gluoncv's ``astype / 255.``), jitter
    (``gs_mean`` in the scaled units), then ``(x - mean) / std`` if ``mean`` and ``std``
    are given (float32 values, as gluoncv keeps them)."""
    m = np.eye(3, 4) * input_scale
    m = color.compose(m, jitter_matrix(params, gs_mean, eig_val, eig_vec))
    if mean is not None:
        mean = np.asarray(mean, dtype=np.float32).reshape(3).astype(np.float64)
        std = np.asarray(std, dtype=np.float32).reshape(3).astype(np.float64)
        m = color.compose(m, color.normalize(mean, std, to_tensor=False))
    return m


def gray_mean(image: np.ndarray) -> float:
    """The mean of ``cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)`` over an HWC image (uint8 or
    float32), in float64.

    The grey value is a weighted sum of the channels, so its mean is the same weighted sum
    of the channels' means: each channel is summed exactly for uint8 (compiled, in
    integers, where built) and by OpenCV in float64 for float32, within ~1e-15 relative of
    the exact mean (gluoncv's float32 mean is within ~1e-7).

    >>> round(gray_mean(np.full((2, 3, 3), [100, 50, 10], np.float32)), 4)
    43.74
    """
    height, width = image.shape[:2]
    if _colour is not None and image.dtype == np.uint8 and image.flags.c_contiguous:
        sums = _colour.channel_sums(image)  # exact, as OpenCV's: integers in float64
    else:
        # OpenCV sums single planes (split included) faster than three interleaved channels
        sums = [cv2.sumElems(plane)[0] for plane in cv2.split(np.ascontiguousarray(image))]
    return float(np.dot(_GRAY_WEIGHTS_64, sums)) / (height * width)
