"""The random draws of the SSD-family presets (SSD, YOLOv3), in gluoncv's order, as
frozen tuples (CenterNet's and R-CNN's are in their presets, :mod:`.jitter` and
:mod:`.targets.rpn`; they reuse :func:`draw_flip`). Each ``draw_*`` function makes exactly
the calls gluoncv's function of the same job makes, on the same generators and in the same
order, so a run seeded the gluoncv way draws the same augmentations and leaves the
generators in the same states. The draws depend on the image shape and the boxes only,
never on pixels, so a preset draws everything first and then applies the draw (see
:mod:`gluonbatch.transforms.presets.ssd`). ``np_rng`` defaults to numpy's global
generator, ``py_rng`` to Python's.

SSD and YOLOv3 (gluoncv's ``SSDDefaultTrainTransform`` and ``YOLO3DefaultTrainTransform``
augment alike) draw, with ``np`` and ``py`` the two generators:

1. ``random_color_distort``: np brightness coin [+ np delta], np order, then contrast,
   saturation and hue (or saturation, hue, contrast): np coin each [+ np factor; the hue
   angle is py];
2. expand: np coin [+ py ratio, py ``randint`` y, then x];
3. ``random_crop_with_constraints``: per constraint up to 50 trials of py scale, ratio,
   ``randrange`` top and left, until one passes; then np picks among the crops that
   passed (and the whole image) until one keeps a box;
4. np interpolation (``randint(0, 5)``);
5. ``random_flip``: np vertical (never true, still drawn), then np horizontal.

Examples
--------
>>> import random
>>> import numpy as np
>>> label = np.array([[20., 30., 120., 90., 3.]])
>>> a = draw_ssd((100, 160), label, np.random.RandomState(7), random.Random(7))
>>> b = draw_ssd((100, 160), label, np.random.RandomState(7), random.Random(7))
>>> a == b
True
>>> a.interp in range(5), a.flip_y
(True, False)
"""
import random
from collections.abc import Sequence
from typing import NamedTuple, Optional, TypeAlias

import numpy as np

from .._core.typing import NumpyRandom, PythonRandom
from . import boxes
from .crop_trials import CropTrials, TrialTest

__all__ = ['ColorDistort', 'Expand', 'Crop', 'SSDDraw', 'CROP_CONSTRAINTS',
           'draw_color_distort', 'draw_expand', 'draw_crop', 'draw_interp', 'draw_flip',
           'draw_ssd']

#: A crop's ``(min_iou, max_iou)`` bounds; None is no bound.
Constraint: TypeAlias = tuple[float | None, float | None]
#: gluoncv's default ``(min_iou, max_iou)`` constraints of the SSD crop (``None``: unbounded).
CROP_CONSTRAINTS = ((0.1, None), (0.3, None), (0.5, None), (0.7, None), (0.9, None),
                    (None, 1))


class ColorDistort(NamedTuple):
    """One ``random_color_distort``: each step's value, or ``None`` where its coin said no;
    ``contrast_first``: whether gluoncv drew contrast, saturation, hue in that order (else
    saturation, hue, contrast)."""
    brightness: Optional[float]
    contrast_first: bool
    contrast: Optional[float]
    saturation: Optional[float]
    hue: Optional[float]


class Expand(NamedTuple):
    """The image placed at ``(x, y)`` on a canvas of ``width`` x ``height`` filled with the
    mean (gluoncv's ``random_expand`` returns the same four numbers)."""
    x: int
    y: int
    width: int
    height: int


class Crop(NamedTuple):
    """The crop ``(x, y, width, height)`` of the (expanded) image, and whether the
    boxes go through :func:`gluonbatch.transforms.boxes.crop` (gluoncv returns them
    untouched when the image has no boxes, or when no candidate crop keeps any)."""
    x: int
    y: int
    width: int
    height: int
    clip: bool

    @property
    def crop_box(self) -> tuple:
        """The crop as gluoncv's ``bbox.crop`` takes it (its ``crop_box``): a zero width or
        height means "to the far edge" there (``w if w else np.inf``)."""
        return (self.x, self.y, self.width or np.inf, self.height or np.inf)


class SSDDraw(NamedTuple):
    """Everything an SSD/YOLOv3 train preset draws for one sample."""
    color: ColorDistort
    expand: Optional[Expand]
    crop: Crop
    interp: int
    flip_x: bool
    flip_y: bool


def _rngs(np_rng, py_rng):
    return (np.random if np_rng is None else np_rng), (random if py_rng is None else py_rng)


def draw_color_distort(np_rng: NumpyRandom | None = None, py_rng: PythonRandom | None = None,
                       brightness_delta: float = 32, contrast_low: float = 0.5,
                       contrast_high: float = 1.5, saturation_low: float = 0.5,
                       saturation_high: float = 1.5, hue_delta: float = 18) -> ColorDistort:
    """The draws of gluoncv's ``experimental.image.random_color_distort`` (same defaults).

    >>> draw_color_distort(np.random.RandomState(0), random.Random(0))
    ... # doctest: +NORMALIZE_WHITESPACE
    ColorDistort(brightness=13.772119447834847, contrast_first=True,
                 contrast=1.3472517387841254, saturation=0.8843817072926998, hue=None)
    """
    np_rng, py_rng = _rngs(np_rng, py_rng)

    def coin():
        return np_rng.uniform(0, 1) > 0.5

    delta = float(np_rng.uniform(-brightness_delta, brightness_delta)) if coin() else None

    def scale(low, high):
        return float(np_rng.uniform(low, high)) if coin() else None

    def angle():
        return float(py_rng.uniform(-hue_delta, hue_delta)) if coin() else None

    if np_rng.randint(0, 2):
        contrast = scale(contrast_low, contrast_high)
        saturation = scale(saturation_low, saturation_high)
        hue = angle()
        return ColorDistort(delta, True, contrast, saturation, hue)
    saturation = scale(saturation_low, saturation_high)
    hue = angle()
    contrast = scale(contrast_low, contrast_high)
    return ColorDistort(delta, False, contrast, saturation, hue)


def draw_expand(height: int, width: int, np_rng: NumpyRandom | None = None,
                py_rng: PythonRandom | None = None, max_ratio: float = 4,
                p: float = 0.5) -> Expand | None:
    """The presets' expand coin (``np.random.uniform(0, 1) > p``) and, if it says yes, the
    draws of gluoncv's ``random_expand(max_ratio=4, keep_ratio=True)``; ``None`` if not.

    >>> draw_expand(10, 20, np.random.RandomState(0), random.Random(0))
    Expand(x=26, y=24, width=70, height=35)
    >>> draw_expand(10, 20, np.random.RandomState(1), random.Random(0)) is None
    True
    """
    np_rng, py_rng = _rngs(np_rng, py_rng)
    if not np_rng.uniform(0, 1) > p:
        return None
    if max_ratio <= 1:
        return Expand(0, 0, width, height)
    ratio = py_rng.uniform(1, max_ratio)
    out_h, out_w = int(height * ratio), int(width * ratio)
    y = py_rng.randint(0, out_h - height)
    x = py_rng.randint(0, out_w - width)
    return Expand(x, y, out_w, out_h)


def draw_crop(label: np.ndarray, size: Sequence[int], py_rng: PythonRandom | None = None,
              np_rng: NumpyRandom | None = None, min_scale: float = 0.3, max_scale: float = 1,
              max_aspect_ratio: float = 2, constraints: Sequence[Constraint] | None = None,
              max_trial: int = 50) -> Crop:
    """The draws of gluoncv's ``experimental.bbox.random_crop_with_constraints(label,
    size)`` (same defaults), ``size = (width, height)``; the crop as a :class:`Crop`.
    Trials that cannot pass are drawn but not tested: the draws and the choice are the same.

    >>> label = np.array([[10., 10., 50., 40., 0.]])
    >>> draw_crop(label, (64, 48), random.Random(3), np.random.RandomState(3))
    Crop(x=9, y=2, width=54, height=29, clip=True)
    >>> draw_crop(label[:0], (64, 48), random.Random(3), np.random.RandomState(3))
    Crop(x=29, y=11, width=34, height=19, clip=False)
    """
    np_rng, py_rng = _rngs(np_rng, py_rng)
    width, height = size
    trials = CropTrials(py_rng, width, height, min_scale, max_scale, max_aspect_ratio)
    test = TrialTest(label) if len(label) else None
    bounds = [(-np.inf if lowest is None else lowest, np.inf if highest is None else highest)
              for lowest, highest in (CROP_CONSTRAINTS if constraints is None else constraints)]
    found = [crop for crop in trials.passing(bounds, max_trial, test) if crop is not None]
    if test is None and found:  # no boxes: gluoncv keeps the first crop
        return Crop(*found[0], False)
    return _pick([(0, 0, width, height)] + found, label, (width, height), np_rng)


def _pick(passed, label, size, np_rng):
    """gluoncv's choice: numpy picks a crop at random until one keeps a box (each pick
    is removed); the whole image, boxes untouched, if none does."""
    while passed:
        crop = Crop(*passed.pop(np_rng.randint(0, len(passed))), True)
        if boxes.crop(label, crop.crop_box).size:
            return crop
    return Crop(0, 0, size[0], size[1], False)


def draw_interp(np_rng: NumpyRandom | None = None) -> int:
    """The presets' ``np.random.randint(0, 5)``: OpenCV's interpolation code, passed to
    ``cv2.resize`` as is (0 nearest, 1 linear, 2 cubic, 3 area, 4 Lanczos)."""
    np_rng, _ = _rngs(np_rng, None)
    return int(np_rng.randint(0, 5))


def _choice(np_rng, p):
    """``np_rng.choice([False, True], p=[1 - p, p])``: the same one uniform draw and the
    same cumulative-sum comparison, without choice's checks (a few microseconds each)."""
    return bool(np_rng.random_sample() >= (1 - p) / ((1 - p) + p))


def draw_flip(np_rng: NumpyRandom | None = None, px: float = 0.5,
              py: float = 0) -> tuple[bool, bool]:
    """The draws of gluoncv's ``random_flip(px=px, py=py)``: ``(flip_x, flip_y)``; the
    vertical one is drawn first, even with ``py=0``.

    >>> draw_flip(np.random.RandomState(2))
    (False, False)
    """
    np_rng, _ = _rngs(np_rng, None)
    flip_y = _choice(np_rng, py)
    flip_x = _choice(np_rng, px)
    return flip_x, flip_y


def draw_ssd(shape: Sequence[int], label: np.ndarray, np_rng: NumpyRandom | None = None,
             py_rng: PythonRandom | None = None) -> SSDDraw:
    """All draws of gluoncv's SSD (and YOLOv3) train preset for an image of ``shape``
    ``(height, width[, channels])`` and its boxes ``label`` (``(N, 4+)``), in its order.

    Raises ``ValueError`` where gluoncv's preset fails later on an empty crop
    (images of a few pixels); the draws up to that point are made as in gluoncv.
    """
    np_rng, py_rng = _rngs(np_rng, py_rng)
    height, width = shape[0], shape[1]
    color = draw_color_distort(np_rng, py_rng)
    expand = draw_expand(height, width, np_rng, py_rng)
    if expand is not None:
        label = boxes.translate(label, expand.x, expand.y)
        width, height = expand.width, expand.height
    crop = draw_crop(label, (width, height), py_rng, np_rng)
    interp = draw_interp(np_rng)
    if crop.width < 1 or crop.height < 1:
        raise ValueError('the drawn crop %dx%d of the %dx%d image is empty: the image '
                         'is too small to augment' % (crop.width, crop.height, shape[1],
                                                      shape[0]))
    flip_x, flip_y = draw_flip(np_rng, px=0.5)
    return SSDDraw(color, expand, crop, interp, flip_x, flip_y)
