"""Faster R-CNN and Mask R-CNN presets, drop-in for ``gluoncv.data.transforms.presets.rcnn``.

The train augmentation is gluoncv's: the shorter side resized to ``short`` (drawn with
Python's ``random.randint`` when ``short`` is a range) within ``max_size``, bilinear, a
horizontal flip with probability ``flip_p`` (0.5 for Mask R-CNN), ``to_tensor`` and
``normalize``; Mask R-CNN's polygons are resized and flipped with the boxes and rasterised.
Given the network, the RPN training targets of every anchor are made per sample, with the
same ``np.random.choice`` draws (:mod:`gluonbatch.targets.rpn`).

Images and targets are bit for bit gluoncv's: the uint8 bilinear resize is OpenCV's, as
MXNet's own, and ``to_tensor`` with ``normalize`` is one per-channel float32 table MXNet's
arithmetic fills. A float image (or one of another integer dtype, read as float32) is
resized in float32 and normalized by a 3x4 map: within 5e-5 of gluoncv's after normalizing
(``cv2``'s float resize against MXNet's bundled OpenCV's). The random draws are gluoncv's
calls on the same generators in the same order (Python's for a ``short`` range, numpy's
global one for the flips and the RPN sampling), so a run seeded the gluoncv way sees the
same samples.

Differences from gluoncv, on purpose:

- Images, boxes, targets, masks and the validation scales are C-contiguous float32 numpy
  arrays where gluoncv returns NDArrays (its RPN box masks are float64 numpy, the values
  the same).
- ``normalize=False`` (train presets) returns the image HWC after the resize and the flip,
  before ``to_tensor`` and ``normalize``: uint8 for a uint8 image, float32 otherwise.
- A bad argument raises at construction (``short``, ``max_size``, ``flip_p``, ``mean``,
  ``std``; with a network, keyword arguments the RPN target generator does not take) where
  gluoncv fails on the first sample or never. An empty label with a network and an image
  that resizes to nothing raise ``ValueError`` where gluoncv raises ``MXNetError``, after
  the same draws; Mask R-CNN's polygons are checked before any draw (no object, an object
  without polygons, a polygon that is not a numeric ``(K, 2)`` array).

This module holds the train presets; the validation presets, ``transform_test`` and
``load_test`` are :mod:`~gluonbatch.transforms.presets.rcnn_eval`'s, given here too.

Examples
--------
>>> import random
>>> import numpy as np
>>> image = np.full((60, 80, 3), 128, np.uint8)
>>> label = np.array([[10., 10., 50., 40., 1.]])
>>> random.seed(0); np.random.seed(0)
>>> img, boxes = FasterRCNNDefaultTrainTransform(short=(30, 40), max_size=60)(image, label)
>>> img.shape, img.dtype, boxes.dtype
((3, 36, 48), dtype('float32'), dtype('float32'))
>>> img, boxes, scale = FasterRCNNDefaultValTransform(short=30, max_size=60)(image, label)
>>> boxes, scale
(array([[ 5.,  5., 25., 20.,  1.]], dtype=float32), array([2.], dtype=float32))
"""
from typing import Any, NamedTuple, Sequence, Tuple

import cv2
import mxnet as mx
import numpy as np

from ..._core.checks import describe, is_real
from ..._core.inputs import image_array, label_array
from .. import boxes as tbox
from .. import draws, pixels, polygons
from ..._core.typing import ChannelValues
from ...targets.labels import Label
from ...targets.rpn import RPNTargetGenerator
from ...targets.rpn_anchors import RPNAnchors
from ..evaluation import Image
from ..polygons import Segmentation
from .protocol import (Generators, check_draw, check_generators, check_image_shape,
                       global_generators, unpack_sample)
# the evaluation side, gluoncv's names in gluoncv's module
from .rcnn_eval import (MEAN, STD, FasterRCNNDefaultValTransform, MaskRCNNDefaultValTransform,
                        Short, check_max_size, check_short, check_size, load_test,
                        make_normalizer, resize_short_within_size, transform_test)

__all__ = ['RCNNDraw', 'resize_short_within_size', 'FasterRCNNDefaultTrainTransform',
           'FasterRCNNDefaultValTransform', 'MaskRCNNDefaultTrainTransform',
           'MaskRCNNDefaultValTransform', 'transform_test', 'load_test']

class RCNNDraw(NamedTuple):
    """What an R-CNN train preset draws for one sample (the RPN sampling aside, which
    depends on the resized boxes): the ``short`` side, the resized ``width`` and
    ``height`` it gives, and whether the sample is mirrored left-right."""
    short: int
    width: int
    height: int
    flip_x: bool


def _check_probability(p, name):
    """``p`` if it is a real number in [0, 1]."""
    if not is_real(p):
        raise TypeError('%s must be a probability (a number in [0, 1]), got %r (%s)'
                        % (name, p, describe(p)))
    if not 0 <= p <= 1:
        raise ValueError('%s must be a probability in [0, 1], got %r' % (name, p))
    return p



class _RCNNTrain:
    """What the Faster and Mask R-CNN train presets share: draws, image and RPN targets."""

    _NAME = 'R-CNN'

    def __init__(self, short, max_size, net, mean, std, box_norm, num_sample,
                 pos_iou_thresh, neg_iou_thresh, pos_ratio, flip_p, ashape, multi_stage,
                 normalize, kwargs):
        check_short(short)
        check_max_size(max_size)
        self._flip_p = _check_probability(flip_p, 'flip_p')
        self._short = short
        self._max_size = max_size
        self._random_resize = isinstance(short, (tuple, list))
        self._normalize = bool(normalize)
        self._normalizer = make_normalizer(mean, std)
        self._anchors = None
        self._target_generator = None
        if net is None:
            return  # like gluoncv, no targets and the keyword arguments unused
        self._target_generator = RPNTargetGenerator(
            num_sample=num_sample, pos_iou_thresh=pos_iou_thresh,
            neg_iou_thresh=neg_iou_thresh, pos_ratio=pos_ratio, stds=box_norm, **kwargs)
        self._anchors = RPNAnchors(net, ashape=ashape, multi_stage=multi_stage)

    def draw(self, image_shape: Sequence[int], label: np.ndarray,
             generators: Generators) -> RCNNDraw:
        """:meth:`Preset.draw <gluonbatch.transforms.presets.Preset.draw>`, in
        gluoncv's order: Python's ``randint`` of the short side (a range only), then
        numpy's two flip coins (vertical with probability 0, then horizontal); the label
        decides none of them. An image that would resize to nothing raises ``ValueError``
        between the two, where gluoncv fails."""
        shape = check_image_shape(image_shape)
        label_array(label)
        return self._draw(shape, check_generators(generators))

    def _draw(self, shape, generators):
        height, width = int(shape[0]), int(shape[1])
        short = generators.python.randint(self._short[0], self._short[1]) \
            if self._random_resize else self._short
        new_w, new_h = resize_short_within_size(height, width, short, self._max_size)
        check_size(new_w, new_h, shape)
        flip_x, _ = draws.draw_flip(generators.numpy, px=self._flip_p)
        return RCNNDraw(short, new_w, new_h, flip_x)

    def _checked(self, sample, fields, draw, generators):
        """:meth:`apply`'s arguments checked: the image and label as the presets read
        them, then the sample's other fields."""
        fields = unpack_sample(sample, fields)
        check_draw(draw, RCNNDraw, self)
        check_generators(generators)
        return (image_array(fields[0]), label_array(fields[1])) + fields[2:]

    def _image_and_boxes(self, src, label, params):
        """The resized, flipped image (CHW float32, or HWC uint8 or float32, the input's
        working dtype, without normalize) and
        boxes (float64 as gluoncv's, before its final cast)."""
        height, width = src.shape[:2]
        size = (params.width, params.height)
        img = pixels.resize(src, size, pixels.BILINEAR)
        bbox = tbox.resize(label, (width, height), size)
        bbox = tbox.flip(bbox, size, flip_x=params.flip_x)
        if params.flip_x:
            img = cv2.flip(img, 1)
        img = self._normalizer(img) if self._normalize else np.ascontiguousarray(img)
        return img, bbox

    def _rpn_targets(self, bbox, params, np_rng):
        """Per level ``(cls_targets, box_targets, box_masks)`` lists for the resized boxes;
        ``np_rng``'s draws as gluoncv's sampler makes them."""
        layout = self._anchors.layout(params.height, params.width)
        targets = self._target_generator(bbox[:, :4], layout, np_rng)
        return layout.split(*targets)

    def __repr__(self):
        return '%s(short=%r, max_size=%r, net=%s, normalize=%r)' % (
            type(self).__name__, self._short, self._max_size,
            'None' if self._anchors is None else '<net>', self._normalize)


class FasterRCNNDefaultTrainTransform(_RCNNTrain):
    """Default Faster R-CNN train transform: gluoncv's, same arguments and draws.

    Parameters
    ----------
    short : int or (int, int), default 600
        Shorter side after resizing; a ``(low, high)`` pair draws it with Python's
        ``random.randint(low, high)`` per sample.
    max_size : int, default 1000
        The longer side stays within it.
    net : mxnet.gluon.Block, optional
        The Faster R-CNN network: given, the RPN targets of every anchor are returned too.
        Only its anchor generators (whose parameters must be initialized) and its
        ``features`` graph are read; it is not changed.
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters (one value stands for all channels).
    box_norm : sequence of 4 floats, default (1, 1, 1, 1)
        Divide the encoded RPN box offsets.
    num_sample, pos_iou_thresh, neg_iou_thresh, pos_ratio
        The RPN sampler's (see :class:`~gluonbatch.targets.rpn.RPNTargetGenerator`).
    flip_p : float, default 0.5
        Probability of the horizontal flip.
    ashape : int, default 128
        Size of the pre-generated anchor grid (gluoncv's train scripts pass ``net.ashape``).
    multi_stage : bool, default False
        One anchor generator per feature level (FPN networks).
    normalize : bool, default True
        ``False``: the image comes back HWC, resized and flipped, before ``to_tensor``
        and ``normalize`` (uint8 for a uint8 image, float32 for any other).
    **kwargs
        Passed to the RPN target generator (gluoncv's takes ``allowed_border``, unused).

    Returns
    -------
    tuple
        ``(image, boxes)`` without a network, else ``(image, boxes, cls_targets,
        box_targets, box_masks)`` with one ``(h, w, A)`` / ``(h, w, 4A)`` / ``(h, w, 4A)``
        array per feature level; all float32 numpy.
    """

    def __init__(self, short: Short = 600, max_size: float = 1000,
                 net: mx.gluon.Block | None = None, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD, box_norm: Sequence[float] = (1., 1., 1., 1.),
                 num_sample: int = 256, pos_iou_thresh: float = 0.7,
                 neg_iou_thresh: float = 0.3, pos_ratio: float = 0.5, flip_p: float = 0.5,
                 ashape: int = 128, multi_stage: bool = False, normalize: bool = True,
                 **kwargs: Any) -> None:
        super().__init__(short, max_size, net, mean, std, box_norm, num_sample,
                         pos_iou_thresh, neg_iou_thresh, pos_ratio, flip_p, ashape,
                         multi_stage, normalize, kwargs)

    def apply(self, sample: Sequence[Any], draw: RCNNDraw,
              generators: Generators) -> Tuple[Any, ...]:
        """:meth:`Preset.apply <gluonbatch.transforms.presets.Preset.apply>`: the
        outputs of a call for ``sample``, ``(image, label)``; with a network the RPN
        sampling draws from ``generators.numpy`` here."""
        src, label = self._checked(sample, ('image', 'label'), draw, generators)
        return self._apply(src, label, draw, generators.numpy)

    def _apply(self, src, label, params, np_rng):
        img, bbox = self._image_and_boxes(src, label, params)
        if self._anchors is None:
            return img, bbox.astype(np.float32)
        return (img, bbox.astype(np.float32)) + self._rpn_targets(bbox, params, np_rng)

    def __call__(self, src: Image, label: Label) -> Tuple[Any, ...]:
        """Transform one ``(image, label)``: an NDArray or numpy HWC image (uint8, or any
        integer or float dtype) and
        ``(N, 5+)`` boxes."""
        src = image_array(src)
        label = label_array(label)
        generators = global_generators()
        return self._apply(src, label, self._draw(src.shape, generators), generators.numpy)


class MaskRCNNDefaultTrainTransform(_RCNNTrain):
    """Default Mask R-CNN train transform: gluoncv's, same arguments and draws.

    As :class:`FasterRCNNDefaultTrainTransform` (the flip probability is fixed at 0.5, as in
    gluoncv), with the instance polygons resized and flipped with the boxes and rasterised
    at the output size.

    ``__call__(src, label, segm)`` takes ``segm``, per object a list of polygons, each a
    numpy ``(K, 2)`` array of ``(x, y)`` points (gluoncv's ``COCOInstance`` gives them).

    Returns
    -------
    tuple
        ``(image, boxes, masks)`` without a network, else ``(image, boxes, cls_targets,
        box_targets, box_masks, masks)``; ``masks`` is ``(objects, height, width)``
        float32 of 0 and 1.
    """

    def __init__(self, short: Short = 600, max_size: float = 1000,
                 net: mx.gluon.Block | None = None, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD, box_norm: Sequence[float] = (1., 1., 1., 1.),
                 num_sample: int = 256, pos_iou_thresh: float = 0.7,
                 neg_iou_thresh: float = 0.3, pos_ratio: float = 0.5, ashape: int = 128,
                 multi_stage: bool = False, normalize: bool = True, **kwargs: Any) -> None:
        super().__init__(short, max_size, net, mean, std, box_norm, num_sample,
                         pos_iou_thresh, neg_iou_thresh, pos_ratio, 0.5, ashape,
                         multi_stage, normalize, kwargs)

    def apply(self, sample: Sequence[Any], draw: RCNNDraw,
              generators: Generators) -> Tuple[Any, ...]:
        """:meth:`Preset.apply <gluonbatch.transforms.presets.Preset.apply>`: the
        outputs of a call for ``sample``, ``(image, label, segm)``; with a network the RPN
        sampling draws from ``generators.numpy`` here."""
        src, label, segm = self._checked(sample, ('image', 'label', 'segm'), draw, generators)
        polygons.check(segm)
        return self._apply(src, label, segm, draw, generators.numpy)

    def _apply(self, src, label, segm, params, np_rng):
        height, width = src.shape[:2]
        size = (params.width, params.height)
        segm = [polygons.resize(polys, (width, height), size) for polys in segm]
        segm = [polygons.flip(polys, size, flip_x=params.flip_x) for polys in segm]
        img, bbox = self._image_and_boxes(src, label, params)
        masks = polygons.to_masks(segm, size)
        if self._anchors is None:
            return img, bbox.astype(np.float32), masks
        return (img, bbox.astype(np.float32)) + self._rpn_targets(bbox, params, np_rng) + (
            masks,)

    def __call__(self, src: Image, label: Label, segm: Segmentation) -> Tuple[Any, ...]:
        """Transform one ``(image, label, segm)``."""
        src = image_array(src)
        label = label_array(label)
        polygons.check(segm)
        generators = global_generators()
        return self._apply(src, label, segm, self._draw(src.shape, generators),
                           generators.numpy)
