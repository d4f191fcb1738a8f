"""YOLOv3 training targets in numpy, equal to gluoncv's ``YOLOV3PrefetchTargetGenerator`` as
gluoncv's ``YOLO3DefaultTrainTransform`` uses it.

:class:`YOLO3Targets` runs the network once, in train mode on zeros of the image size (as
gluoncv's preset does), to learn its anchors and output grids, then turns boxes into
``(objectness, center_targets, scale_targets, weights, class_targets)``: per sample with
:meth:`YOLO3Targets.targets` (gluoncv's outputs indexed ``[0]``, plus ``gt_bboxes``), or
for a whole batch at once with :meth:`YOLO3Targets.batch` / :meth:`YOLO3Targets.compute`,
which can write into given arrays.

What gluoncv does, and this module reproduces without a loop over boxes:

- Boxes are taken in order up to the first one with a negative coordinate (padding);
  the rest are ignored, valid or not.
- Each box goes to the anchor of best IoU when both are centred at the origin (ties to the
  first anchor), in the layer of that anchor, at the cell ``int(center / image size *
  grid size)``, computed in float64 (numpy 1.x promotes float32 / int there) with the cell
  index ``row * grid width + column`` taken as it comes: a centre past the right edge
  lands on the next row, one past the bottom of a layer in another layer (dropped, as the
  targets only keep each layer's own anchors), and one past the last cell raises
  ``IndexError`` (so does gluoncv).
- That cell's row of every target is written: ``center`` the fractional cell position,
  ``scale`` ``log(max(w, 1) / anchor)`` (float32 division and numpy's float32 log for
  ``w >= 1``, float64 otherwise, again numpy 1.x's promotion), ``weights`` ``2 - w * h /
  image area``, ``objectness`` 1 (or the mixup ratio, the label's last column), and a
  one-hot class row. A box written later to the same row wins, every field of the row.
  Everything else is 0, with class targets -1.

Every value is bit-identical to gluoncv's (``center_targets`` and ``weights`` are rounded
once from float64, as gluoncv's assignment into a float32 array does).
"""

from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import autograd
from numpy.typing import ArrayLike

from .._core.alloc import legacy_mode
from .._core.shape_inference import SymbolShapes
from .._core.inputs import label_array
from .._core.native import fill_zero
from .._core.process import SharedByToken
from .iou import AnchorSet
from .errors import CellOutOfRange, ClassOutOfRange
from .labels import Label, Labels, label_batch

__all__ = ['YOLO3Targets', 'YOLO3Layout']

# keyword arguments YOLOV3PrefetchTargetGenerator passes on to gluon.Block
_BLOCK_KWARGS = ('prefix', 'params')
# what a gluoncv YOLOV3 returns from a train-mode forward (without targets), in order
_TRAIN_OUTPUTS = ('detections', 'anchors', 'offsets', 'feature maps', 'box centres',
                  'box scales', 'objectness', 'class predictions')


def _probe(net, width, height):
    """The anchors, cell offsets and feature maps the network yields in train mode for a
    blank ``(1, 3, height, width)`` batch on the CPU: what gluoncv's preset runs once to
    learn the output layers' grids.

    The network may live on a GPU: its parameters are moved to the CPU for this one forward
    and put back on their devices afterwards, also when the forward raises.
    """
    params = net.collect_params()
    # the devices of the first parameter stand for all of them, as in gluoncv
    devices = next(iter(params.values())).list_ctx()
    blank = mx.nd.zeros((1, 3, height, width), ctx=mx.cpu())
    params.reset_ctx(mx.cpu())
    try:
        with autograd.train_mode():
            outputs = net(blank)
    finally:
        params.reset_ctx(devices)
    if len(outputs) != len(_TRAIN_OUTPUTS):
        raise ValueError('a YOLOv3 network returns %d outputs in train mode (%s), this one '
                         'returned %d' % (len(_TRAIN_OUTPUTS), ', '.join(_TRAIN_OUTPUTS),
                                          len(outputs)))
    return outputs[1], outputs[2], outputs[3]


class YOLO3Targets:
    """YOLOv3 prefetch targets of gluoncv's YOLOv3 train preset, in numpy.

    Parameters
    ----------
    net : gluoncv YOLOV3
        The network (initialized); only its train-mode outputs' shapes and anchors are
        used, and its ``classes``.
    width, height : int
        The network input size the targets are for.
    mixup : bool
        Whether labels carry a mix ratio in their last column (objectness is that ratio).
    **kwargs
        What gluoncv's preset passes on to ``YOLOV3PrefetchTargetGenerator`` (``prefix``,
        ``params``; no effect on the targets).

    Attributes
    ----------
    num_rows : int
        Rows of every per-sample target (cells times anchors over the layers).
    num_class : int
        Foreground classes.
    """

    def __init__(self, net: mx.gluon.Block, width: int, height: int, mixup: bool = False,
                 **kwargs: Any) -> None:
        unknown = sorted(set(kwargs) - set(_BLOCK_KWARGS))
        if unknown:
            raise TypeError('YOLO3Targets got %s %s (gluoncv\'s '
                            'YOLOV3PrefetchTargetGenerator takes prefix, params)'
                            % ('an unexpected keyword argument' if len(unknown) == 1
                               else 'unexpected keyword arguments', ', '.join(unknown)))
        self._width = int(width)
        self._height = int(height)
        self._mixup = bool(mixup)
        self.num_class = len(net.classes)
        anchors, offsets, feat_maps = _probe(net, self._width, self._height)
        self._setup([a.asnumpy() for a in anchors], [o.size // 2 for o in offsets],
                    [tuple(f.shape[2:4]) for f in feat_maps])

    @classmethod
    def from_layout(cls, anchors: Sequence[ArrayLike], cell_counts: Sequence[int],
                    grids: Sequence[tuple[int, int]], width: int, height: int, num_class: int,
                    mixup: bool = False) -> 'YOLO3Targets':
        """Targets of a network known by its output layers, without running it: per layer
        its anchors (``(A, 2)`` widths and heights), its number of cells and its
        ``(rows, columns)`` grid, for ``width`` x ``height`` images (see
        :class:`YOLO3Layout`)."""
        targets = cls.__new__(cls)
        targets._width, targets._height = int(width), int(height)
        targets._mixup = bool(mixup)
        targets.num_class = int(num_class)
        targets._setup(anchors, cell_counts, grids)
        return targets

    def _setup(self, anchors, cell_counts, grids):
        """Everything that depends only on the output layers' shapes and anchors."""
        anchors = [np.asarray(a, np.float32).reshape(-1, 2) for a in anchors]
        anchor_counts = np.array([a.shape[0] for a in anchors])
        cell_counts = np.array(cell_counts)
        layer = np.repeat(np.arange(len(anchors)), anchor_counts)      # per anchor
        anchor_start = np.concatenate([[0], np.cumsum(anchor_counts)[:-1]])
        cell_start = np.concatenate([[0], np.cumsum(cell_counts)[:-1]])
        row_start = np.concatenate([[0], np.cumsum(cell_counts * anchor_counts)[:-1]])
        self._anchors = np.concatenate(anchors)                          # (A, 2) float32
        self._grid_h = np.array([g[0] for g in grids])[layer]
        self._grid_w = np.array([g[1] for g in grids])[layer]
        self._cell_start = cell_start[layer]
        self._cell_end = (cell_start + cell_counts)[layer]
        self._stride = anchor_counts[layer]
        # output row of (cell, anchor) = cell * anchors in layer + _row_base[anchor]
        self._row_base = (row_start - cell_start * anchor_counts)[layer] + (
            np.arange(layer.size) - anchor_start[layer])
        self._num_cells = int(cell_counts.sum())
        self.num_rows = int((cell_counts * anchor_counts).sum())
        # anchors as corner boxes centred at the origin (BBoxCenterToCorner of (0, 0, w, h))
        aw, ah = self._anchors[:, 0], self._anchors[:, 1]
        zero = aw * np.float32(0)
        half_w, half_h = aw * np.float32(0.5), ah * np.float32(0.5)
        self._anchor_set = AnchorSet(np.stack([zero - half_w, zero - half_h,
                                               zero + half_w, zero + half_h], axis=1))
        # log(1 / anchor) for boxes narrower (lower) than 1: float64, as numpy 1.x computes
        # 1 / np.float32 in gluoncv, rounded once
        self._small_log = np.log(1 / self._anchors.astype(np.float64)).astype(np.float32)

    def shapes(self, batch: int | None = None) -> tuple[tuple[int, ...], ...]:
        """Shapes of ``(objectness, center, scale, weights, class)`` targets, with a
        leading batch axis when ``batch`` is given."""
        rows = self.num_rows
        lead = () if batch is None else (batch,)
        return tuple(lead + (rows, k) for k in (1, 2, 2, 2, self.num_class))

    def targets(self, label: Label) -> tuple[np.ndarray, ...]:
        """gluoncv's per-sample ``(objectness, center_targets, scale_targets, weights,
        class_targets, gt_bboxes)`` as float32 numpy arrays.

        ``label`` is ``(M, 5+)``: ``xmin, ymin, xmax, ymax, class, ...`` with the mix ratio
        last when ``mixup``. With no box at all (where gluoncv raises) every target is
        empty: objectness 0, class targets -1.
        """
        label = label_array(label)
        boxes = np.asarray(label[np.newaxis, :, :4], np.float32)
        ids = np.asarray(label[np.newaxis, :, 4], np.float32)
        ratios = np.asarray(label[np.newaxis, :, -1], np.float32) if self._mixup else None
        outputs = self.compute(boxes, ids, ratios)
        # a copy: the boxes may be a view of the caller's label, outputs never are
        return tuple(o[0] for o in outputs) + (boxes[0].copy(),)

    def batch(self, labels: Labels, out: Sequence[np.ndarray] | None = None
              ) -> tuple[np.ndarray, ...]:
        """Targets of a batch: the five targets with a leading batch axis, float32.

        ``labels`` is a list of per-sample ``(M_i, 5+)`` labels or one padded
        ``(B, M, 5+)`` array (gluoncv's ``Pad(pad_val=-1)``: a row with a negative
        coordinate ends a sample's boxes, as it does in gluoncv). Sample ``i`` of the result
        is :meth:`targets` of sample ``i``. ``out``: see :meth:`compute`.
        """
        batch = label_batch(labels)
        return self.compute(batch.boxes, batch.ids, batch.last if self._mixup else None,
                            out=out)

    def compute(self, boxes: np.ndarray, ids: np.ndarray, ratios: np.ndarray | None = None,
                out: Sequence[np.ndarray] | None = None,
                zeroed: bool = False) -> tuple[np.ndarray, ...]:
        """The vectorized core: targets of ``B`` samples at once.

        Parameters
        ----------
        boxes : numpy.ndarray
            ``(B, M, 4)`` float32 corner boxes; a row with a negative coordinate ends its
            sample's boxes.
        ids : numpy.ndarray
            ``(B, M)`` float32 class ids.
        ratios : numpy.ndarray, optional
            ``(B, M)`` float32 mix ratios (the objectness of the boxes); 1 when None.
        out : tuple of 5 numpy.ndarray, optional
            ``(objectness, center, scale, weights, class)`` float32 arrays of
            :meth:`shapes` ``(B)`` to write into (e.g. views of a batch in shared memory);
            every element is written.
        zeroed : bool
            ``out`` is known to be all zeros: the zero targets are not cleared again.

        Returns
        -------
        tuple of numpy.ndarray
            The five targets, ``out`` itself when given.
        """
        boxes = np.asarray(boxes, np.float32)
        ids = np.asarray(ids, np.float32)
        batch, num_boxes = boxes.shape[:2]
        if boxes.shape != (batch, num_boxes, 4) or ids.shape != (batch, num_boxes) or (
                ratios is not None and np.shape(ratios) != (batch, num_boxes)):
            raise ValueError('boxes must be (B, M, 4), ids and ratios (B, M); got %s, %s '
                             'and %s' % (boxes.shape, ids.shape,
                                         () if ratios is None else np.shape(ratios)))
        shapes = self.shapes(batch)
        if out is None:
            out = tuple(np.empty(shape, np.float32) for shape in shapes)
        else:
            out = tuple(out)
            if len(out) != 5 or any(o.shape != s for o, s in zip(out, shapes)):
                raise ValueError('out must be 5 arrays of shapes %s, got %s'
                                 % (shapes, [getattr(o, 'shape', None) for o in out]))
        objectness, center, scale, weights, classes = out
        if not zeroed:
            for target in (objectness, center, scale, weights):
                fill_zero(target)
        classes[...] = -1
        # boxes up to (not including) the first one with a negative coordinate
        taken = np.logical_and.accumulate((boxes >= 0).all(axis=2), axis=1)
        bs, ms = np.nonzero(taken)  # sample-major, boxes in order: the order of the writes
        if bs.size == 0:
            return out
        g = boxes[bs, ms]
        gtw = g[:, 2] - g[:, 0]
        gth = g[:, 3] - g[:, 1]
        gtx = g[:, 0] + gtw * np.float32(0.5)
        gty = g[:, 1] + gth * np.float32(0.5)
        match = self._best_anchor(gtw, gth)
        # the cell, in float64 as in gluoncv
        grid_w, grid_h = self._grid_w[match], self._grid_h[match]
        fx = gtx.astype(np.float64) / self._width * grid_w
        fy = gty.astype(np.float64) / self._height * grid_h
        if not (np.isfinite(fx).all() and np.isfinite(fy).all()):
            raise ValueError('box centres must be finite; got %s' % g[~(
                np.isfinite(fx) & np.isfinite(fy))][:1])
        # a centre this far out is past the last cell whatever its layer (and int64-safe)
        huge = (fx >= self._num_cells) | (fy >= self._num_cells)
        loc_x = np.where(huge, 0, fx).astype(np.int64)  # truncation, as int()
        loc_y = np.where(huge, 0, fy).astype(np.int64)
        index = self._cell_start[match] + loc_y * grid_w + loc_x
        beyond = huge | (index >= self._num_cells)
        if beyond.any():
            first = np.argmax(beyond)
            raise CellOutOfRange(
                'box %s (sample %d, row %d) has its centre at cell %s, past the last of the '
                '%d cells of the output layers (gluoncv raises here too)'
                % (g[first].tolist(), bs[first], ms[first],
                   'beyond' if huge[first] else index[first], self._num_cells))
        class_id = np.trunc(ids[bs, ms]).astype(np.int64)
        bad = (class_id >= self.num_class) | (class_id < -self.num_class)
        if bad.any():
            first = np.argmax(bad)
            raise ClassOutOfRange('class id %s (sample %d, row %d) is out of range for %d '
                                  'classes' % (ids[bs[first], ms[first]], bs[first],
                                               ms[first], self.num_class))
        # a write past the layer's own cells lands on another layer's anchors: dropped
        kept = index < self._cell_end[match]
        row = index * self._stride[match] + self._row_base[match]
        # the last write to a row wins: keep the last of each (sample, row)
        key = (bs * self.num_rows + row)[kept]
        order = np.nonzero(kept)[0]
        _, last_reversed = np.unique(key[::-1], return_index=True)
        pick = order[key.size - 1 - last_reversed]
        b, r, k = bs[pick], row[pick], match[pick]
        if ratios is None:
            objectness[b, r, 0] = 1
        else:
            objectness[b, r, 0] = np.asarray(ratios, np.float32)[bs[pick], ms[pick]]
        center[b, r, 0] = fx[pick] - loc_x[pick]
        center[b, r, 1] = fy[pick] - loc_y[pick]
        w, h = gtw[pick], gth[pick]
        with np.errstate(divide='ignore', invalid='ignore'):
            # max(w, 1) / anchor: float32 for w >= 1, float64 1 / anchor below
            scale[b, r, 0] = np.where(w >= 1, np.log(w / self._anchors[k, 0]),
                                      self._small_log[k, 0])
            scale[b, r, 1] = np.where(h >= 1, np.log(h / self._anchors[k, 1]),
                                      self._small_log[k, 1])
        weights[b, r, :] = (2.0 - (w * h).astype(np.float64) / self._width / self._height
                            )[:, np.newaxis]
        classes[b, r, :] = 0
        classes[b, r, class_id[pick]] = 1
        return out

    def _best_anchor(self, gtw, gth):
        """Index of the anchor of best IoU with each (w, h) box, both centred at the origin
        (MXNet's float32 ``box_iou``; the first anchor on ties)."""
        # gluoncv shifts the boxes as (-0.5 * w, -0.5 * h, 0.5 * w, 0.5 * h)
        half_w, half_h = gtw * np.float32(0.5), gth * np.float32(0.5)
        shifted = np.stack([np.float32(-0.5) * gtw, np.float32(-0.5) * gth, half_w, half_h],
                           axis=1)
        return self._anchor_set.iou(shifted).argmax(axis=1)


class YOLO3Layout(SharedByToken):
    """What YOLOv3 targets need of a network, for every image size, without the network.

    Made once from the network: its anchors (one train-mode forward at a small size) and
    its train-mode graph, traced into a symbol whose output grids are inferred once per
    image size and process. It pickles without the network's weights, so a batchify
    function holding it goes to DataLoader workers cheaply.

    Parameters
    ----------
    net : gluoncv YOLOV3
        The network (initialized).
    """

    #: Image side of the one forward that reads the anchors (any multiple of 32 works).
    PROBE_SIZE = 64

    #: Most image sizes whose targets a process keeps (random shapes use about ten).
    MAX_SIZES = 256

    #: The targets per image size: a per-process cache, found again by the token.
    BY_TOKEN = {'_by_size': lambda: _TargetsBySize()}
    _by_size: '_TargetsBySize'

    def __init__(self, net: mx.gluon.Block) -> None:
        with legacy_mode():  # gluoncv's networks run as legacy NDArrays and symbols only
            anchors, _, _ = _probe(net, self.PROBE_SIZE, self.PROBE_SIZE)
            with autograd.train_mode():
                traced = net(mx.sym.var('data'))
        self.num_class = len(net.classes)
        self.anchors = tuple(a.asnumpy().reshape(-1, 2).astype(np.float32) for a in anchors)
        layers = len(self.anchors)
        # the traced outputs are grouped as the forward's: offsets and feature maps per layer
        offsets, feat_maps = list(traced[2]), list(traced[3])
        if len(offsets) != layers or len(feat_maps) != layers:
            raise ValueError('the traced network has %d offset and %d feature-map outputs for '
                             '%d anchor layers' % (len(offsets), len(feat_maps), layers))
        self._shapes = SymbolShapes(offsets + feat_maps,
                                    what='the output grids of the YOLOv3 network')
        self._share_by_token(_by_size=_TargetsBySize())

    def targets(self, width: int, height: int, mixup: bool = False) -> YOLO3Targets:
        """A :class:`YOLO3Targets` for ``width`` x ``height`` images, made once per size
        in each process (every copy of this layout there shares them)."""
        key = (int(width), int(height), bool(mixup))
        found = self._by_size.get(key)
        if found is None:
            shapes = self._shapes(height, width)
            layers = len(self.anchors)
            cell_counts = [int(np.prod(shape)) // 2 for shape in shapes[:layers]]
            grids = [(shape[2], shape[3]) for shape in shapes[layers:]]
            found = YOLO3Targets.from_layout(self.anchors, cell_counts, grids, key[0], key[1],
                                             self.num_class, key[2])
            if len(self._by_size) >= self.MAX_SIZES:
                self._by_size.clear()
            self._by_size[key] = found
        return found


class _TargetsBySize(dict):
    """``(width, height, mixup)`` -> :class:`YOLO3Targets` (a dict that weak references
    can point to)."""
