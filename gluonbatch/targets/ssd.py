"""SSD training targets in numpy, equal to gluoncv's ``SSDTargetGenerator`` as the SSD train
preset builds it (``negative_mining_ratio=-1``: every anchor is a positive or a negative).

:class:`SSDTargets` takes the anchors an SSD network returns in train mode and turns boxes
into ``(cls_targets, box_targets)``: per sample with :meth:`SSDTargets.targets` (gluoncv's
``cls_targets[0], box_targets[0]``), or for a whole batch at once with
:meth:`SSDTargets.batch` / :meth:`SSDTargets.compute`, which can write into given arrays.

What gluoncv does, and this module reproduces step by step in float32:

1. IoU of every anchor (center format turned into corners, ``x -/+ w * 0.5``) with every
   ground-truth box, as ``mx.nd.contrib.box_iou`` computes it.
2. Bipartite matching (``BipartiteMatcher(share_max=False)``): pairs taken greedily in
   order of IoU, highest first, ties in the order of the flattened ``(anchor, box)``
   matrix, each anchor and each box used once, only IoUs above ``1e-12``. An anchor left
   over that is the best anchor of its own best box (``IoU + 1e-12 >= that box's best``,
   ties to the first box) is matched to that box too.
3. Maximum matching for the anchors still unmatched: the best box if its IoU is at least
   ``iou_thresh`` (ties to the first box).
4. ``cls_targets`` is ``class + 1`` for matched anchors and 0 for the others;
   ``box_targets`` are the normalized center offsets ``((gx - ax) / aw / std0, ...,
   log(gw / aw) / std2, ...)`` of the matched box, 0 elsewhere.

For a batch of finite boxes of finite area (the usual case; padding rows count up to the
last real row of any sample), steps 1-3 run compiled (``_ssd_match.c``), a sample at a
time, and step 4 once for the batch; :func:`ssd_match` on :func:`box_iou`, in numpy, is
their definition, and matches the rest (NaN or infinite IoUs) in groups of a few samples.

Every value is bit-identical to gluoncv's. The ``log`` of the size ratios is MXNet's own
float32 ``log`` operator, called once per batch on the positives' ratios: a
correctly rounded logarithm differs from it in the last place for about one value in 200,
enough to move the losses of a training run after a few iterations.

Examples
--------
>>> import numpy as np
>>> anchors = np.array([[[50., 50., 100., 100.], [150., 150., 100., 100.]]], 'float32')
>>> gen = SSDTargets(anchors)
>>> cls_targets, box_targets = gen.targets(np.array([[0., 0., 100., 100., 4.]]))
>>> cls_targets
array([5., 0.], dtype=float32)
>>> box_targets
array([[0., 0., 0., 0.],
       [0., 0., 0., 0.]], dtype=float32)
"""
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np
from numpy.typing import ArrayLike

from .._core.alloc import legacy_mode
from .._core.native import fill_zero
from .._core.inputs import as_numpy, label_array
from .._core import compiled
from .iou import AnchorSet
from .._core.typing import NDArray
from .labels import Label, Labels, label_batch

__all__ = ['SSDTargets', 'box_iou', 'ssd_match']

_ssd_match = compiled.load('gluonbatch.targets._ssd_match')

# gluoncv's constants, as MXNet applies them to float32 arrays (scalars cast to float32)
_BIPARTITE_THRESHOLD = np.float32(1e-12)
_SHARE_EPS = np.float32(1e-12)
# IoUs computed at once in a batch (float32 elements, ~1 MiB): the samples of a batch go in
# groups of about this many anchor-box pairs, so that the temporaries stay in cache
_GROUP_IOUS = 1 << 18
# keyword arguments SSDTargetGenerator passes on to gluon.Block (no effect on the targets)
# or uses only with hard negative mining, which the SSD preset turns off
_IGNORED_KWARGS = ('neg_thresh', 'prefix', 'params')


def _mxnet_log(values):
    """MXNet's float32 ``log`` of a float32 array, as gluoncv's box encoder computes it."""
    if not values.size:
        return values.copy()
    with legacy_mode():  # the legacy operator, whatever the caller's mode
        return mx.nd.log(mx.nd.array(values, dtype=np.float32)).asnumpy()


def box_iou(anchors: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """IoU of corner boxes, float32, exactly as ``mx.nd.contrib.box_iou(anchors, boxes)``
    but laid out boxes first: ``(B, M, N)``, anchors along the contiguous axis (see
    :class:`gluonbatch.targets.iou.AnchorSet`).

    Parameters
    ----------
    anchors : numpy.ndarray
        ``(N, 4)`` float32, ``xmin, ymin, xmax, ymax``.
    boxes : numpy.ndarray
        ``(B, M, 4)`` float32.

    Returns
    -------
    numpy.ndarray
        ``(B, M, N)`` float32: intersection over union, 0 where the boxes do not overlap
        (also for empty or inverted boxes).

    Examples
    --------
    >>> a = np.array([[0, 0, 2, 2], [1, 1, 3, 3]], 'float32')
    >>> box_iou(a, a[np.newaxis])[0]
    array([[1.        , 0.14285715],
           [0.14285715, 1.        ]], dtype=float32)
    """
    return AnchorSet(anchors).iou(np.asarray(boxes, np.float32))


def _first_argmax(values, axis):
    """argmax (the first maximum, as MXNet's) and the maximum along ``axis``."""
    index = values.argmax(axis=axis)
    best = np.take_along_axis(values, np.expand_dims(index, axis), axis).squeeze(axis)
    return index, best


def _bipartite(work, col_row, col_val):
    """MXNet's ``bipartite_matching(ious, threshold=1e-12)`` on anchors x boxes: greedy
    matching in order of IoU (descending, ties in the order of the flattened
    ``(anchor, box)`` matrix), done as rounds of locally dominant pairs.

    A pair that comes first in that order among all remaining pairs of its anchor and of
    its box is taken by the greedy loop whatever else happens, and at every stage the
    remaining pair first in order is one of them, so taking all of them, round after
    round, gives the greedy result. ``work`` (B, M, N) is overwritten (-inf over used
    anchors and boxes); ``col_row``/``col_val`` (B, M), each box's first best anchor and
    its IoU, are updated in place. Returns the anchor -> box matches (B, N), -1 where
    unmatched.
    """
    batch, _, num_anchors = work.shape
    match = np.full((batch, num_anchors), -1, np.int64)
    active = col_val > _BIPARTITE_THRESHOLD
    while True:
        bs, cs = np.nonzero(active)
        if bs.size == 0:
            break
        rs = col_row[bs, cs]
        # each candidate anchor's best box among the remaining ones (first on ties)
        mutual = work[bs, :, rs].argmax(axis=1) == cs
        if not mutual.any():  # only with NaN IoUs, whose order is undefined anyway
            break
        mb, mc, mr = bs[mutual], cs[mutual], rs[mutual]
        match[mb, mr] = mc
        work[mb, :, mr] = -np.inf
        work[mb, mc, :] = -np.inf
        active[mb, mc] = False
        # boxes whose best anchor was just taken look again among the anchors left
        again = active[bs, cs] & (match[bs, rs] >= 0)
        if again.any():
            ab, ac = bs[again], cs[again]
            row, val = _first_argmax(work[ab, ac], 1)
            col_row[ab, ac] = row
            col_val[ab, ac] = val
            active[ab, ac] = val > _BIPARTITE_THRESHOLD
    return match


def ssd_match(ious: np.ndarray, iou_thresh: float = 0.5,
              valid: ArrayLike | None = None) -> np.ndarray:
    """gluoncv's SSD matching, ``CompositeMatcher([BipartiteMatcher(share_max=False),
    MaximumMatcher(iou_thresh)])``, on ``ious`` laid out ``(B, M boxes, N anchors)``
    (the transpose of gluoncv's).

    ``ious`` is overwritten. ``valid`` (B, M) bool marks real boxes; the others (padding)
    are never matched, and a sample without a real box matches nothing. Returns (B, N)
    int64 box indices, -1 for unmatched anchors.

    Examples
    --------
    >>> ious = np.array([[[0.6, 0.1, 0.0], [0.7, 0.8, 0.45]]], 'float32')
    >>> ssd_match(ious.copy())
    array([[ 0,  1, -1]])
    >>> ssd_match(ious.copy(), iou_thresh=0.5, valid=np.array([[True, False]]))
    array([[ 0, -1, -1]])
    """
    thresh = np.float32(iou_thresh)
    batch, num_boxes, _ = ious.shape
    if valid is not None:
        valid = np.asarray(valid, bool)
        if not valid.all():
            ious[~valid] = -1  # below any real IoU: never a best, never matched
    # per box: its first best anchor and that IoU
    col_row, col_max = _first_argmax(ious, 2)
    # per anchor: its best IoU and the first box with it (M - max of M - m over the ties)
    pmax = ious.max(axis=1)
    rank_type = np.uint8 if num_boxes < 256 else np.int64
    ranks = np.arange(num_boxes, 0, -1, dtype=rank_type)[:, np.newaxis]
    pargmax = num_boxes - np.multiply(ious == pmax[:, np.newaxis, :], ranks,
                                      dtype=rank_type).max(axis=1).astype(np.int64)
    # the second half of BipartiteMatcher: an anchor whose best box has no better anchor
    share = (pmax + _SHARE_EPS) >= np.take_along_axis(col_max, pargmax, 1)
    potential = np.where(share, pargmax, -1)
    maximum = np.where(pmax >= thresh, pargmax, -1)
    bipartite = _bipartite(ious, col_row, col_max)
    match = np.where(bipartite < 0, potential, bipartite)
    match = np.where(match > -0.5, match, maximum)
    if valid is not None:
        match[~valid.any(axis=1)] = -1
    return match


def _rows_used(valid, num_boxes):
    """The rows of samples up to their last real box: ``valid`` is ``(B, M)`` bool, or
    None where every row is real."""
    if valid is None:
        return num_boxes
    real = np.nonzero(valid.any(axis=0))[0]
    return int(real[-1]) + 1 if real.size else 0


class SSDTargets:
    """SSD targets of gluoncv's SSD train preset, in numpy.

    Parameters
    ----------
    anchors : mx.nd.NDArray or numpy.ndarray
        ``(1, N, 4)`` (or ``(N, 4)``) anchors in center format ``x, y, w, h``, as an SSD
        network returns them in train mode: ``_, _, anchors = net(x)``.
    iou_thresh : float
        IoU threshold of the maximum matching (gluoncv's ``iou_thresh``).
    box_norm : sequence of 4 floats
        The stds the box offsets are divided by (gluoncv's ``box_norm`` / ``stds``).
    **kwargs
        What gluoncv's preset passes on to ``SSDTargetGenerator``: ``neg_thresh`` (unused
        without hard negative mining, as in the preset), ``prefix``, ``params``.

    Attributes
    ----------
    num_anchors : int
        ``N``.
    """

    def __init__(self, anchors: np.ndarray | NDArray, iou_thresh: float = 0.5,
                 box_norm: Sequence[float] = (0.1, 0.1, 0.2, 0.2), **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(_IGNORED_KWARGS))
        if unknown:
            raise TypeError('SSDTargets got %s %s (gluoncv\'s '
                            'SSDTargetGenerator takes neg_thresh, prefix, params)'
                            % ('an unexpected keyword argument' if len(unknown) == 1
                               else 'unexpected keyword arguments', ', '.join(unknown)))
        if len(box_norm) != 4:
            raise ValueError('box_norm must have 4 values, got %r' % (box_norm,))
        anchors = as_numpy(anchors, 'anchors')
        if anchors.shape[-1:] != (4,) or anchors.ndim not in (2, 3) or (
                anchors.ndim == 3 and anchors.shape[0] != 1):
            raise ValueError('anchors must have shape (1, N, 4) or (N, 4), got %s'
                             % (anchors.shape,))
        center = np.asarray(anchors, np.float32).reshape(-1, 4)
        # BBoxCenterToCorner: x - w * 0.5, ..., x + w * 0.5 in float32
        half_w = center[:, 2] * np.float32(0.5)
        half_h = center[:, 3] * np.float32(0.5)
        self._corners = np.ascontiguousarray(np.stack(
            [center[:, 0] - half_w, center[:, 1] - half_h,
             center[:, 0] + half_w, center[:, 1] + half_h], axis=1))
        # the encoder turns those corners back into centers (not exactly the input)
        c = self._corners
        aw = c[:, 2] - c[:, 0]
        ah = c[:, 3] - c[:, 1]
        self._anchor_center = (c[:, 0] + aw * np.float32(0.5), c[:, 1] + ah * np.float32(0.5),
                               aw, ah)
        self._iou_thresh = float(iou_thresh)
        self._stds = np.array(box_norm, np.float32)
        self._anchor_set = AnchorSet(c)
        self.num_anchors = c.shape[0]

    @property
    def anchor_corners(self) -> np.ndarray:
        """``(N, 4)`` float32 anchors as corners, as gluoncv computes them (read-only)."""
        view = self._corners.view()
        view.flags.writeable = False
        return view

    def targets(self, label: Label) -> tuple[np.ndarray, np.ndarray]:
        """``(cls_targets (N,), box_targets (N, 4))`` float32 of one sample, gluoncv's
        ``cls_targets[0], box_targets[0]``.

        ``label`` is ``(M, 5+)``: ``xmin, ymin, xmax, ymax, class, ...``, every row a box
        (as in gluoncv, rows of -1 count as boxes, of class -1). With no box at all (where
        gluoncv raises) every anchor is a negative.
        """
        label = label_array(label)
        boxes = np.asarray(label[np.newaxis, :, :4], np.float32)
        ids = np.asarray(label[np.newaxis, :, 4], np.float32)
        cls_targets, box_targets = self.compute(boxes, ids)
        return cls_targets[0], box_targets[0]

    def batch(self, labels: Labels, out: tuple[np.ndarray, np.ndarray] | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
        """Targets of a batch: ``(cls_targets (B, N), box_targets (B, N, 4))`` float32.

        ``labels`` is a list of per-sample ``(M_i, 5+)`` labels (each row a box, as in
        :meth:`targets`), or one padded ``(B, M, 5+)`` array whose padding rows have a
        negative class id (gluoncv's ``Pad(pad_val=-1)``). Sample ``i`` of the result is
        ``targets`` of sample ``i`` (without its padding rows). ``out``: see
        :meth:`compute`.
        """
        batch = label_batch(labels)
        valid = None if batch.real.all() else batch.real
        return self.compute(batch.boxes, batch.ids, valid, out=out)

    def compute(self, boxes: np.ndarray, ids: np.ndarray, valid: np.ndarray | None = None,
                out: tuple[np.ndarray, np.ndarray] | None = None,
                zeroed: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The vectorized core: targets of ``B`` samples at once.

        Parameters
        ----------
        boxes : numpy.ndarray
            ``(B, M, 4)`` float32 corner boxes.
        ids : numpy.ndarray
            ``(B, M)`` float32 class ids.
        valid : numpy.ndarray, optional
            ``(B, M)`` bool, False for padding rows (never matched). Default: all real.
        out : tuple of 2 numpy.ndarray, optional
            ``(cls_targets (B, N), box_targets (B, N, 4))`` float32 arrays to write into
            (e.g. views of a batch in shared memory); every element is written.
        zeroed : bool
            ``out`` is known to be all zeros: only the positives are written.

        Returns
        -------
        tuple of numpy.ndarray
            ``(cls_targets, box_targets)``, ``out`` itself when given.
        """
        boxes = np.asarray(boxes, np.float32)
        ids = np.asarray(ids, np.float32)
        batch, num_boxes = boxes.shape[:2]
        if boxes.shape != (batch, num_boxes, 4) or ids.shape != (batch, num_boxes):
            raise ValueError('boxes must be (B, M, 4) and ids (B, M), got %s and %s'
                             % (boxes.shape, ids.shape))
        shape = (batch, self.num_anchors)
        if out is None:
            cls_out = np.empty(shape, np.float32)
            box_out = np.empty(shape + (4,), np.float32)
        else:
            cls_out, box_out = out
            if cls_out.shape != shape or box_out.shape != shape + (4,):
                raise ValueError('out must be arrays of shapes %s and %s, got %s and %s'
                                 % (shape, shape + (4,), cls_out.shape, box_out.shape))
        if not zeroed:
            fill_zero(cls_out)
            fill_zero(box_out)
        if valid is not None:
            valid = np.asarray(valid, bool)
        # Compiled, the matching holds no IoU matrix: the batch is one group. numpy's IoU
        # matrices go in groups that stay cache-sized (one sample when it alone is bigger).
        # Each group is cut to its last real box.
        anchors = self._anchor_set
        compiled = bool(_ssd_match is not None and len(anchors)
                        and anchors.finite(boxes[:, :_rows_used(valid, num_boxes)]))
        step = max(1, batch if compiled
                   else _GROUP_IOUS // max(1, num_boxes * self.num_anchors))
        positives = []  # per group: (sample, anchor, size ratios) of its positives
        for start in range(0, batch, step):
            group = slice(start, start + step)
            group_valid = None if valid is None else valid[group]
            used = _rows_used(group_valid, num_boxes)
            if group_valid is not None:
                group_valid = None if group_valid[:, :used].all() else group_valid[:, :used]
            if used:
                pb, pn, ratios = self._encode(boxes[group, :used], ids[group, :used],
                                              group_valid, cls_out[group], box_out[group],
                                              compiled)
                positives.append((pb + start, pn, ratios))
        if positives:
            # the size columns: one call of MXNet's log for the whole batch
            pb, pn, ratios = (np.concatenate(part) for part in zip(*positives))
            logs = _mxnet_log(ratios)
            box_out[pb, pn, 2] = logs[:, 0] / self._stds[2]
            box_out[pb, pn, 3] = logs[:, 1] / self._stds[3]
        return cls_out, box_out

    def _match_compiled(self, boxes, valid):
        """:func:`ssd_match` of the IoUs of ``boxes`` (finite, of finite area), computed
        and matched in C (``_ssd_match.c``): the same matches, without the IoU matrix of
        the whole group in memory."""
        batch, num_boxes = boxes.shape[:2]
        match = np.empty((batch, self.num_anchors), np.int64)
        _ssd_match.ssd_match(self._anchor_set.rows, self._anchor_set.areas,
                             np.ascontiguousarray(boxes, np.float32),
                             None if valid is None else np.ascontiguousarray(valid, bool),
                             _BIPARTITE_THRESHOLD, _SHARE_EPS, np.float32(self._iou_thresh),
                             batch, num_boxes, self.num_anchors, match)
        return match

    def _encode(self, boxes, ids, valid, cls_out, box_out, compiled):
        """Match a group of samples, compiled or (where IoUs may be nan or infinite, or
        without the compiled module) by numpy's IoU matrix, and write its positives
        (outputs already zeroed) but for the log-size columns; returns their samples,
        anchors and size ratios."""
        if compiled:
            match = self._match_compiled(boxes, valid)
        else:  # numpy's order of nan or infinite IoUs, as MXNet's
            match = ssd_match(self._anchor_set.iou(boxes), self._iou_thresh, valid)
        # the positives in C order: numpy's 2-D nonzero takes five times a flat one and divmod
        pb, pn = np.divmod(np.flatnonzero(match >= 0), match.shape[1])
        pm = match[pb, pn]
        # MultiClassEncoder: class + 1 for positives (float32), 0 for negatives
        cls_out[pb, pn] = ids[pb, pm] + np.float32(1)
        # NormalizedBoxCenterEncoder on the positives only
        g = boxes[pb, pm]
        gw = g[:, 2] - g[:, 0]
        gh = g[:, 3] - g[:, 1]
        gx = g[:, 0] + gw * np.float32(0.5)
        gy = g[:, 1] + gh * np.float32(0.5)
        ax, ay, aw, ah = (a[pn] for a in self._anchor_center)
        stds = self._stds
        box_out[pb, pn, 0] = (gx - ax) / aw / stds[0]
        box_out[pb, pn, 1] = (gy - ay) / ah / stds[1]
        return pb, pn, np.stack([gw / aw, gh / ah], axis=1)
