"""Every random draw of the SSD-family presets, in gluoncv's order, as frozen records.

This module is the only caller of random number generators in the presets. Each ``draw_*``
function makes exactly the calls gluoncv's function of the same job makes, on the same
generators and in the same order, so a run seeded the gluoncv way draws the same
augmentations and leaves the generators in the same states. The draws depend on the image
shape and the boxes only, never on pixels, so a preset draws everything first and then
applies the record (see :mod:`gluonbatch.transforms.presets.ssd`).

The generators are injectable: ``np_rng`` defaults to numpy's global generator (the
``numpy.random`` module; a ``numpy.random.RandomState`` fits), ``py_rng`` to Python's
(the ``random`` module; a ``random.Random`` fits).

SSD and YOLOv3 (gluoncv's ``SSDDefaultTrainTransform`` and ``YOLO3DefaultTrainTransform``
augment alike) draw, with ``np`` and ``py`` the two generators:

1. ``random_color_distort``: np brightness coin [+ np delta], np order, then contrast,
   saturation and hue (or saturation, hue, contrast): np coin each [+ np factor; the hue
   angle is py];
2. expand: np coin [+ py ratio, py ``randint`` y, then x];
3. ``random_crop_with_constraints``: per constraint up to 50 trials of py scale, ratio,
   ``randrange`` top and left, until one passes; then np picks among the candidates until
   one keeps a box;
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
import math
import random
from typing import NamedTuple, Optional

import numpy as np

from . import boxes

__all__ = ['ColorDistort', 'Expand', 'Crop', 'SSDDraw', 'CROP_CONSTRAINTS',
           'draw_color_distort', 'draw_expand', 'draw_crop', 'draw_interp', 'draw_flip',
           'draw_ssd']

#: gluoncv's default ``(min_iou, max_iou)`` constraints of the SSD crop (``None``: unbounded).
CROP_CONSTRAINTS = ((0.1, None), (0.3, None), (0.5, None), (0.7, None), (0.9, None),
                    (None, 1))


class ColorDistort(NamedTuple):
    """One ``random_color_distort``: each step's value, or ``None`` where its coin said no.

    ``contrast_first`` is the order gluoncv drew: contrast, saturation, hue if true, else
    saturation, hue, contrast.
    """
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
    """The crop window ``(x, y, width, height)`` of the (expanded) image, and whether the
    boxes go through :func:`gluonbatch.transforms.boxes.crop` (gluoncv returns them
    untouched when the image has no boxes, or when no candidate window keeps any)."""
    x: int
    y: int
    width: int
    height: int
    clip: bool

    @property
    def box_window(self):
        """The window as gluoncv's ``bbox.crop`` sees it: a zero width or height means
        "to the far edge" there (``w if w else np.inf``)."""
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


def draw_color_distort(np_rng=None, py_rng=None, brightness_delta=32, contrast_low=0.5,
                       contrast_high=1.5, saturation_low=0.5, saturation_high=1.5,
                       hue_delta=18):
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


def draw_expand(height, width, np_rng=None, py_rng=None, max_ratio=4, p=0.5):
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


class _TrialTest:
    """Whether a trial window of the crop passes an IoU constraint with every box: the
    answer of gluoncv's ``bbox_iou(bbox, crop[np.newaxis])`` test, bit for bit.

    gluoncv's IoU mixes dtypes: the box areas are taken in the label's dtype, the
    intersection and the division in float64 (the window is an int64 array). With finite
    coordinates that arithmetic is done here in Python floats, box by box, which is the
    same IEEE arithmetic; anything else goes through numpy exactly as gluoncv writes it.

    Most trials of a small box cannot pass: the IoU of areas ``a`` and ``A`` is at most
    ``min(a, A) / max(a, A)``. Those trials are skipped (the draws are still made by the
    caller) when that bound is below the threshold by more than any rounding of the two
    sides could make up; a box of no area fails every positive threshold.
    """

    def __init__(self, label):
        self.label = label
        coords = label[:, :4]
        # gluoncv: area_a = np.prod(bbox_a[:, 2:4] - bbox_a[:, :2] + offset, axis=1)
        with np.errstate(all='ignore'):  # (float16 areas overflow as in gluoncv)
            areas = np.prod(label[:, 2:4] - label[:, :2] + 0, axis=1)
        self.fast = bool(np.isfinite(coords).all() and np.isfinite(areas).all())
        if not self.fast:
            return
        x1, y1, x2, y2 = (coords[:, k].astype(np.float64).tolist() for k in range(4))
        areas = areas.astype(np.float64).tolist()
        self.boxes = list(zip(x1, y1, x2, y2, areas))
        # a box of no width or height has IoU 0 (or nan) with every window
        self.empty_box = any(b[2] <= b[0] or b[3] <= b[1] for b in self.boxes)
        self.area_range = (min(areas), max(areas))
        eps = np.finfo(label.dtype if label.dtype.kind == 'f' else np.float64).eps
        # the bound holds for gluoncv's rounded IoU within ~11 eps of the area's dtype
        self.slack = 1.0 - 64 * float(eps)

    def threshold(self, min_iou):
        """The bound below which a trial window cannot pass ``min_iou``: ``None`` if every
        trial must be tested, ``inf`` if none can pass (a box of no area). A window of
        area ``A`` is skipped when ``min(a, A) / max(a, A)`` is below it for the smallest
        or the largest box area ``a`` (:attr:`area_range`; the ratio has no other
        minimum), or when ``A`` is 0."""
        if not (self.fast and min_iou > 0):
            return None
        if self.empty_box:
            return math.inf
        return min_iou * self.slack

    def hopeless(self, area, threshold):
        """Whether a trial window of ``area`` cannot pass the constraint ``threshold``
        (from :meth:`threshold`, not ``None``) came from."""
        if area <= 0:
            return True
        lo, hi = self.area_range
        return (lo / area if lo <= area else area / lo) < threshold or (
            hi / area if hi <= area else area / hi) < threshold

    def passes(self, left, top, width, height, min_iou, max_iou):
        """gluoncv's ``min_iou <= iou.min() and iou.max() <= max_iou``."""
        if not self.fast:
            return self._passes_numpy(left, top, width, height, min_iou, max_iou)
        cl, ct = float(left), float(top)
        cr, cb = float(left + width), float(top + height)
        area = float(width * height)
        for x1, y1, x2, y2, a in self.boxes:
            tlx = x1 if x1 > cl else cl
            tly = y1 if y1 > ct else ct
            brx = x2 if x2 < cr else cr
            bry = y2 if y2 < cb else cb
            inter = (brx - tlx) * (bry - tly) if (tlx < brx and tly < bry) else 0.0
            union = a + area - inter
            iou = inter / union if union != 0 else math.nan
            if not min_iou <= iou <= max_iou:  # nan fails too, as in numpy's min/max
                return False
        return True

    def _passes_numpy(self, left, top, width, height, min_iou, max_iou):
        bbox_a = self.label
        bbox_b = np.array((left, top, left + width, top + height))[np.newaxis]
        with np.errstate(all='ignore'):
            tl = np.maximum(bbox_a[:, None, :2], bbox_b[:, :2])
            br = np.minimum(bbox_a[:, None, 2:4], bbox_b[:, 2:4])
            area_i = np.prod(br - tl + 0, axis=2) * (tl < br).all(axis=2)
            area_a = np.prod(bbox_a[:, 2:4] - bbox_a[:, :2] + 0, axis=1)
            area_b = np.prod(bbox_b[:, 2:4] - bbox_b[:, :2] + 0, axis=1)
            iou = area_i / (area_a[:, None] + area_b - area_i)
        return bool(min_iou <= iou.min() and iou.max() <= max_iou)


def _inline_random(py_rng):
    """``(random, getrandbits)`` of ``py_rng`` if its ``uniform`` and ``randrange`` are
    CPython's: ``a + (b - a) * random()`` and rejection sampling on ``getrandbits`` (then
    :func:`draw_crop` inlines them, the same draws at a fraction of the calls' cost);
    ``None`` for any other generator, which is then called as gluoncv calls it."""
    if not (py_rng is random or type(py_rng) is random.Random) or not _INLINE_MATCHES:
        return None
    return py_rng.random, py_rng.getrandbits


def _randbelow(getrandbits, n):
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def _inline_matches():
    """Whether this Python's ``uniform``/``randrange`` draw what the inlined forms draw."""
    ours, theirs = random.Random(20240601), random.Random(20240601)
    for n in (1, 2, 3, 5, 8, 100, 257, 1000, 4097) * 20:
        if ours.uniform(0.3, 1) != 0.3 + (1 - 0.3) * theirs.random():
            return False
        if ours.randrange(n) != _randbelow(theirs.getrandbits, n):
            return False
    return ours.getstate() == theirs.getstate()


_INLINE_MATCHES = _inline_matches()


def draw_crop(label, size, py_rng=None, np_rng=None, min_scale=0.3, max_scale=1,
              max_aspect_ratio=2, constraints=None, max_trial=50):
    """The draws of gluoncv's ``experimental.bbox.random_crop_with_constraints(label,
    size)`` (same defaults), ``size = (width, height)``; the crop as a :class:`Crop`.

    The trial loop draws exactly as gluoncv's; a trial that cannot pass is not tested
    (see :class:`_TrialTest`), which changes neither the draws nor the choice.

    >>> label = np.array([[10., 10., 50., 40., 0.]])
    >>> draw_crop(label, (64, 48), random.Random(3), np.random.RandomState(3))
    Crop(x=9, y=2, width=54, height=29, clip=True)
    >>> draw_crop(label[:0], (64, 48), random.Random(3), np.random.RandomState(3))
    Crop(x=29, y=11, width=34, height=19, clip=False)
    """
    np_rng, py_rng = _rngs(np_rng, py_rng)
    if constraints is None:
        constraints = CROP_CONSTRAINTS
    w, h = size
    test = _TrialTest(label) if len(label) else None
    candidates = [(0, 0, w, h)]
    inline = _inline_random(py_rng)
    uniform, randrange, sqrt = py_rng.uniform, py_rng.randrange, math.sqrt
    low_ratio, high_ratio = 1 / max_aspect_ratio, max_aspect_ratio
    scale_span = max_scale - min_scale
    for min_iou, max_iou in constraints:
        min_iou = -np.inf if min_iou is None else min_iou
        max_iou = np.inf if max_iou is None else max_iou
        threshold = None if test is None else test.threshold(min_iou)
        for _ in range(max_trial):
            if inline is not None:  # uniform and randrange as CPython writes them
                rand, getrandbits = inline
                scale = min_scale + scale_span * rand()
                low = max(low_ratio, scale * scale)
                aspect_ratio = low + (min(high_ratio, 1 / (scale * scale)) - low) * rand()
            else:
                scale = uniform(min_scale, max_scale)
                aspect_ratio = uniform(max(low_ratio, scale * scale),
                                       min(high_ratio, 1 / (scale * scale)))
            # np.sqrt of a Python float and math.sqrt are the same correctly rounded root
            crop_h = int(h * scale / sqrt(aspect_ratio))
            crop_w = int(w * scale * sqrt(aspect_ratio))
            if inline is not None and h > crop_h and w > crop_w:
                n = h - crop_h  # CPython's _randbelow_with_getrandbits, twice
                k = n.bit_length()
                crop_t = getrandbits(k)
                while crop_t >= n:
                    crop_t = getrandbits(k)
                n = w - crop_w
                k = n.bit_length()
                crop_l = getrandbits(k)
                while crop_l >= n:
                    crop_l = getrandbits(k)
            else:  # (raises gluoncv's ValueError on an empty range)
                crop_t = randrange(h - crop_h)
                crop_l = randrange(w - crop_w)
            if test is None:
                return Crop(crop_l, crop_t, crop_w, crop_h, False)
            if threshold is not None and test.hopeless(crop_w * crop_h, threshold):
                continue
            if test.passes(crop_l, crop_t, crop_w, crop_h, min_iou, max_iou):
                candidates.append((crop_l, crop_t, crop_w, crop_h))
                break
    while candidates:
        crop = Crop(*candidates.pop(np_rng.randint(0, len(candidates))), True)
        if boxes.crop(label, crop.box_window).size < 1:
            continue
        return crop
    return Crop(0, 0, w, h, False)


def draw_interp(np_rng=None):
    """The presets' ``np.random.randint(0, 5)``: OpenCV's interpolation code, passed to
    ``cv2.resize`` as is (0 nearest, 1 linear, 2 cubic, 3 area, 4 Lanczos)."""
    np_rng, _ = _rngs(np_rng, None)
    return int(np_rng.randint(0, 5))


def _choice(np_rng, p):
    """``np_rng.choice([False, True], p=[1 - p, p])``: the same one uniform draw and the
    same cumulative-sum comparison, without choice's checks (a few microseconds each)."""
    first = 1 - p
    total = first + p
    return bool(np_rng.random_sample() >= first / total)


def draw_flip(np_rng=None, px=0.5, py=0):
    """The draws of gluoncv's ``random_flip(px=px, py=py)``: ``(flip_x, flip_y)``; the
    vertical one is drawn first, even with ``py=0``.

    >>> draw_flip(np.random.RandomState(2))
    (False, False)
    """
    np_rng, _ = _rngs(np_rng, None)
    flip_y = _choice(np_rng, py)
    flip_x = _choice(np_rng, px)
    return flip_x, flip_y


def draw_ssd(shape, label, np_rng=None, py_rng=None):
    """All draws of gluoncv's SSD (and YOLOv3) train preset for an image of ``shape``
    ``(height, width[, channels])`` and its boxes ``label`` (``(N, 4+)``), in its order.

    Raises ``ValueError`` where gluoncv's preset fails later on an empty crop window
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
        raise ValueError('the drawn crop window %dx%d of the %dx%d image is empty: the image '
                         'is too small to augment' % (crop.width, crop.height, shape[1],
                                                      shape[0]))
    flip_x, flip_y = draw_flip(np_rng, px=0.5)
    return SSDDraw(color, expand, crop, interp, flip_x, flip_y)
