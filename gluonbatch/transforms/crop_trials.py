"""The trials of gluoncv's constrained crop (step 3 of :mod:`~gluonbatch.transforms.draws`):
drawing them (:class:`CropTrials`) and testing each against an IoU constraint
(:class:`TrialTest`), exactly as gluoncv's ``random_crop_with_constraints`` does.

A sample draws some 250 trials, most of which cannot pass; each is drawn all the same, so
that the generator ends where gluoncv's does. With CPython's own generator they run
compiled, with the area bound, in one loop for every constraint; it is checked at import to
draw what the calls draw.
"""
import itertools
import math
import random
from collections.abc import Sequence

import numpy as np

from .._core import compiled
from .._core.typing import PythonRandom
from .boxes import plain_number, python_rows

_trials = compiled.load('gluonbatch.transforms._trials')

__all__ = ['TrialTest', 'CropTrials']


class TrialTest:
    """Whether a trial crop passes an IoU constraint with every box: gluoncv's IoU test,
    bit for bit. Its box areas are in the label's dtype, the rest in float64: Python floats
    box by box do that arithmetic with finite values, numpy otherwise.

    Most trials of a small box cannot pass, the IoU of areas ``a`` and ``A`` being at most
    ``min(a, A) / max(a, A)``: trials whose bound is below the threshold by more than any
    rounding could make up are skipped (the caller still draws them).
    """

    def __init__(self, label: np.ndarray) -> None:
        self.label = label
        rows = python_rows(label, finite=True)
        if rows is not None:  # Python floats: the same arithmetic, fewer calls
            corners = [row[:4] for row in rows]
            areas = [(x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in corners]
            self.fast = all(map(math.isfinite, areas))
        else:
            with np.errstate(all='ignore'):  # in the label's dtype: float16 ones may overflow
                products = np.prod(label[:, 2:4] - label[:, :2], axis=1)
            self.fast = bool(np.isfinite(label[:, :4]).all() and np.isfinite(products).all())
            corners = label[:, :4].astype(np.float64).tolist()
            areas = products.astype(np.float64).tolist()
        if not self.fast:
            return
        self.boxes = [(x0, y0, x1, y1, area) for (x0, y0, x1, y1), area in zip(corners, areas)]
        # a box of no width or height has IoU 0 (or nan) with every crop
        self.empty_box = any(b[2] <= b[0] or b[3] <= b[1] for b in self.boxes)
        self.area_range = (min(areas), max(areas))
        eps = np.finfo(label.dtype if label.dtype.kind == 'f' else np.float64).eps
        # the bound holds for gluoncv's rounded IoU within ~11 eps of the area's dtype
        self.slack = 1.0 - 64 * float(eps)

    def threshold(self, min_iou: float) -> float | None:
        """The bound of ``min(a, A) / max(a, A)`` (box areas ``a`` within ``area_range``,
        crop area ``A``) below which a trial cannot pass ``min_iou``; ``None``: test
        every trial, ``inf``: none can pass (a box of no area)."""
        if not (self.fast and min_iou > 0):
            return None
        if self.empty_box:
            return math.inf
        return min_iou * self.slack

    def hopeless(self, area: float, threshold: float) -> bool:
        """Whether a trial crop of ``area`` cannot pass the constraint ``threshold``
        (from :meth:`threshold`, not ``None``) came from."""
        lo, hi = self.area_range
        return area <= 0 or (lo / area if lo <= area else area / lo) < threshold or (
            hi / area if hi <= area else area / hi) < threshold

    def passes(self, left: float, top: float, width: float, height: float, min_iou: float,
               max_iou: float) -> bool:
        """Whether ``min_iou <= IoU <= max_iou`` for every box (a nan IoU fails)."""
        if not self.fast:
            return self._passes_numpy(left, top, width, height, min_iou, max_iou)
        right, bottom = float(left + width), float(top + height)
        left, top, crop_area = float(left), float(top), float(width * height)
        for x0, y0, x1, y1, box_area in self.boxes:
            # the overlap's edges by comparisons: cheaper than min/max calls
            inner_left = x0 if x0 > left else left
            inner_top = y0 if y0 > top else top
            inner_right = x1 if x1 < right else right
            inner_bottom = y1 if y1 < bottom else bottom
            overlap = (inner_right - inner_left) * (inner_bottom - inner_top) if (
                inner_left < inner_right and inner_top < inner_bottom) else 0.0
            union = box_area + crop_area - overlap
            iou = overlap / union if union != 0 else math.nan
            if not min_iou <= iou <= max_iou:
                return False
        return True

    def _passes_numpy(self, left, top, width, height, min_iou, max_iou):
        """:meth:`passes` for non-finite coordinates or areas: gluoncv's dtypes in numpy,
        so nan and inf spread through the same operations."""
        corners = self.label[:, :4]
        near = np.array((left, top), np.float64)
        far = np.array((left + width, top + height), np.float64)
        with np.errstate(all='ignore'):
            box_areas = np.prod(corners[:, 2:] - corners[:, :2], axis=1).astype(np.float64)
            low, high = np.maximum(corners[:, :2], near), np.minimum(corners[:, 2:], far)
            # scaled by the non-empty test, not masked: an infinite extent times 0 is nan
            overlap = np.prod(high - low, axis=1) * np.all(low < high, axis=1)
            iou = overlap / (box_areas + float(width * height) - overlap)
        return bool(min_iou <= iou.min() and iou.max() <= max_iou)


class CropTrials:
    """The trial crops ``(x, y, w, h)`` of a ``width`` x ``height`` image, drawn from
    ``py_rng`` as gluoncv draws them, a constraint at a time.

    With CPython's own generator the trials run compiled (``_trials.c``): from the
    generator's state, the same numbers, the same double arithmetic, and the state set where
    the calls would leave it, in one call that no other thread's draws interleave. A trial
    the compiled loop cannot draw as Python would (a size that is not finite, a range that
    is empty) is drawn by the calls gluoncv makes, from there on: they raise what gluoncv's
    raise. Any other generator, and boxes with non-finite coordinates or areas, go through
    the calls as gluoncv makes them.

    Examples
    --------
    >>> trials = CropTrials(random.Random(3), 64, 48, 0.3, 1, 2)
    >>> trials.passing([(0, 1)], 50, None)  # no boxes: the first crop drawn
    [(29, 11, 34, 19)]
    """

    def __init__(self, py_rng: PythonRandom, width: int, height: int, min_scale: float,
                 max_scale: float, max_aspect_ratio: float) -> None:
        self.py_rng, self.width, self.height = py_rng, width, height
        self.scales = min_scale, max_scale, max_aspect_ratio
        #: Whether :meth:`passing` runs compiled (CPython's generator, whose draws the
        #: compiled loop repeats as checked at import, integer sides of 1 to 2**31 - 1, and
        #: scales that are Python floats or ints, whose arithmetic C's doubles repeat;
        #: numpy's float32, say, rounds otherwise).
        self._instance = _instance(py_rng)  # what the compiled loop draws from, or None
        self.compiled = _COMPILED_MATCHES and self._instance is not None and all(
            isinstance(side, (int, np.integer)) and 1 <= side < 2 ** 31
            for side in (width, height)) and all(plain_number(value) for value in self.scales)

    def passing(self, constraints: Sequence[tuple[float, float]], max_trial: int,
                test: TrialTest | None) -> list[tuple[int, int, int, int] | None]:
        """The first crop that passes each constraint in turn.

        Parameters
        ----------
        constraints : sequence of (float, float)
            ``(lowest, highest)``: a crop passes if ``lowest <= IoU <= highest`` for every
            box of ``test``.
        max_trial : int
            Trials drawn for each constraint, at most.
        test : TrialTest or None
            The boxes; None: no boxes, and the first crop drawn ends the list.

        Returns
        -------
        list of (int, int, int, int) or None
            Per constraint, the first passing ``(x, y, w, h)`` of its trials, or None.
            Trials that cannot pass (:meth:`TrialTest.hopeless`) are drawn, not tested.
        """
        bounds = [None if test is None else test.threshold(lowest) for lowest, _ in constraints]
        found: list[tuple[int, int, int, int] | None] = []
        start, done = 0, 0  # where the calls take over: the constraint, its trials drawn
        if self.compiled and (test is None or test.fast) and _compilable(constraints,
                                                                          max_trial):
            found, stopped = self._run_compiled(constraints, bounds, max_trial, test)
            if stopped is None:
                return found
            start, done = stopped
        called = _called_trials(self.py_rng, self.width, self.height, *self.scales)
        for number in range(start, len(constraints)):
            lowest, highest = constraints[number]
            crop = _first_called(called, max_trial - (done if number == start else 0), test,
                                 bounds[number], lowest, highest)
            found.append(crop)
            if test is None and crop is not None:
                break
        return found

    def _run_compiled(self, constraints, bounds, max_trial, test):
        """The compiled loop's crops, and where it stopped (see ``_trials.c``), for no
        boxes or boxes with finite coordinates and areas (others go through the calls,
        :meth:`TrialTest.passes` in numpy)."""
        boxes, area_range = None, (0.0, 0.0)
        if test is not None:
            boxes = [value for box in test.boxes for value in box]
            area_range = (0.0, 0.0) if test.empty_box else test.area_range
        runs = [(max_trial, float(lowest), float(highest),
                 math.nan if bound is None else bound)
                for (lowest, highest), bound in zip(constraints, bounds)]
        return _trials.run(self._instance, self.width, self.height, *self.scales,
                           runs, boxes, *area_range)


def _first_called(called, max_trial, test, bound, lowest, highest):
    """:meth:`CropTrials.passing`'s answer for one constraint, from the calls' trials."""
    for x, y, w, h in itertools.islice(called, max_trial):
        if test is None:
            return x, y, w, h
        if bound is not None and test.hopeless(w * h, bound):
            continue
        if test.passes(x, y, w, h, lowest, highest):
            return x, y, w, h
    return None


def _called_trials(py_rng, width, height, min_scale, max_scale, max_aspect_ratio):
    """The trials drawn with the calls gluoncv makes (an empty ``randrange`` raises
    ``ValueError`` as there)."""
    while True:
        scale = py_rng.uniform(min_scale, max_scale)
        ratio = py_rng.uniform(max(1 / max_aspect_ratio, scale * scale),
                               min(max_aspect_ratio, 1 / (scale * scale)))
        # numpy's root, as gluoncv's: nan (and a warning) for a negative ratio
        root = np.sqrt(ratio)
        crop_h, crop_w = int(height * scale / root), int(width * scale * root)
        y = py_rng.randrange(height - crop_h)
        x = py_rng.randrange(width - crop_w)
        yield x, y, crop_w, crop_h


def _instance(py_rng):
    """The CPython ``random.Random`` that ``py_rng`` draws from, whose draws the compiled
    loop repeats, or None: another generator, or the module's functions replaced (a
    test's patch, say), is called as gluoncv calls it."""
    if py_rng is random:  # the module's functions are bound methods of one instance
        py_rng = getattr(random.random, '__self__', None)
    return py_rng if type(py_rng) is random.Random else None


def _compilable(constraints, max_trial):
    """Whether the compiled loop takes these constraints (plain numbers, see
    :func:`~gluonbatch.transforms.boxes.plain_number`) and trial count (an int of fewer
    than 63 bits)."""
    return isinstance(max_trial, (int, np.integer)) and abs(int(max_trial)) < 2 ** 62 and all(
        plain_number(lowest) and plain_number(highest) for lowest, highest in constraints)


def _compiled_matches():
    """Whether the compiled loop gives the calls' crops and leaves the same state: the
    first crop, and the state after 200 trials none of which passes."""
    never = TrialTest(np.array([[0.0, 0.0, 1.0, 1.0, 0.0]]))
    if _trials is None or random.Random().getstate()[0] != 3:  # not built; another layout
        return False
    for size in ((5000, 3000), (40, 30)):
        fast_rng, slow_rng = random.Random(20240601), random.Random(20240601)
        fast = CropTrials(fast_rng, *size, 0.3, 1, 2)
        fast.compiled = True
        slow = _called_trials(slow_rng, *size, 0.3, 1, 2)
        if fast.passing([(0, 1)], 1, None) != [next(slow)]:
            return False
        fast.passing([(2.0, 3.0)], 200, never)
        for _ in range(200):
            next(slow)
        if fast_rng.getstate() != slow_rng.getstate():
            return False
    return True


_COMPILED_MATCHES = False  # until the check below says the compiled loop matches
_COMPILED_MATCHES = _compiled_matches()
