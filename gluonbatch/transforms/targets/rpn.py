"""RPN training targets in numpy, one sample at a time, as gluoncv's R-CNN train presets make them.

gluoncv's ``FasterRCNNDefaultTrainTransform`` / ``MaskRCNNDefaultTrainTransform``, given the
network, label every anchor of the image (``RPNTargetGenerator``): IoU with each ground-truth
box (MXNet's float32 ``box_iou``), anchors crossing the image border ignored, positives by
threshold or by being a box's best anchor, negatives by threshold, then positives and
negatives subsampled with ``np.random.choice(..., replace=False)`` and the positives' boxes
encoded. This module does the same arithmetic in the same dtypes, so the targets are equal
bit for bit and the random draws are the same calls on the same generator, in the same
order: a run seeded the gluoncv way samples the same anchors. The draws come after the
sample's flip and before the next sample's, so targets are made per sample.

- :func:`box_iou` is MXNet's ``contrib.box_iou`` (corner format) in float32, bit for bit: no
  ``+ 1`` on widths, intersections clipped at 0, empty boxes of area 0 and
  ``inter / (area_a + area_b - inter)`` evaluated in that order. A float64 IoU differs in a
  few percent of the entries, which moves anchors across the thresholds and desyncs the
  draws.
- :class:`RPNAnchors` takes the anchors from the network's anchor generators once (what
  gluoncv computes in the preset's constructor) and lays them out for an image size: the
  feature-map sizes come from the symbolic ``net.features`` and the anchors inside the
  image are found once per size and cached.
- :class:`RPNTargetGenerator` labels and encodes; the IoU is computed for the anchors
  inside the image only (the others are ignored whatever their IoU).

Examples
--------
>>> import numpy as np
>>> anchors = np.array([[0, 0, 10, 10], [5, 5, 15, 15]], np.float32)
>>> box_iou(anchors, np.array([[0, 0, 10, 10]], np.float32))
array([[1.        ],
       [0.14285715]], dtype=float32)
"""
import collections
import copy
import threading

import mxnet as mx
import numpy as np

from ..._core.alloc import legacy_mode
from ..._core.checks import describe

__all__ = ['box_iou', 'AnchorLayout', 'RPNAnchors', 'RPNTargetGenerator']

_F32 = np.float32


def box_iou(anchors, boxes):
    """IoU of every anchor with every box, both ``(N, 4)`` / ``(M, 4)`` float32 corners.

    The arithmetic of MXNet's ``mx.nd.contrib.box_iou(anchors, boxes, format='corner')``
    step by step in float32, so the result is equal to it bit for bit: per axis
    ``max(min(a2, b2) - max(a1, b1), 0)``, the intersection the product of the two, 0 where
    it is not positive, otherwise ``inter / (area_a + area_b - inter)`` with an area of 0 for
    a box whose width or height is negative.

    Returns
    -------
    numpy.ndarray
        ``(N, M)`` float32.

    Examples
    --------
    >>> box_iou(np.array([[0, 0, 4, 4]], np.float32),
    ...         np.array([[2, 2, 6, 6], [4, 4, 8, 8], [3, 3, 2, 2]], np.float32))
    array([[0.14285715, 0.        , 0.        ]], dtype=float32)
    """
    anchors = np.asarray(anchors, dtype=_F32).reshape(-1, 4)
    return _box_iou_t(np.asarray(boxes, dtype=_F32).reshape(-1, 4),
                      np.ascontiguousarray(anchors.T)).T


def _area(x1, y1, x2, y2):
    """MXNet's ``BoxArea`` (corner): ``w * h``, or 0 if ``w < 0`` or ``h < 0``."""
    width = x2 - x1
    height = y2 - y1
    with np.errstate(over='ignore', invalid='ignore'):
        area = width * height
    return np.where((width < 0) | (height < 0), _F32(0), area)


def _box_iou_t(boxes, anchors_t, anchor_areas=None, plain_anchors=False):
    """:func:`box_iou` transposed: ``(M, N)`` for boxes ``(M, 4)`` and anchors ``(4, N)``.

    Laid out box by anchor, every step runs over long contiguous rows. For finite boxes of
    finite area and anchors of positive area (``plain_anchors``) ``min``/``max`` clamps and
    a plain division give MXNet's bits; anything else (NaN, infinities, overflowing areas)
    takes MXNet's comparisons literally.
    """
    if anchor_areas is None:
        anchor_areas = _area(*anchors_t)
        plain_anchors = bool(np.all(anchor_areas > 0) and np.all(np.isfinite(anchor_areas)))
    bx1, by1, bx2, by2 = (boxes[:, i:i + 1] for i in range(4))
    ax1, ay1, ax2, ay2 = anchors_t
    box_areas = _area(bx1, by1, bx2, by2)
    shape = (boxes.shape[0], anchors_t.shape[1])
    if plain_anchors and np.all(np.isfinite(boxes)) and np.all(np.isfinite(box_areas)):
        # An intersection is +0 or positive (np.maximum(-0., 0) is +0), every union is
        # positive, so 0 / union is MXNet's +0; positive ones divide exactly as MXNet.
        inter, other, scratch = (np.empty(shape, _F32) for _ in range(3))
        for (a1, a2, b1, b2), out in (((ax1, ax2, bx1, bx2), inter),
                                      ((ay1, ay2, by1, by2), other)):
            out[...] = b2                               # right: min(a2, b2)
            np.minimum(out, a2, out=out)
            scratch[...] = b1                           # left: max(a1, b1)
            np.maximum(scratch, a1, out=scratch)
            np.subtract(out, scratch, out=out)
            np.maximum(out, _F32(0), out=out)
        np.multiply(inter, other, out=inter)
        np.add(anchor_areas, box_areas, out=other)
        with np.errstate(over='ignore'):
            other -= inter
        return np.divide(inter, other, out=other)
    with np.errstate(all='ignore'):
        width = np.where(ax2 < bx2, ax2, bx2) - np.where(ax1 > bx1, ax1, bx1)
        height = np.where(ay2 < by2, ay2, by2) - np.where(ay1 > by1, ay1, by1)
        inter = np.where(width > 0, width, _F32(0)) * np.where(height > 0, height, _F32(0))
        iou = inter / (anchor_areas + box_areas - inter)
    return np.where(inter <= 0, _F32(0), iou).astype(_F32, copy=False)


class AnchorLayout:
    """The anchors of one image size, as gluoncv lays them out for the RPN targets.

    Attributes
    ----------
    size : (int, int)
        The image ``(height, width)``.
    levels : tuple of (int, int, int)
        Per feature level ``(height, width, anchors per position)`` of the targets: the
        feature map's size, cut to the size of the pre-generated anchor grid where that is
        smaller (gluoncv slices the grid with the feature map's size).
    num_anchors : int
        Anchors over all levels, in gluoncv's order: level, row, column, anchor.
    inside : numpy.ndarray
        Indices of the anchors inside the image (gluoncv ignores the others: an anchor
        with ``xmin < 0``, ``ymin < 0``, ``xmax >= width`` or ``ymax >= height``), ascending.
    inside_corners : numpy.ndarray
        Their corners by coordinate, ``(4, len(inside))`` float32 (``xmin`` row first).
    """

    __slots__ = ('size', 'levels', 'num_anchors', 'inside', 'inside_corners', '_grids',
                 '_starts', '_areas', '_plain')

    def __init__(self, size, grids):
        height, width = size
        self.size = (int(height), int(width))
        self._grids = tuple(grids)
        self.levels = tuple((grid.shape[0], grid.shape[1], grid.shape[2] // 4)
                            for grid in self._grids)
        counts = [h * w * depth for h, w, depth in self.levels]
        self._starts = np.cumsum([0] + counts)
        self.num_anchors = int(self._starts[-1])
        anchors = self.anchors()
        outside = anchors[:, 0] < 0
        outside |= anchors[:, 1] < 0
        outside |= anchors[:, 2] >= width
        outside |= anchors[:, 3] >= height
        self.inside = np.flatnonzero(~outside).astype(np.int32)
        self.inside_corners = np.ascontiguousarray(anchors[self.inside].T)
        self._areas = _area(*self.inside_corners)
        self._plain = bool(np.all(self._areas > 0) and np.all(np.isfinite(self._areas)))

    def anchors(self, indices=None):
        """Corners of all anchors ``(num_anchors, 4)``, or of those at ``indices``; float32."""
        if indices is None:
            if not self._grids:
                return np.zeros((0, 4), _F32)
            return np.concatenate([grid.reshape(-1, 4) for grid in self._grids])
        indices = np.asarray(indices, dtype=np.intp)
        out = np.empty((len(indices), 4), _F32)
        level_of = np.searchsorted(self._starts, indices, side='right') - 1
        for level, (grid, (_, width, depth)) in enumerate(zip(self._grids, self.levels)):
            picked = np.flatnonzero(level_of == level)
            if len(picked):
                local = indices[picked] - self._starts[level]
                row, rest = np.divmod(local, width * depth)
                column, anchor = np.divmod(rest, depth)
                out[picked] = grid.reshape(grid.shape[0], width, depth, 4)[row, column, anchor]
        return out

    def split(self, *targets):
        """Each flat per-anchor target ``(num_anchors, ...)`` as a list with one
        ``(height, width, -1)`` view per level, as gluoncv returns them."""
        out = []
        for target in targets:
            out.append([target[start:stop].reshape(height, width, -1)
                        for start, stop, (height, width, _) in
                        zip(self._starts[:-1], self._starts[1:], self.levels)])
        return tuple(out)

    @property
    def nbytes(self):
        """Memory of what the layout holds for the image size (the grids are shared)."""
        return self.inside.nbytes + self.inside_corners.nbytes + self._areas.nbytes

    def ious(self, boxes):
        """:func:`box_iou` of the inside anchors with ``boxes`` ``(M, 4)`` float32, laid out
        ``(M, len(inside))`` (transposed)."""
        return _box_iou_t(boxes, self.inside_corners, self._areas, self._plain)


class RPNAnchors:
    """The RPN anchors of a gluoncv R-CNN network, laid out per image size.

    At construction the anchors are taken from ``net.rpn.anchor_generator`` exactly as
    gluoncv's train presets take them: each generator is run on a zero image of
    ``ashape x ashape`` (halved per level with ``multi_stage``, never below 16) and its
    output kept as an ``(ashape, ashape, 4 * anchors)`` grid. The network is not touched (a
    copy of the generators is moved to the CPU). Per image size, the feature-map sizes of
    ``net.features`` cut the grids (:class:`gluonbatch.rcnn.FeatureShapes`, inferred once
    per size) and the anchors inside the image are found; layouts are kept in an LRU cache
    of at most ``cache_bytes``, as training sees the same sizes again and again (a C4
    layout of a 600x1000 image takes about 0.5 MB, an FPN one of 800x1333 about 6 MB).

    Parameters
    ----------
    net : mxnet.gluon.Block
        A gluoncv Faster/Mask R-CNN network (``net.rpn.anchor_generator``, ``net.features``);
        its anchor parameters must be initialized (``net.initialize()``, or
        ``net.rpn.anchor_generator.initialize()`` alone).
    ashape : int, default 128
        Size of the pre-generated anchor grid (gluoncv's ``ashape``; its train scripts pass
        ``net.ashape``).
    multi_stage : bool, default False
        One generator per feature level (FPN networks).
    cache_bytes : int, default 64 MiB
        Most memory the cached layouts take; the most recent one is always kept.
    """

    def __init__(self, net, ashape=128, multi_stage=False, cache_bytes=64 << 20):
        from ...rcnn import FeatureShapes
        with legacy_mode():
            generator = copy.deepcopy(net.rpn.anchor_generator)
            generator.collect_params().reset_ctx(mx.cpu())
            generators = list(generator) if multi_stage else [generator]
            grids = []
            for level in generators:
                anchors = level(mx.nd.zeros((1, 3, ashape, ashape)))
                anchors = anchors.reshape((1, 1, ashape, ashape, -1)).asnumpy()
                grids.append(np.ascontiguousarray(anchors[0, 0], dtype=_F32))
                if multi_stage:
                    ashape = max(ashape // 2, 16)
        self.grids = tuple(grids)
        self.multi_stage = bool(multi_stage)
        self.feature_shapes = FeatureShapes(net)
        self.cache_bytes = int(cache_bytes)
        self._init_cache()

    def _init_cache(self):
        self._cache = collections.OrderedDict()
        self._cached_bytes = 0
        self._lock = threading.Lock()

    def __getstate__(self):
        state = self.__dict__.copy()
        del state['_cache'], state['_cached_bytes'], state['_lock']
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._init_cache()

    def layout(self, height, width):
        """The :class:`AnchorLayout` of an image of ``height x width`` (cached)."""
        key = (int(height), int(width))
        with self._lock:
            layout = self._cache.get(key)
            if layout is not None:
                self._cache.move_to_end(key)
                return layout
        shapes = self.feature_shapes(*key)
        if not self.multi_stage:
            shapes = shapes[:1]
        layout = AnchorLayout(key, [grid[:fh, :fw] for grid, (fh, fw) in
                                    zip(self.grids, shapes)])
        with self._lock:
            if key not in self._cache:
                self._cache[key] = layout
                self._cached_bytes += layout.nbytes
            while self._cached_bytes > self.cache_bytes and len(self._cache) > 1:
                self._cached_bytes -= self._cache.popitem(last=False)[1].nbytes
        return layout


class RPNTargetGenerator:
    """gluoncv's ``RPNTargetGenerator`` (its Python path) on numpy, for one sample.

    Parameters are gluoncv's: ``num_sample`` anchors sampled at most, of which at most
    ``round(num_sample * pos_ratio)`` positive; an anchor is positive if its best IoU is
    ``>= pos_iou_thresh`` or it is (within float32 epsilon) some box's best anchor, negative
    if its best IoU is ``< neg_iou_thresh`` (and it is inside the image); ``stds`` divide
    the encoded box offsets. ``allowed_border`` is accepted and, as in gluoncv, not used.

    Examples
    --------
    >>> grid = np.array([[[0, 0, 7, 7, 2, 2, 9, 9]]], np.float32)   # one position, 2 anchors
    >>> layout = AnchorLayout((10, 10), [grid])
    >>> cls, box, mask = RPNTargetGenerator()(np.array([[1, 1, 8, 8]], np.float32), layout)
    >>> cls
    array([1., 1.], dtype=float32)
    >>> box
    array([[ 0.14285715,  0.14285715,  0.        ,  0.        ],
           [-0.14285715, -0.14285715,  0.        ,  0.        ]], dtype=float32)
    """

    def __init__(self, num_sample=256, pos_iou_thresh=0.7, neg_iou_thresh=0.3,
                 pos_ratio=0.5, stds=(1., 1., 1., 1.), allowed_border=0):
        if len(stds) != 4:
            raise ValueError('stds (box_norm) must have 4 values, got %d' % len(stds))
        self._num_sample = num_sample
        self._max_pos = int(round(num_sample * pos_ratio))
        self._pos_iou_thresh = pos_iou_thresh
        self._neg_iou_thresh = neg_iou_thresh
        self._eps = np.spacing(np.float32(1.0))
        self._stds = stds
        self._means = (0., 0., 0., 0.)
        self._allowed_border = allowed_border

    def __call__(self, boxes, layout, np_rng=None):
        """Targets of every anchor of ``layout`` for ground-truth ``boxes``.

        Parameters
        ----------
        boxes : numpy.ndarray
            ``(M, 4)`` corners, ``M >= 1`` (cast to float32 as gluoncv's ``mx.nd.array``).
        layout : AnchorLayout
            The anchors of the image.
        np_rng : numpy.random.RandomState or module, optional
            Where the subsampling draws from; numpy's global generator by default.

        Returns
        -------
        (numpy.ndarray, numpy.ndarray, numpy.ndarray)
            ``cls_target (N,)``: 1 positive, 0 negative, -1 ignored; ``box_target (N, 4)``:
            encoded offsets of the positives, 0 elsewhere; ``box_mask (N, 4)``: 1 for the
            positives. All float32 (gluoncv's mask is float64, its values the same).
        """
        rng = np.random if np_rng is None else np_rng
        boxes = np.asarray(boxes)
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise ValueError('boxes must have shape (M, 4), got %s' % describe(boxes))
        if len(boxes) == 0:
            raise ValueError('RPN targets need at least one ground-truth box; the label is '
                             'empty (gluoncv fails here too, in box_iou)')
        if layout.num_anchors == 0:
            raise ValueError('the %dx%d image has no anchors' % layout.size)
        boxes = boxes.astype(_F32)
        ious = layout.ious(boxes)
        samples = self._sample(ious, layout, rng)

        cls_target = (samples + 1) / 2.
        cls_target = np.where(np.abs(samples) < 1e-5, -1, cls_target)

        positive = np.flatnonzero(samples > 0.5)
        box_target = np.zeros((layout.num_anchors, 4), _F32)
        box_mask = np.zeros((layout.num_anchors, 4), _F32)
        if len(positive):
            # gluoncv's matches: argmax over the anchor's row (first maximum); an outside
            # anchor's row is all -1, so box 0
            matches = np.zeros(len(positive), np.intp)
            if len(layout.inside):
                where = np.minimum(np.searchsorted(layout.inside, positive),
                                   len(layout.inside) - 1)
                inside = layout.inside[where] == positive
                matches[inside] = np.argmax(ious[:, where[inside]], axis=0)
            box_target[positive] = self._encode(boxes[matches], layout.anchors(positive))
            box_mask[positive] = 1
        return cls_target, box_target, box_mask

    def _label(self, ious, ious_max_per_gt):
        """gluoncv's sampler labels (1, 0, -1) for the anchors of the columns of ``ious``
        (boxes by anchors): the same comparisons in the same dtypes (float32)."""
        ious_max_per_anchor = np.max(ious, axis=0)
        mask = np.logical_or.reduce((ious + self._eps) > ious_max_per_gt, axis=0)
        positive = mask | (ious_max_per_anchor >= self._pos_iou_thresh)
        negative = (ious_max_per_anchor < self._neg_iou_thresh) * (ious_max_per_anchor >= 0)
        # where(negative, -1, where(positive, 1, 0)); values exact in float32
        samples = (positive & ~negative).astype(_F32)
        samples -= negative
        return samples

    def _sample(self, ious, layout, rng):
        """gluoncv's ``RPNTargetSampler`` over all anchors, given the IoU of the inside ones.

        An anchor outside the image has IoU -1 with every box in gluoncv, so they all come
        out alike: they are labelled as one column of -1s and the label spread.
        """
        num_anchors, num_inside = layout.num_anchors, len(layout.inside)
        outside = np.full((ious.shape[0], 1), -1, _F32) if num_inside < num_anchors else None
        if num_inside:
            ious_max_per_gt = np.max(ious, axis=1, keepdims=True)
            if outside is not None:
                ious_max_per_gt = np.maximum(ious_max_per_gt, outside)
        else:
            ious_max_per_gt = outside
        if outside is None:
            samples = self._label(ious, ious_max_per_gt)
        else:
            samples = np.empty(num_anchors, _F32)
            samples.fill(self._label(outside, ious_max_per_gt)[0])
            if num_inside:
                samples[layout.inside] = self._label(ious, ious_max_per_gt)

        # subsample: the same np.random.choice calls as gluoncv, in its order
        num_pos = int((samples > 0).sum())
        if num_pos > self._max_pos:
            disable = rng.choice(np.where(samples > 0)[0], size=(num_pos - self._max_pos),
                                 replace=False)
            samples[disable] = 0
        num_neg = int((samples < 0).sum())
        max_neg = self._num_sample - min(num_pos, self._max_pos)
        if num_neg > max_neg:
            disable = rng.choice(np.where(samples < 0)[0], size=(num_neg - max_neg),
                                 replace=False)
            samples[disable] = 0
        return samples

    def _encode(self, refs, anchors):
        """gluoncv's ``NumPyNormalizedBoxCenterEncoder`` for matched pairs, float32."""
        means, stds = self._means, self._stds
        gx, gy, gw, gh = _corner_to_center(refs)
        ax, ay, aw, ah = _corner_to_center(anchors)
        with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
            t0 = ((gx - ax) / aw - means[0]) / stds[0]
            t1 = ((gy - ay) / ah - means[1]) / stds[1]
            t2 = (np.log(gw / aw) - means[2]) / stds[2]
            t3 = (np.log(gh / ah) - means[3]) / stds[3]
        return np.stack((t0, t1, t2, t3), axis=1)


def _corner_to_center(boxes):
    """gluoncv's ``NumPyBBoxCornerToCenter(split=True)``: no ``+ 1`` on the sizes."""
    xmin, ymin, xmax, ymax = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    width = xmax - xmin
    height = ymax - ymin
    return xmin + width * 0.5, ymin + height * 0.5, width, height
