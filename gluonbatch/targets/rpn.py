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

The parts live in their own modules: the float32 IoU in
:mod:`gluonbatch.targets.iou` (a float64 IoU differs in a few percent of the
entries, which moves anchors across the thresholds and desyncs the draws), the anchors of
a network and their per-size layouts in :mod:`gluonbatch.targets.rpn_anchors`.
This module holds :class:`RPNTargetGenerator`, which labels, subsamples and encodes; the IoU is
computed for the anchors inside the image only (the others are ignored whatever their IoU).
:class:`RPNTargetGenerator` shows an example.
"""
from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from .._core.checks import describe
from .._core.typing import NumpyRandom
from .rpn_anchors import AnchorLayout

__all__ = ['RPNTargetGenerator']

_F32 = np.float32
# label values, also the values of gluoncv's cls_target
_IGNORED, _NEGATIVE, _POSITIVE = _F32(-1), _F32(0), _F32(1)
# an anchor within this much (one float32 ulp at 1) of a box's best IoU counts as that
# box's best anchor, as in gluoncv (the float32 spacing of 1.0)
_BEST_SLACK = np.finfo(np.float32).eps
# what an anchor crossing the image border scores against every box in gluoncv
_OUTSIDE_IOU = _F32(-1)


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

    def __init__(self, num_sample: int = 256, pos_iou_thresh: float = 0.7,
                 neg_iou_thresh: float = 0.3, pos_ratio: float = 0.5,
                 stds: Sequence[float] = (1., 1., 1., 1.), allowed_border: int = 0) -> None:
        if len(stds) != 4:
            raise ValueError('stds (box_norm) must have 4 values, got %d' % len(stds))
        self._budget = num_sample
        self._positive_budget = int(round(num_sample * pos_ratio))
        # kept as given (Python floats): compared with float32 IoUs they act in float32
        self._high = pos_iou_thresh
        self._low = neg_iou_thresh
        self._stds = stds
        self._allowed_border = allowed_border

    def __call__(self, boxes: ArrayLike, layout: AnchorLayout,
                 np_rng: NumpyRandom | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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
        labels = self._label(ious, layout)
        self._subsample(labels, rng)

        positive = np.flatnonzero(labels == _POSITIVE)
        box_target = np.zeros((layout.num_anchors, 4), _F32)
        box_mask = np.zeros((layout.num_anchors, 4), _F32)
        if len(positive):
            owner = _best_boxes(ious, layout.inside, positive)
            box_target[positive] = self._encode(boxes[owner], layout.anchors(positive))
            box_mask[positive] = 1
        return labels, box_target, box_mask

    def _classify(self, scores, box_best):
        """Labels of the anchors whose IoUs are the columns of ``scores`` (boxes by anchors),
        given every box's best IoU ``box_best`` ``(M, 1)``; float32 comparisons as gluoncv's.
        A negative verdict overrides a positive one."""
        anchor_best = scores.max(axis=0)
        is_some_best = ((scores + _BEST_SLACK) > box_best).any(axis=0)
        labels = np.full(scores.shape[1], _IGNORED)
        labels[is_some_best | (anchor_best >= self._high)] = _POSITIVE
        labels[(anchor_best < self._low) & (anchor_best >= 0)] = _NEGATIVE
        return labels

    def _label(self, ious, layout):
        """Labels of all anchors, given the IoUs ``(M, len(inside))`` of the inside ones.

        The anchors crossing the border all score :data:`_OUTSIDE_IOU` in gluoncv, so they
        share one verdict: that of a single column of those scores.
        """
        total, inside = layout.num_anchors, layout.inside
        if len(inside) == total:
            return self._classify(ious, ious.max(axis=1, keepdims=True))
        outside_scores = np.full((ious.shape[0], 1), _OUTSIDE_IOU)
        box_best = outside_scores
        if len(inside):
            box_best = np.maximum(ious.max(axis=1, keepdims=True), outside_scores)
        labels = np.full(total, self._classify(outside_scores, box_best)[0])
        if len(inside):
            labels[inside] = self._classify(ious, box_best)
        return labels

    def _subsample(self, labels, rng):
        """Cut the positives to their budget, then the negatives to what the positives
        leave of the whole budget; the anchors cut become ignored. Each cut is one
        ``rng.choice`` of the surplus among the (ascending) candidates, without replacement:
        gluoncv's draws, in its order."""
        positives_kept = _cut(labels, _POSITIVE, self._positive_budget, rng)
        _cut(labels, _NEGATIVE, self._budget - positives_kept, rng)

    def _encode(self, refs, anchors):
        """gluoncv's ``NumPyNormalizedBoxCenterEncoder`` for matched pairs, float32 (its
        means are zeros, and subtracting 0. leaves every float32 as it is, so they are left
        out)."""
        stds = self._stds
        ref_x, ref_y, ref_w, ref_h = _centres(refs)
        anc_x, anc_y, anc_w, anc_h = _centres(anchors)
        with np.errstate(divide='ignore', invalid='ignore', over='ignore'):
            codes = ((ref_x - anc_x) / anc_w / stds[0],
                     (ref_y - anc_y) / anc_h / stds[1],
                     np.log(ref_w / anc_w) / stds[2],
                     np.log(ref_h / anc_h) / stds[3])
        return np.stack(codes, axis=1)

def _cut(labels, kind, budget, rng):
    """Relabel as ignored a random surplus of the anchors labelled ``kind`` beyond
    ``budget``; returns how many of them stay."""
    candidates = np.flatnonzero(labels == kind)
    surplus = len(candidates) - budget
    if surplus > 0:
        labels[rng.choice(candidates, size=surplus, replace=False)] = _IGNORED
    return min(len(candidates), budget)


def _best_boxes(ious, inside, anchors):
    """For each of ``anchors`` (ascending indices), the box of its best IoU, the first on
    ties (gluoncv's argmax); an anchor outside the image scores -1 with every box, so it
    gets box 0."""
    owner = np.zeros(len(anchors), np.intp)
    if len(inside):
        column = np.minimum(np.searchsorted(inside, anchors), len(inside) - 1)
        found = inside[column] == anchors
        owner[found] = np.argmax(ious[:, column[found]], axis=0)
    return owner


def _centres(boxes):
    """Centre x, centre y, width, height of float32 corner boxes, gluoncv's
    ``NumPyBBoxCornerToCenter``: no ``+ 1`` on the sizes."""
    width = boxes[:, 2] - boxes[:, 0]
    height = boxes[:, 3] - boxes[:, 1]
    return boxes[:, 0] + width * 0.5, boxes[:, 1] + height * 0.5, width, height
