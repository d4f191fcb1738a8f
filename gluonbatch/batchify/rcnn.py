"""Training batchifiers for Faster R-CNN and Mask R-CNN, with cached feature-map shapes.

Each sample carries RPN targets laid out on the feature maps of *its own* image size; a
batch pads images to a common size per device slice, so the targets must be padded to the
feature-map sizes of the padded image. Those sizes come from the network's symbolic graph
(``net.features``), inferred once per distinct padded image size and cached, and the
padded targets are written straight into their shared-memory outputs.
"""
from collections.abc import Sequence
from typing import Any

import mxnet as mx
import numpy as np

from .._core.alloc import allocate, legacy_mode
from .._core.assemble import pad_slices
from .._core.checks import check_batch, check_fields, check_int, described
from .._core.shape_inference import FeatureShapes
from .._core.layout import slice_bounds
from .._core.samples import as_host_array, as_host_arrays
from .._core.device_layout import PER_DEVICE, ROWS
from .._core.wording import plural
from .._core.typing import LayoutKind
from .._core.write import write_slots

__all__ = ['FeatureShapes', 'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify']

_FLOAT32 = np.dtype(np.float32)


def _check_images(images):
    for index, image in enumerate(images):
        if image.ndim != 3:
            raise ValueError('sample %d: image has shape %s; expected (channels, height, width)'
                             % (index, image.shape))


class _TargetField:
    """One kind of RPN target (cls, box or mask): its pad value and output row width."""

    def __init__(self, name, pad_val, row_width):
        self.name, self.pad_val, self.row_width = name, pad_val, row_width

    def host_levels(self, sample_levels, index, num_levels):
        """The per-level targets of one sample as 3-d host arrays, checked."""
        if isinstance(sample_levels, (mx.nd.NDArray, np.ndarray)) or not isinstance(
                sample_levels, (list, tuple)):
            raise TypeError('sample %d: %s targets are %s; expected a list with one (height, '
                            'width, channels) array per feature level'
                            % (index, self.name, described(sample_levels)))
        if len(sample_levels) != num_levels:
            raise ValueError('sample %d has %s targets for %s; net.features has %d'
                             % (index, self.name, plural(len(sample_levels), 'feature level'),
                                num_levels))
        levels = [as_host_array(target, index) for target in sample_levels]
        for level, target in enumerate(levels):
            if target.ndim != 3 or target.shape[2] % self.row_width:
                raise ValueError('sample %d: %s target of level %d has shape %s; expected '
                                 '(height, width, channels) with channels a multiple of %d'
                                 % (index, self.name, level, target.shape, self.row_width))
        return levels


_FIELDS = (_TargetField('rpn cls', -1, 1), _TargetField('rpn box', 0, 4),
           _TargetField('rpn box-mask', 0, 4))


class FasterRCNNTrainBatchify:
    """Batchify Faster R-CNN training samples: drop-in for gluoncv's.

    Each sample is ``(image, boxes, rpn_cls_targets, rpn_box_targets, rpn_box_masks)`` as
    made by gluoncv's ``FasterRCNNDefaultTrainTransform``: a (3, H, W) image, (M, 5+) boxes
    and, per feature level, (h, w, A) / (h, w, 4A) / (h, w, 4A) targets.

    Images are padded per device slice on (H, W) with 0 and boxes with -1 (slices on
    ``np.array_split`` boundaries). Each sample's targets are padded to the feature-map size
    of its slice's padded image (cls with -1, box and mask with 0), flattened per level,
    concatenated over levels and stacked per slice.

    Parameters
    ----------
    net : mxnet.gluon.HybridBlock
        The Faster R-CNN network (its ``features`` give the feature-map sizes).
    num_shards : int, default 1
        Number of device slices, one per device.

    Returns
    -------
    tuple
        ``(images, boxes, cls_targets, box_targets, box_masks)``: images and boxes are an
        NDArray (one slice) or a list of per-device NDArrays; the targets are tuples with one
        float32 NDArray per device slice, shaped (n, anchors) and (n, anchors, 4).
        They are legacy ``mx.nd.NDArray`` in MXNet's numpy mode too: gluoncv's R-CNN
        networks take only those.

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> net = mx.gluon.nn.HybridSequential()
    >>> net.features = mx.gluon.nn.Conv2D(8, 3, strides=16, padding=1)
    >>> sample = (np.zeros((3, 64, 80), 'float32'), np.zeros((1, 5), 'float32'),
    ...           [np.ones((4, 5, 2))], [np.ones((4, 5, 8))], [np.ones((4, 5, 8))])
    >>> images, boxes, cls, box, mask = FasterRCNNTrainBatchify(net)([sample, sample])
    >>> images.shape, cls[0].shape, box[0].shape
    ((2, 3, 64, 80), (2, 40), (2, 40, 4))
    """

    NUM_ELEMENTS = 5

    def __init__(self, net: mx.gluon.Block, num_shards: int = 1) -> None:
        self._num_shards = check_int(num_shards, 'num_shards', minimum=1)
        self.feature_shapes = FeatureShapes(net)

    def __call__(self, data: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
        """Batchify ``data``, a list of 5-element samples."""
        check_batch(data)
        check_fields(data, self.NUM_ELEMENTS, type(self).__name__, 'element')
        with legacy_mode():
            return self._batchify(data, slice_bounds(len(data), self._num_shards))

    def _batchify(self, data, bounds):
        """The five outputs for already-checked samples (shared with Mask R-CNN)."""
        images = as_host_arrays([sample[0] for sample in data])
        _check_images(images)
        image_slices, _ = pad_slices(images, bounds, axis=(1, 2), pad_val=0)
        box_slices, _ = pad_slices(as_host_arrays([s[1] for s in data]), bounds, axis=0,
                                   pad_val=-1)
        targets = [[] for _ in _FIELDS]
        for (start, stop), image_slice in zip(bounds, image_slices):
            levels = self.feature_shapes(*image_slice.shape[2:])
            for outputs, field, position in zip(targets, _FIELDS, range(2, 5)):
                outputs.append(self._pad_targets(field, data, start, stop, position, levels,
                                                 image_slice.shape[2:]))
        return (self._one_or_all(image_slices), self._one_or_all(box_slices)) + tuple(
            tuple(outputs) for outputs in targets)

    def _one_or_all(self, slices):
        """gluoncv's output: the one array with ``num_shards=1``, else the list of slices."""
        return slices[0] if self._num_shards == 1 else slices

    @property
    def device_layout(self) -> tuple[LayoutKind, ...]:
        """Images and boxes: ``'per_device'`` with ``num_shards > 1``, else ``'rows'``; the
        targets are always one array per device slice."""
        padded: LayoutKind = PER_DEVICE if self._num_shards > 1 else ROWS
        target: tuple[LayoutKind] = (PER_DEVICE,)
        return (padded, padded) + target * len(_FIELDS)

    def _pad_targets(self, field, data, start, stop, position, levels, image_size):
        """One device slice's targets of one field, padded per level into one shared array."""
        samples = [field.host_levels(data[index][position], index, len(levels))
                   for index in range(start, stop)]
        channels = [target.shape[2] for target in samples[0]]
        sizes = [height * width * depth for (height, width), depth in zip(levels, channels)]
        total = sum(sizes)
        shape = (stop - start, total) if field.row_width == 1 else (
            stop - start, total // field.row_width, field.row_width)
        out, view = allocate(shape, _FLOAT32)
        flat = view.reshape(stop - start, total)
        jobs = []
        for row, (index, sample) in enumerate(zip(range(start, stop), samples)):
            offset = 0
            for level, (target, (height, width), depth, size) in enumerate(
                    zip(sample, levels, channels, sizes)):
                if target.shape[2] != depth or target.shape[0] > height or \
                        target.shape[1] > width:
                    raise ValueError(
                        'sample %d: %s target of level %d has shape %s; the padded image %s '
                        'has a %dx%d feature map with %d channels there'
                        % (index, field.name, level, target.shape, tuple(image_size), height,
                           width, depth))
                slot = flat[row, offset:offset + size].reshape(height, width, depth)
                jobs.append((slot, target, field.pad_val))
                offset += size
        write_slots(jobs, view.nbytes)
        return out


class MaskRCNNTrainBatchify(FasterRCNNTrainBatchify):
    """Batchify Mask R-CNN training samples: drop-in for gluoncv's.

    Samples are ``(image, boxes, rpn_cls_targets, rpn_box_targets, rpn_box_masks, masks)``
    as made by gluoncv's ``MaskRCNNDefaultTrainTransform``; the first five are batchified
    as in :class:`FasterRCNNTrainBatchify` and the (M, H, W) instance masks are padded on
    all three axes with 0, per device slice.

    Returns
    -------
    tuple
        ``(images, boxes, masks, cls_targets, box_targets, box_masks)``.

    Examples
    --------
    >>> import mxnet as mx, numpy as np
    >>> net = mx.gluon.nn.HybridSequential()
    >>> net.features = mx.gluon.nn.Conv2D(8, 3, strides=16, padding=1)
    >>> sample = (np.zeros((3, 64, 80), 'float32'), np.zeros((1, 5), 'float32'),
    ...           [np.ones((4, 5, 2))], [np.ones((4, 5, 8))], [np.ones((4, 5, 8))],
    ...           np.ones((1, 64, 80), 'float32'))
    >>> batch = MaskRCNNTrainBatchify(net, num_shards=2)([sample, sample])
    >>> [m.shape for m in batch[2]]
    [(1, 1, 64, 80), (1, 1, 64, 80)]
    """

    NUM_ELEMENTS = 6

    def __call__(self, data: Sequence[Sequence[Any]]) -> tuple[Any, ...]:
        """Batchify ``data``, a list of 6-element samples."""
        check_batch(data)
        check_fields(data, self.NUM_ELEMENTS, type(self).__name__, 'element')
        bounds = slice_bounds(len(data), self._num_shards)
        with legacy_mode():
            images, boxes, cls, box, mask = self._batchify(data, bounds)
            masks, _ = pad_slices(as_host_arrays([s[5] for s in data]), bounds,
                                  axis=(0, 1, 2), pad_val=0)
        return images, boxes, self._one_or_all(masks), cls, box, mask

    @property
    def device_layout(self) -> tuple[LayoutKind, ...]:
        """As Faster R-CNN's, with the masks laid out like the images."""
        layout = super().device_layout
        return layout[:2] + layout[:1] + layout[2:]
