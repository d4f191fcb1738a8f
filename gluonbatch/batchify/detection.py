"""Detection training batches with their targets computed per batch, straight into the batch.

gluoncv's SSD, YOLOv3 and CenterNet train presets compute every sample's training targets
inside the transform, and the training script's batchify function then stacks them. Here
the presets run without targets (SSD without ``anchors``, YOLOv3 without ``net``,
gluonbatch's CenterNet with ``targets=False``) and the batchify function computes the
targets of the whole batch at once, vectorized, written into the batch's own arrays: one
``cpu_shared`` allocation per output (recycled in DataLoader workers), no per-sample
target arrays. The batch is the one gluoncv's preset with targets and the script's
batchify function give:

====================================  ==============================================
batchify function                     gluoncv's preset (with targets) + batchify
====================================  ==============================================
:class:`SSDTrainBatchify`             ``SSDDefaultTrainTransform(w, h, anchors)`` +
                                      ``Tuple(Stack(), Stack(), Stack())``
:class:`YOLO3TrainBatchify`           ``YOLO3DefaultTrainTransform(w, h, net)`` +
                                      six ``Stack()`` and ``Pad(axis=0, pad_val=-1)``
:class:`CenterNetTrainBatchify`       ``CenterNetDefaultTrainTransform(w, h, ...)`` +
                                      six ``Stack()``
====================================  ==============================================

With ``normalize=True`` the images come HWC, ``uint8`` or ``float32`` in the pixel range
(the presets' ``normalize=False``) and are written CHW after MXNet's ``to_tensor`` and
``normalize``, bit for bit (:class:`~gluonbatch.batchify.NormalizedStack`).

Examples
--------
>>> import numpy as np
>>> anchors = np.array([[[8., 8., 16., 16.], [24., 24., 16., 16.]]], 'float32')
>>> batchify = SSDTrainBatchify(anchors, normalize=True)
>>> sample = (np.zeros((32, 32, 3), 'uint8'), np.array([[0., 0., 16., 16., 2.]]))
>>> images, cls_targets, box_targets = batchify([sample, sample])
>>> images.shape, cls_targets.asnumpy()
((2, 3, 32, 32), array([[3., 0.],
       [3., 0.]], dtype=float32))
"""
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np

from .._core.alloc import allocate, to_shared
from .._core.checks import check_batch, check_fields, check_int
from .._core.process import SharedByToken
from .._core.device_layout import ROWS
from .._core.typing import ChannelValues, DeviceLayout, NDArray
from ..targets.center_net import (center_net_targets, check_scale_factor,
                                output_grid, target_shapes)
from ..targets.labels import Label, label_batch
from ..targets.ssd import SSDTargets
from ..targets.yolo import YOLO3Layout
from .arrays import Stack
from .images import IMAGENET_MEAN, IMAGENET_STD, NormalizedStack

__all__ = ['SSDTrainBatchify', 'YOLO3TrainBatchify', 'CenterNetTrainBatchify']

_FLOAT32 = np.dtype(np.float32)


class _TargetBatchify:
    """Shared by the three: two-element samples, the image batch, allocated outputs."""

    #: How many outputs the batch has; each is one row per sample.
    NUM_OUTPUTS = 0

    def __init__(self, normalize: bool, mean: ChannelValues, std: ChannelValues) -> None:
        self._normalize = bool(normalize)
        self._images = NormalizedStack(mean, std) if normalize else Stack()

    @property
    def device_layout(self) -> DeviceLayout:
        """Every output has one row per sample: split on the device slices' boundaries."""
        return (ROWS,) * self.NUM_OUTPUTS

    def _split(self, data):
        """The image batch and the list of labels of checked ``(image, label)`` samples."""
        check_batch(data)
        check_fields(data, 2, type(self).__name__, 'element')
        self._check_layout(data[0][0])
        images = self._images([sample[0] for sample in data])
        # stacked as they come, the images must be CHW: their size sets the target grids
        if images.ndim != 4 or images.shape[1] != 3:
            raise ValueError('sample 0 has shape %s; expected a CHW image (3, height, width), '
                             'or %s(normalize=True) for HWC images'
                             % (tuple(images.shape[1:]), type(self).__name__))
        return images, [sample[1] for sample in data]

    def _check_layout(self, image):
        """Refuse an image laid out for the other ``normalize`` (an unmistakable one: HWC
        with ``normalize=False``, CHW with ``normalize=True``), naming both knobs."""
        shape = tuple(getattr(image, 'shape', ()))
        if len(shape) != 3 or (shape[0] == 3) == (shape[2] == 3):
            return  # not an image, or either layout: the stacking checks it
        hwc = shape[2] == 3  # a preset's normalize=False output; CHW its normalize=True's
        if hwc != self._normalize:
            name = type(self).__name__
            raise ValueError(
                'sample 0 has shape %s, an image laid out %s as a preset made with normalize=%s '
                'returns it, but %s(normalize=%s) takes images laid out %s, as a preset made '
                'with normalize=%s returns them. Make the two agree: the preset with '
                'normalize=False and %s(..., normalize=True), which normalizes as it writes '
                'the batch, or the preset with normalize=True and %s(..., normalize=False)'
                % (shape, 'HWC' if hwc else 'CHW', not hwc, name, self._normalize,
                   'HWC' if self._normalize else 'CHW', not self._normalize, name, name))


def _allocated(shapes, zeroed):
    """One float32 output per shape, all zeros if ``zeroed`` (else unwritten):
    ``(outputs, writable views)``."""
    pairs = [allocate(shape, _FLOAT32, zeroed) for shape in shapes]
    return tuple(out for out, _ in pairs), tuple(view for _, view in pairs)


class SSDTrainBatchify(SharedByToken, _TargetBatchify):
    """SSD training batches: images, ``cls_targets`` and ``box_targets`` of the batch.

    Samples are ``(image, label)`` as gluoncv's or gluonbatch's ``SSDDefaultTrainTransform``
    returns them when made without ``anchors``: a ``(3, H, W)`` image (HWC with
    ``normalize=True``) and an ``(M, 5+)`` label, every row a box. The targets are those
    of the preset made with ``anchors`` (see :mod:`gluonbatch.targets.ssd`).

    Parameters
    ----------
    anchors : mx.nd.NDArray or numpy.ndarray
        ``(1, N, 4)`` anchors in center format, as the SSD network returns them in train
        mode (``_, _, anchors = net(x)``).
    iou_thresh, box_norm
        As the preset's.
    normalize : bool, default False
        Images come HWC (``uint8`` or ``float32`` pixels) and are normalized as written.
    mean, std
        ``normalize``'s parameters, with ``normalize=True``.

    Returns
    -------
    tuple
        ``(images (B, 3, H, W), cls_targets (B, N), box_targets (B, N, 4))``, float32 but
        for images not normalized here, which keep ``Stack()``'s dtype.

    Notes
    -----
    It pickles in a few hundred bytes, its anchors as a token (MXNet's DataLoader pickles
    the batchify function into every task it sends a worker): a copy unpickled in the
    process that made it, or in one forked from it since (a DataLoader worker), uses the
    same anchors; any other process makes its own ``SSDTrainBatchify``.
    """

    NUM_OUTPUTS = 3

    #: The anchors and what is computed from them stay in the process (see Notes).
    BY_TOKEN = {'_generator': 'its anchors'}
    _generator: SSDTargets  # set by _share_by_token

    def __init__(self, anchors: np.ndarray | NDArray, iou_thresh: float = 0.5,
                 box_norm: Sequence[float] = (0.1, 0.1, 0.2, 0.2), normalize: bool = False,
                 mean: ChannelValues = IMAGENET_MEAN, std: ChannelValues = IMAGENET_STD) -> None:
        _TargetBatchify.__init__(self, normalize, mean, std)
        self._share_by_token(_generator=SSDTargets(anchors, iou_thresh, box_norm))

    def __call__(self, data: Sequence[tuple[Any, Label]]) -> tuple[NDArray, ...]:
        """Batchify ``data``, a list of ``(image, label)`` samples."""
        images, labels = self._split(data)
        return (images,) + self.targets(labels)

    def targets(self, labels: Sequence[Label]) -> tuple[NDArray, ...]:
        """``(cls_targets, box_targets)`` of a list of ``(M_i, 5+)`` labels, in shared
        memory."""
        batch = label_batch(labels)
        outputs, views = _allocated([(len(labels), self._generator.num_anchors),
                                     (len(labels), self._generator.num_anchors, 4)], True)
        valid = None if batch.real.all() else batch.real
        self._generator.compute(batch.boxes, batch.ids, valid, out=views, zeroed=True)
        return outputs


class YOLO3TrainBatchify(_TargetBatchify):
    """YOLOv3 training batches: images, the five targets and the padded ground-truth boxes.

    Samples are ``(image, label)`` as gluoncv's or gluonbatch's
    ``YOLO3DefaultTrainTransform`` returns them when made without ``net``. The targets are
    those of the preset made with ``net`` for the batch's image size, so one batchify
    function serves every size of a ``RandomTransformDataLoader``: the network's output
    grids for a size are inferred once per process from its traced graph
    (:class:`~gluonbatch.targets.yolo.YOLO3Layout`), and the function pickles
    without the network's weights.

    Parameters
    ----------
    net : gluoncv YOLOV3
        The network (initialized).
    mixup : bool, default False
        Labels carry a mix ratio in their last column (the objectness of their boxes).
    normalize, mean, std
        As for :class:`SSDTrainBatchify`.

    Returns
    -------
    tuple
        ``(images, objectness (B, R, 1), center_targets (B, R, 2), scale_targets (B, R, 2),
        weights (B, R, 2), class_targets (B, R, num_class), gt_bboxes (B, M, 4))``, float32;
        ``R`` is the number of anchor cells of all output layers, ``gt_bboxes`` the labels'
        boxes padded with -1.
    """

    NUM_OUTPUTS = 7

    def __init__(self, net: mx.gluon.Block, mixup: bool = False, normalize: bool = False,
                 mean: ChannelValues = IMAGENET_MEAN, std: ChannelValues = IMAGENET_STD) -> None:
        super().__init__(normalize, mean, std)
        self._layout = YOLO3Layout(net)
        self._mixup = bool(mixup)

    def __call__(self, data: Sequence[tuple[Any, Label]]) -> tuple[NDArray, ...]:
        """Batchify ``data``, a list of ``(image, label)`` samples of one image size."""
        images, labels = self._split(data)
        height, width = images.shape[2:]
        return (images,) + self.targets(labels, width, height)

    def targets(self, labels: Sequence[Label], width: int, height: int) -> tuple[NDArray, ...]:
        """The five targets and ``gt_bboxes`` of a list of ``(M_i, 5+)`` labels for
        ``width`` x ``height`` images, in shared memory."""
        generator = self._layout.targets(width, height, self._mixup)
        batch = label_batch(labels)
        shapes = generator.shapes(len(labels))
        # objectness, centres, scales and weights start at 0; the class targets at -1
        outputs, views = _allocated(shapes[:4], True)
        classes, classes_view = allocate(shapes[4], _FLOAT32)
        generator.compute(batch.boxes, batch.ids, batch.last if self._mixup else None,
                          out=views + (classes_view,), zeroed=True)
        return outputs + (classes, to_shared(batch.boxes, _FLOAT32))


class CenterNetTrainBatchify(_TargetBatchify):
    """CenterNet training batches: images and the five target maps of the batch.

    Samples are ``(image, boxes)`` as gluonbatch's ``CenterNetDefaultTrainTransform``
    returns them with ``targets=False``: the boxes ``(M, 5+)`` on the output grid, exactly
    as the preset hands them to its target generator. The grid is the image size divided
    by ``scale_factor`` (rounded down), as in the preset.

    Parameters
    ----------
    num_class : int
        Number of categories.
    scale_factor : number, default 4
        The network's output stride (gluoncv's scripts pass ``net.scale``, a float).
    normalize, mean, std
        As for :class:`SSDTrainBatchify`.

    Returns
    -------
    tuple
        ``(images, heatmap (B, num_class, h, w), wh_target, wh_mask, center_reg,
        center_reg_mask (B, 2, h, w))``, float32.
    """

    NUM_OUTPUTS = 6

    def __init__(self, num_class: int, scale_factor: float = 4, normalize: bool = False,
                 mean: ChannelValues = IMAGENET_MEAN, std: ChannelValues = IMAGENET_STD) -> None:
        super().__init__(normalize, mean, std)
        self._num_class = check_int(num_class, 'num_class', minimum=1)
        self._scale_factor = check_scale_factor(scale_factor)

    def __call__(self, data: Sequence[tuple[Any, np.ndarray]]) -> tuple[NDArray, ...]:
        """Batchify ``data``, a list of ``(image, boxes)`` samples."""
        images, boxes = self._split(data)
        height, width = images.shape[2:]
        return (images,) + self.targets(boxes, width, height)

    def targets(self, boxes: Sequence[np.ndarray], width: int, height: int
                ) -> tuple[NDArray, ...]:
        """The five target maps of a list of ``(M_i, 5+)`` boxes for ``width`` x
        ``height`` images, in shared memory."""
        shapes = target_shapes(len(boxes), self._num_class,
                               *output_grid(width, height, self._scale_factor))
        outputs, views = _allocated(shapes, True)
        center_net_targets(boxes, views, zeroed=True)
        return outputs
