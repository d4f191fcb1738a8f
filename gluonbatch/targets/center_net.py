"""CenterNet's training targets in numpy, for one sample or a whole batch at once.

gluoncv's ``CenterNetTargetGenerator(num_class, output_width, output_height)`` turns the
boxes of a sample (already on the output grid) into five float32 maps:

- ``heatmap`` ``(num_class, H, W)``: a gaussian per box around the cell of its centre,
  on its class's map, of a radius from the box size (``gaussian_radius``); where gaussians
  overlap the larger value stays;
- ``wh_target`` ``(2, H, W)``: the box's width and height at its centre cell, and
  ``wh_mask`` 1 there;
- ``center_reg`` ``(2, H, W)``: the centre's offset from its cell's corner, and
  ``center_reg_mask`` 1 there.

Where two boxes share a centre cell, the later one's size and offset stay, as in gluoncv's
loop; boxes with no width or height are skipped. :func:`center_net_targets` writes a
batch's targets into given ``(B, ...)`` arrays, and :class:`CenterNetTargetGenerator` is
gluoncv's class on top of it; both equal gluoncv's to the bit.

Differences from gluoncv, on purpose: the maps are numpy arrays, not NDArrays; a valid box
whose centre falls outside the grid raises :class:`BoxOutsideGrid`, and one whose class id
is not in ``[0, num_class)`` :class:`ClassOutOfRange`, where gluoncv asserts, raises
``IndexError`` or writes at wrapped-around cells (left of or above the grid, on the map of
a negative id counted from the end).

Examples
--------
>>> import numpy as np
>>> generator = CenterNetTargetGenerator(num_class=2, output_width=8, output_height=6)
>>> heatmap, wh, wh_mask, reg, reg_mask = generator(np.array([[1., 1., 4., 3.]]),
...                                                 np.array([[1]]))
>>> heatmap.shape, heatmap[1, 2, 2], wh[:, 2, 2].tolist(), reg[:, 2, 2].tolist()
((2, 6, 8), 1.0, [3.0, 2.0], [0.5, 0.0])
"""
import functools
import numbers
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._core.native import fill_zero
from .._core.inputs import as_numpy
from .errors import BoxOutsideGrid, ClassOutOfRange

__all__ = ['CenterNetTargetGenerator', 'center_net_targets', 'target_shapes', 'output_grid',
           'check_scale_factor',
           'gaussian_radius', 'gaussian_patch', 'BoxOutsideGrid', 'ClassOutOfRange']


def gaussian_radius(height: ArrayLike, width: ArrayLike, min_overlap: float = 0.7) -> np.ndarray:
    """gluoncv's ``_gaussian_radius((height, width))`` for arrays of (ceiled) box sizes, the
    same radii to the bit for float16, float32, float64 and integer labels.

    The radius is how far a box's corners may move while it keeps an IoU of ``min_overlap``
    with the original, the smallest over CornerNet's three ways of moving: one corner in and
    one out (the box shifted), both in (shrunk), both out (grown).

    Parameters
    ----------
    height, width : array-like
        Box sizes, of one dtype.
    min_overlap : float, default 0.7
        The IoU to keep.

    Returns
    -------
    numpy.ndarray
        float64 radii (not truncated).

    Examples
    --------
    >>> gaussian_radius(np.array([10., 3.]), np.array([20., 3.])).round(4).tolist()
    [3.6779, 0.82]
    """
    # gluoncv computes on numpy scalars of the label's dtype: the sum and the product below
    # stay in it, everything after them is float64; elementwise, in the same order here
    height, width = np.asarray(height), np.asarray(width)
    perimeter_half = (height + width).astype(np.float64)    # summed in the label's dtype
    area_in_dtype = (width * height).astype(np.float64)     # multiplied in it, too
    width64, height64 = width.astype(np.float64), height.astype(np.float64)
    lost_share = 1 - min_overlap
    # (1 - overlap) * w * h in float64, left to right; the grown case's constant term is
    # (overlap - 1) * w * h, exactly its negation
    lost_area = lost_share * width64 * height64
    shifted = _larger_root(perimeter_half,
                           4 * (area_in_dtype * lost_share / (1 + min_overlap)))
    shrunk = _larger_root(2 * perimeter_half, 16 * lost_area)
    grown = _larger_root(-2 * min_overlap * perimeter_half,
                         16 * min_overlap * -lost_area)
    return np.minimum(np.minimum(shifted, shrunk), grown)


def _larger_root(linear, four_ac):
    """``(b + sqrt(b**2 - 4ac)) / 2`` given ``b`` and the product ``4ac``: the quadratic
    formula's larger root, halved instead of divided by ``2a`` as CornerNet's code does
    (gluoncv's radii are those)."""
    return (linear + np.sqrt(np.square(linear) - four_ac)) / 2


#: Radii up to this have their whole patch cached; larger ones compute their on-grid cells.
_CACHED_RADIUS = 256


def _gaussian(radius, rows, cols):
    """The 2-D gaussian of sigma ``(2 * radius + 1) / 6`` at the integer offsets ``rows`` by
    ``cols`` from its peak, in float64 rounded to float32, values below float64 epsilon cut
    to 0 (gluoncv cuts below epsilon times the maximum, ``exp(0) = 1``)."""
    sigma = (2 * radius + 1) / 6
    spread = 2 * sigma * sigma
    rows = np.asarray(rows, np.float64)
    cols = np.asarray(cols, np.float64)
    squared = np.add.outer(rows * rows, cols * cols)   # squared distances to the peak
    values = np.exp(-squared / spread)
    values[values < np.finfo(np.float64).eps] = 0
    # max(a, g) rounded to float32 equals max(a, float32(g)) for a float32 a
    return values.astype(np.float32)


@functools.lru_cache(maxsize=128)
def gaussian_patch(radius: int) -> np.ndarray:
    """gluoncv's ``_gaussian_2d((d, d), sigma=d / 6)`` for ``d = 2 * radius + 1``, as the
    float32 values gluoncv's ``np.maximum`` writes into the float32 heatmap; cached
    (read-only) per radius.

    Parameters
    ----------
    radius : int
        The patch is ``(2 * radius + 1)`` square, its peak (1) at the centre.

    Returns
    -------
    numpy.ndarray
        float32, read-only.

    Examples
    --------
    >>> gaussian_patch(1)[1].tolist()
    [0.1353352814912796, 1.0, 0.1353352814912796]
    """
    offsets = np.arange(-radius, radius + 1)
    patch = _gaussian(radius, offsets, offsets)
    patch.flags.writeable = False
    return patch


def _clipped_patch(radius, top, bottom, left, right):
    """``gaussian_patch(radius)[radius - top:radius + bottom, radius - left:radius + right]``;
    for a large radius only those cells are computed (the same values, elementwise)."""
    if radius <= _CACHED_RADIUS:
        return gaussian_patch(radius)[radius - top:radius + bottom,
                                      radius - left:radius + right]
    return _gaussian(radius, np.arange(-top, bottom), np.arange(-left, right))


def check_scale_factor(scale_factor: float) -> float:
    """``scale_factor`` if it is a number > 0 (gluoncv's scripts pass the network's float
    ``scale``).

    >>> check_scale_factor(4.0)
    4.0
    """
    if not isinstance(scale_factor, numbers.Real) or isinstance(scale_factor, bool):
        raise TypeError('scale_factor must be a number, got %r' % (scale_factor,))
    if not scale_factor > 0:
        raise ValueError('scale_factor must be > 0, got %r' % (scale_factor,))
    return scale_factor


def output_grid(width: int, height: int, scale_factor: float) -> tuple[int, int]:
    """``(output_width, output_height)`` of a ``width`` x ``height`` input: each side
    divided by ``scale_factor``, rounded down, as gluoncv's preset does; at least 1x1.

    >>> output_grid(512, 384, 4.0)
    (128, 96)
    """
    grid = (int(width // check_scale_factor(scale_factor)),
            int(height // scale_factor))
    if min(grid) < 1:
        raise ValueError('scale_factor %r leaves no output grid for a %dx%d input (at least '
                         '1x1 needed)' % (scale_factor, width, height))
    return grid


def target_shapes(batch_size: int, num_class: int, output_width: int,
                  output_height: int) -> tuple[tuple[int, ...], ...]:
    """The shapes of the five ``(B, ...)`` target arrays of a batch.

    >>> target_shapes(4, 20, 128, 96)[:2]
    ((4, 20, 96, 128), (4, 2, 96, 128))
    """
    grid = (int(output_height), int(output_width))
    pair = (batch_size, 2) + grid
    return ((batch_size, num_class) + grid, pair, pair, pair, pair)


def _box_numbers(boxes, ids, width, height, num_class, owner):
    """Per-box numbers of one dtype group, gluoncv's arithmetic elementwise: the indices of
    the boxes that count, their class, centre cell, radius, size and centre offset.
    ``owner`` (per box, its sample) names the samples in errors."""
    coords = boxes[:, :4]
    if not np.isfinite(ids.astype(np.float64)).all():  # gluoncv: int(cid) of every box
        bad = ~np.isfinite(ids.astype(np.float64))
        raise ValueError('class ids must be finite numbers, got %s (samples %s)'
                         % (ids[bad][:3].tolist(), owner[bad][:3].tolist()))
    with np.errstate(invalid='ignore', over='ignore'):
        box_h = coords[:, 3] - coords[:, 1]
        box_w = coords[:, 2] - coords[:, 0]
        valid = np.flatnonzero((box_h > 0) & (box_w > 0))
        box_h, box_w, coords = box_h[valid], box_w[valid], coords[valid]
        classes = np.trunc(ids[valid].astype(np.float64))
        bad = (classes < 0) | (classes >= num_class)
        if bad.any():
            raise ClassOutOfRange('class ids must be in [0, %d) for boxes of positive size, '
                                  'got %s (samples %s)' % (num_class,
                                                           ids[valid][bad][:3].tolist(),
                                                           owner[valid][bad][:3].tolist()))
        radius = gaussian_radius(np.ceil(box_h), np.ceil(box_w))
        if not (np.isfinite(radius).all() and (radius < 2 ** 62).all()):
            bad = ~(np.isfinite(radius) & (radius < 2 ** 62))
            raise ValueError('box sizes give no finite gaussian radius: %s (samples %s)'
                             % (coords[bad][:3].tolist(), owner[valid][bad][:3].tolist()))
        radius = np.maximum(np.trunc(radius), 0).astype(np.int64)
        # gluoncv: np.array([(x0 + x2) / 2 * w_scale, ...], dtype=np.float32); the sums are
        # in the label's dtype, the halving exact in float64
        center = np.empty((len(valid), 2), np.float32)
        center[:, 0] = (coords[:, 0] + coords[:, 2]).astype(np.float64) / 2
        center[:, 1] = (coords[:, 1] + coords[:, 3]).astype(np.float64) / 2
        inside = ((center > -1).all(axis=1) & (center[:, 0] < width)
                  & (center[:, 1] < height))
    if not inside.all():
        raise BoxOutsideGrid('box centres must lie on the %dx%d output grid, got %s for '
                             'boxes %s (samples %s)'
                             % (width, height, center[~inside][:3].tolist(),
                                coords[~inside][:3].tolist(),
                                owner[valid][~inside][:3].tolist()))
    cell = center.astype(np.int32)
    # gluoncv writes box_w * w_scale (1.0) and center - center_int (float64) into float32
    size = np.stack([box_w * 1.0, box_h * 1.0], axis=1).astype(np.float32)
    offset = (center.astype(np.float64) - cell).astype(np.float32)
    return valid, classes.astype(np.int64), cell.astype(np.int64), radius, size, offset


def center_net_targets(boxes: Sequence[np.ndarray], out: Sequence[np.ndarray],
                       ids: Sequence[ArrayLike] | None = None,
                       zeroed: bool = False) -> Sequence[np.ndarray]:
    """CenterNet's five targets of a batch, written into ``out``.

    Parameters
    ----------
    boxes : sequence of numpy.ndarray
        Per sample, ``(N_i, 4+)`` boxes ``xmin, ymin, xmax, ymax[, class, ...]`` on the
        output grid, in the label's dtype (what the train preset gives its generator, or
        returns with ``targets=False``). ``N_i`` may be 0.
    out : sequence of 5 numpy.ndarray
        float32 ``heatmap (B, num_class, H, W)``, ``wh_target``, ``wh_mask``,
        ``center_reg`` and ``center_reg_mask`` ``(B, 2, H, W)`` (see
        :func:`target_shapes`).
    ids : sequence of numpy.ndarray, optional
        Per sample, the ``N_i`` class ids (any shape of ``N_i`` elements, e.g. gluoncv's
        ``(N_i, 1)``); column 4 of ``boxes`` by default.
    zeroed : bool
        ``out`` is known to be all zeros: it is not cleared first.

    Returns
    -------
    tuple of numpy.ndarray
        ``out``.

    Examples
    --------
    >>> out = [np.zeros(s, np.float32) for s in target_shapes(2, 3, 16, 16)]
    >>> _ = center_net_targets([np.array([[2., 2., 6., 6., 0.]]), np.zeros((0, 5))], out)
    >>> float(out[0][0, 0, 4, 4]), out[1][0, :, 4, 4].tolist(), float(out[0][1].max())
    (1.0, [4.0, 4.0], 0.0)
    """
    heatmap, wh_target, wh_mask, center_reg, center_reg_mask = out
    batch, num_class, height, width = heatmap.shape
    if len(boxes) != batch or (ids is not None and len(ids) != batch):
        raise ValueError('boxes are given for %d samples%s, the target arrays hold %d'
                         % (len(boxes), '' if ids is None else ' and ids for %d' % len(ids),
                            batch))
    for arr in out[1:]:
        if arr.shape != (batch, 2, height, width):
            raise ValueError('target arrays must have shape %s, got %s'
                             % ((batch, 2, height, width), arr.shape))
    if not zeroed:
        for arr in out:
            fill_zero(arr)

    # samples grouped by the dtype of their boxes (usually one group): gluoncv's arithmetic
    # follows that dtype, so each group is computed in its own
    groups: dict[np.dtype, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for index, sample in enumerate(boxes):
        sample = as_numpy(sample, 'the boxes of sample %d' % index)
        if sample.ndim != 2 or sample.shape[1] < (4 if ids is not None else 5):
            raise ValueError('the boxes of sample %d must have shape (N, %s), got %s'
                             % (index, '4+' if ids is not None else '5+', sample.shape))
        if ids is None:
            sample_ids = sample[:, 4]
        else:
            sample_ids = as_numpy(ids[index], 'the class ids of sample %d' % index).reshape(-1)
            if len(sample_ids) != len(sample):
                raise ValueError('sample %d has %d boxes and %d class ids'
                                 % (index, len(sample), len(sample_ids)))
        if len(sample):
            groups.setdefault(sample.dtype, []).append((index, sample, sample_ids))

    parts = []
    for group in groups.values():
        group_boxes = np.concatenate([g[1] for g in group]) if len(group) > 1 else group[0][1]
        group_ids = np.concatenate([g[2] for g in group]) if len(group) > 1 else group[0][2]
        owner = np.repeat([g[0] for g in group], [len(g[1]) for g in group])
        valid, classes, cell, radius, size, offset = _box_numbers(
            group_boxes, group_ids, width, height, num_class, owner)
        parts.append((owner[valid], classes, cell, radius, size, offset))
    if not parts:
        return out
    if len(parts) == 1:
        owner, classes, cell, radius, size, offset = parts[0]
    else:
        owner, classes, cell, radius, size, offset = (np.concatenate(p) for p in zip(*parts))
    if not len(owner):
        return out

    # size and offset maps: the last box of each cell wins, as in gluoncv's loop
    keys = ((owner * height + cell[:, 1]) * width + cell[:, 0]).tolist()
    last_of = {key: index for index, key in enumerate(keys)}   # later boxes overwrite
    if len(last_of) < len(keys):
        last = np.fromiter(last_of.values(), np.int64, len(last_of))
        at, cx, cy = owner[last], cell[last, 0], cell[last, 1]
        size, offset = size[last], offset[last]
    else:
        at, cx, cy = owner, cell[:, 0], cell[:, 1]
    for channel in (0, 1):
        wh_target[at, channel, cy, cx] = size[:, channel]
        wh_mask[at, channel, cy, cx] = 1.0
        center_reg[at, channel, cy, cx] = offset[:, channel]
        center_reg_mask[at, channel, cy, cx] = 1.0

    # heatmaps: an elementwise maximum per box, in any order
    for b, c, x, y, r in zip(owner.tolist(), classes.tolist(), cell[:, 0].tolist(),
                             cell[:, 1].tolist(), radius.tolist()):
        left, right = min(x, r), min(width - x, r + 1)
        top, bottom = min(y, r), min(height - y, r + 1)
        view = heatmap[b, c, y - top:y + bottom, x - left:x + right]
        np.maximum(view, _clipped_patch(r, top, bottom, left, right), out=view)
    return out


class CenterNetTargetGenerator:
    """gluoncv's ``CenterNetTargetGenerator`` in numpy.

    Calling it with ``(gt_boxes, gt_ids)`` of one sample returns gluoncv's five float32
    maps as numpy arrays; :meth:`batch` does a batch into ``(B, ...)`` arrays.

    Parameters
    ----------
    num_class : int
        Number of categories.
    output_width, output_height : int
        The network's output grid.
    """

    def __init__(self, num_class: int, output_width: int, output_height: int) -> None:
        self._num_class = int(num_class)
        self._output_width = int(output_width)
        self._output_height = int(output_height)

    def shapes(self, batch_size: int) -> tuple[tuple[int, ...], ...]:
        """The five target shapes of ``batch_size`` samples (:func:`target_shapes`)."""
        return target_shapes(batch_size, self._num_class, self._output_width,
                             self._output_height)

    def allocate(self, batch_size: int) -> tuple[np.ndarray, ...]:
        """Five zero float32 target arrays for ``batch_size`` samples: C-contiguous views
        of one zeroed block (one allocation, whose pages the system maps lazily)."""
        shapes = self.shapes(batch_size)
        sizes = [int(np.prod(shape)) for shape in shapes]
        block = np.zeros(sum(sizes), np.float32)
        bounds = np.cumsum([0] + sizes)
        return tuple(block[start:stop].reshape(shape)
                     for start, stop, shape in zip(bounds[:-1], bounds[1:], shapes))

    def batch(self, boxes: Sequence[np.ndarray], ids: Sequence[ArrayLike] | None = None,
              out: Sequence[np.ndarray] | None = None) -> Sequence[np.ndarray]:
        """The targets of a batch: ``boxes`` (and ``ids``) per sample as in
        :func:`center_net_targets`; into ``out`` if given, else into new arrays."""
        if out is None:
            return center_net_targets(boxes, self.allocate(len(boxes)), ids, zeroed=True)
        return center_net_targets(boxes, out, ids)

    def __call__(self, gt_boxes: np.ndarray, gt_ids: ArrayLike) -> tuple[np.ndarray, ...]:
        """``(heatmap, wh_target, wh_mask, center_reg, center_reg_mask)`` of one sample:
        ``gt_boxes`` ``(N, 4)`` on the output grid, ``gt_ids`` ``(N, 1)`` or ``(N,)``."""
        out = center_net_targets([gt_boxes], self.allocate(1), [gt_ids], zeroed=True)
        return tuple(arr[0] for arr in out)

    forward = __call__
