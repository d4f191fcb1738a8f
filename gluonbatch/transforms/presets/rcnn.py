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
import random
from typing import NamedTuple

import cv2
import numpy as np

from ..._core.checks import describe, is_int, is_real
from ..._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from ..._core.inputs import channel_values, image_array, label_array
from .. import boxes as tbox
from .. import draws, pixels, polygons
from .. import evaluation
from ..evaluation import resize_short_within_size
from ...targets.rpn import RPNAnchors, RPNTargetGenerator

__all__ = ['RCNNDraw', 'resize_short_within_size', 'FasterRCNNDefaultTrainTransform',
           'FasterRCNNDefaultValTransform', 'MaskRCNNDefaultTrainTransform',
           'MaskRCNNDefaultValTransform', 'transform_test', 'load_test']

#: The default ``mean`` and ``std``: the ImageNet statistics, as gluoncv's.
MEAN, STD = IMAGENET_MEAN, IMAGENET_STD


class RCNNDraw(NamedTuple):
    """What an R-CNN train preset draws for one sample (the RPN sampling aside, which
    depends on the resized boxes): the ``short`` side, the resized ``width`` and
    ``height`` it gives, and whether the sample is mirrored left-right."""
    short: int
    width: int
    height: int
    flip_x: bool


def _check_short(short):
    if isinstance(short, (tuple, list)):
        if len(short) != 2 or not all(is_int(s) for s in short):
            raise TypeError('short must be an int or a (low, high) pair of ints, got %r'
                            % (short,))
        if not 0 < short[0] <= short[1]:
            raise ValueError('short range must have 0 < low <= high, got %r' % (short,))
        return
    if not is_real(short):
        raise TypeError('short must be an int or a (low, high) pair of ints, got %r (%s)'
                        % (short, describe(short)))
    if not short > 0:
        raise ValueError('short must be positive, got %r' % (short,))


def _check_probability(p, name):
    """``p`` if it is a real number in [0, 1]."""
    if not is_real(p):
        raise TypeError('%s must be a probability (a number in [0, 1]), got %r (%s)'
                        % (name, p, describe(p)))
    if not 0 <= p <= 1:
        raise ValueError('%s must be a probability in [0, 1], got %r' % (name, p))
    return p


def _check_max_size(max_size):
    if not is_real(max_size):
        raise TypeError('max_size must be a number, got %r (%s)'
                        % (max_size, describe(max_size)))
    if not max_size >= 1:
        raise ValueError('max_size must be >= 1, got %r' % (max_size,))


def _make_normalizer(mean, std):
    """``to_tensor`` then ``normalize(mean, std)``: a float32 table per channel for uint8
    images, bit for bit MXNet's output (see :class:`~gluonbatch.transforms.pixels.Normalizer`)."""
    return pixels.Normalizer(channel_values(mean, 'mean'),
                             channel_values(std, 'std', nonzero=True))


def _val_resize(src, short, max_size):
    height, width = src.shape[:2]
    new_w, new_h = resize_short_within_size(height, width, short, max_size)
    _check_size(new_w, new_h, src.shape)
    return pixels.resize(src, (new_w, new_h), pixels.BILINEAR)


def _check_size(width, height, shape):
    if width < 1 or height < 1:
        raise ValueError('an image of %dx%d resizes to %dx%d: nothing is left (gluoncv fails '
                         'here too)' % (shape[1], shape[0], width, height))


class _RCNNTrain:
    """What the Faster and Mask R-CNN train presets share: draws, image and RPN targets."""

    _NAME = 'R-CNN'

    def __init__(self, short, max_size, net, mean, std, box_norm, num_sample,
                 pos_iou_thresh, neg_iou_thresh, pos_ratio, flip_p, ashape, multi_stage,
                 normalize, kwargs):
        _check_short(short)
        _check_max_size(max_size)
        self._flip_p = _check_probability(flip_p, 'flip_p')
        self._short = short
        self._max_size = max_size
        self._random_resize = isinstance(short, (tuple, list))
        self._normalize = bool(normalize)
        self._normalizer = _make_normalizer(mean, std)
        self._anchors = None
        self._target_generator = None
        if net is None:
            return  # like gluoncv, no targets and the keyword arguments unused
        self._target_generator = RPNTargetGenerator(
            num_sample=num_sample, pos_iou_thresh=pos_iou_thresh,
            neg_iou_thresh=neg_iou_thresh, pos_ratio=pos_ratio, stds=box_norm, **kwargs)
        self._anchors = RPNAnchors(net, ashape=ashape, multi_stage=multi_stage)

    def draw(self, shape, np_rng=None, py_rng=None):
        """The draws for an image of ``shape`` (``(height, width, ...)``) in gluoncv's
        order: Python's ``randint`` of the short side (a range only), then numpy's two flip
        coins (vertical with probability 0, then horizontal). An image that would resize to
        nothing raises ``ValueError`` between the two, where gluoncv fails."""
        py_rng = random if py_rng is None else py_rng
        height, width = int(shape[0]), int(shape[1])
        short = py_rng.randint(self._short[0], self._short[1]) if self._random_resize \
            else self._short
        new_w, new_h = resize_short_within_size(height, width, short, self._max_size)
        _check_size(new_w, new_h, shape)
        flip_x, _ = draws.draw_flip(np_rng, px=self._flip_p)
        return RCNNDraw(short, new_w, new_h, flip_x)

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
        numpy's draws (or ``np_rng``'s) as gluoncv's sampler makes them."""
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

    def __init__(self, short=600, max_size=1000, net=None, mean=MEAN, std=STD,
                 box_norm=(1., 1., 1., 1.), num_sample=256, pos_iou_thresh=0.7,
                 neg_iou_thresh=0.3, pos_ratio=0.5, flip_p=0.5, ashape=128,
                 multi_stage=False, normalize=True, **kwargs):
        super().__init__(short, max_size, net, mean, std, box_norm, num_sample,
                         pos_iou_thresh, neg_iou_thresh, pos_ratio, flip_p, ashape,
                         multi_stage, normalize, kwargs)

    def apply(self, src, label, params, np_rng=None):
        """The sample for drawn ``params`` (:class:`RCNNDraw`); with a network the RPN
        sampling draws from numpy's global generator (or ``np_rng``) here."""
        img, bbox = self._image_and_boxes(src, label, params)
        if self._anchors is None:
            return img, bbox.astype(np.float32)
        return (img, bbox.astype(np.float32)) + self._rpn_targets(bbox, params, np_rng)

    def __call__(self, src, label):
        """Transform one ``(image, label)``: an NDArray or numpy HWC image (uint8, or any
        integer or float dtype) and
        ``(N, 5+)`` boxes."""
        src = image_array(src)
        label = label_array(label)
        return self.apply(src, label, self.draw(src.shape))


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

    def __init__(self, short=600, max_size=1000, net=None, mean=MEAN, std=STD,
                 box_norm=(1., 1., 1., 1.), num_sample=256, pos_iou_thresh=0.7,
                 neg_iou_thresh=0.3, pos_ratio=0.5, ashape=128, multi_stage=False,
                 normalize=True, **kwargs):
        super().__init__(short, max_size, net, mean, std, box_norm, num_sample,
                         pos_iou_thresh, neg_iou_thresh, pos_ratio, 0.5, ashape,
                         multi_stage, normalize, kwargs)

    def apply(self, src, label, segm, params, np_rng=None):
        """The sample for drawn ``params`` (:class:`RCNNDraw`); see
        :meth:`FasterRCNNDefaultTrainTransform.apply`."""
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

    def __call__(self, src, label, segm):
        """Transform one ``(image, label, segm)``."""
        src = image_array(src)
        label = label_array(label)
        polygons.check(segm)
        return self.apply(src, label, segm, self.draw(src.shape))


class FasterRCNNDefaultValTransform:
    """Default Faster R-CNN validation transform: gluoncv's, same arguments.

    Returns ``(image, boxes, scale)``: the resized CHW float32 image, the boxes scaled to it
    (float32) and ``[original height / resized height]`` (float32, shape (1,)).
    """

    def __init__(self, short=600, max_size=1000, mean=MEAN, std=STD):
        _check_short(short)
        if isinstance(short, (tuple, list)):
            raise TypeError('short must be an int for validation, got %r' % (short,))
        _check_max_size(max_size)
        self._short = short
        self._max_size = max_size
        self._normalizer = _make_normalizer(mean, std)

    def __call__(self, src, label):
        """Transform one ``(image, label)``."""
        src = image_array(src)
        label = label_array(label)
        height, width = src.shape[:2]
        img = _val_resize(src, self._short, self._max_size)
        bbox = tbox.resize(label, (width, height), (img.shape[1], img.shape[0]))
        im_scale = height / float(img.shape[0])
        return (self._normalizer(img), bbox.astype(np.float32),
                np.array([im_scale], np.float32))


class MaskRCNNDefaultValTransform(FasterRCNNDefaultValTransform):
    """Default Mask R-CNN validation transform: gluoncv's, same arguments.

    ``__call__(src, label, mask)`` ignores ``label`` and ``mask`` (as gluoncv) and returns
    ``(image, im_info)``: the resized CHW float32 image and ``[height, width, resized
    height / original height]`` (float32).
    """

    def __call__(self, src, label, mask):
        """Transform one ``(image, label, mask)``."""
        src = image_array(src)
        height = src.shape[0]
        img = _val_resize(src, self._short, self._max_size)
        im_scale = float(img.shape[0]) / height
        img = self._normalizer(img)
        return img, np.array([img.shape[-2], img.shape[-1], im_scale], np.float32)


def transform_test(imgs, short=600, max_size=1000, mean=MEAN, std=STD):
    """gluoncv's ``rcnn.transform_test``: images resized (shorter side to ``short``,
    longer side at most ``max_size``) and normalized as the network's test-time input
    (:mod:`gluonbatch.transforms.evaluation`).

    Parameters
    ----------
    imgs : mx.nd.NDArray, mx.np.ndarray, numpy.ndarray, or an iterable of them
        HWC RGB images with 3 channels (uint8, float32 or float64); never modified.
    short : int or float, default 600
        The size the shorter side is resized to.
    max_size : int or float, default 1000
        The most the longer side may become.
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters (the ImageNet statistics by default).

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray) or (list, list)
        For one image (or a list of one): the ``(1, 3, H, W)`` float32 input (on
        ``cpu(0)``; an ``mx.np.ndarray`` in numpy mode) and the resized image, HWC uint8
        numpy, for drawing. For several: a list of each.

    Examples
    --------
    >>> import numpy as np
    >>> image = np.zeros((60, 120, 3), np.uint8)
    >>> x, img = transform_test(image, short=600)
    >>> x.shape, img.shape
    ((1, 3, 500, 1000), (500, 1000, 3))
    """
    return evaluation.transform_images(imgs, short, max_size, mean=mean, std=std)


def load_test(filenames, short=600, max_size=1000, mean=MEAN, std=STD):
    """gluoncv's ``rcnn.load_test``: image files decoded (``mx.image.imread``, RGB)
    and made network inputs as :func:`transform_test` makes them.

    Parameters
    ----------
    filenames : str, os.PathLike, or an iterable of them
        The image files.
    short, max_size, mean, std
        As for :func:`transform_test`.

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray) or (list, list)
        As :func:`transform_test` returns: one pair for one file (or a list of one).

    Examples
    --------
    >>> import os, tempfile
    >>> import cv2
    >>> import numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), 'image.jpg')
    >>> cv2.imwrite(path, np.zeros((60, 120, 3), np.uint8))
    True
    >>> x, img = load_test(path, short=600)
    >>> x.shape, img.shape
    ((1, 3, 500, 1000), (500, 1000, 3))
    >>> xs, imgs = load_test([path, path], short=600)
    >>> len(xs), len(imgs)
    (2, 2)
    """
    return evaluation.load_images(filenames, short, max_size, mean=mean, std=std)
