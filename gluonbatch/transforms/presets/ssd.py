"""SSD presets, drop-in for ``gluoncv.data.transforms.presets.ssd`` (YOLOv3's train preset
augments alike and builds on :class:`SSDAugmentation` too).

The train augmentation is gluoncv's: colour distortion, a 50% expansion onto a canvas
filled with the mean, the SSD constrained crop, a resize with a randomly drawn
interpolation, a 50% horizontal flip, then ``to_tensor`` and ``normalize``. Here every
random number is drawn first (:mod:`gluonbatch.transforms.draws`, same generators, same
order as gluoncv), then the pixels go through one fused path
(:mod:`gluonbatch.transforms.crops`, :mod:`gluonbatch.transforms.pixels`): only the crop
of the canvas is filled, the part of it the output reads is resized in float32, and
the colour distortion, ``to_tensor`` and ``normalize`` run as one 3x4 matrix on the
output-size image while it is flipped and written CHW.

Differences from gluoncv, on purpose: images (and targets) are C-contiguous float32 numpy
arrays, not NDArrays; images equal gluoncv's within float32 rounding and the difference
between MXNet's bundled OpenCV and ``cv2`` (about 1e-4 after normalization); an image too
small for the drawn crop (a few pixels) raises ``ValueError``, where gluoncv raises
whatever its arithmetic hits. ``normalize=False`` returns the image HWC before
``to_tensor`` (pixel range, colour-distorted, float32).

Examples
--------
>>> import random
>>> import numpy as np
>>> image = np.full((60, 80, 3), 128, np.uint8)
>>> label = np.array([[10., 10., 50., 40., 1.]])
>>> random.seed(0); np.random.seed(0)
>>> img, boxes = SSDDefaultTrainTransform(96, 64)(image, label)
>>> img.shape, img.dtype, boxes.shape[1], boxes.dtype
((3, 64, 96), dtype('float32'), 5, dtype('float32'))
>>> img, boxes = SSDDefaultValTransform(96, 64)(image, label)
>>> img.shape, boxes
((3, 64, 96), array([[12.      , 10.666667, 60.      , 42.666668,  1.      ]], dtype=float32))
"""
from collections.abc import Iterable
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .. import boxes as tbox
from .. import color, crops, draws, pixels
from ..._core.checks import check_int
from ..._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from ..._core.inputs import channel_values, image_array, label_array
from ..._core.typing import ChannelValues, NDArray, PathLike
from ...targets.labels import Label
from ..deferred import DeferredImage
from ..evaluation import Image, TestInput
from ...targets.ssd import SSDTargets
from .. import evaluation
from .protocol import (Generators, check_draw, check_generators, check_image_shape,
                       global_generators, unpack_sample)

__all__ = ['SSDAugmentation', 'SSDDefaultTrainTransform', 'SSDDefaultValTransform',
           'transform_test', 'load_test']

#: The default ``mean`` and ``std``: the ImageNet statistics, as gluoncv's.
MEAN, STD = IMAGENET_MEAN, IMAGENET_STD


class SSDAugmentation:
    """The augmentation shared by gluoncv's SSD and YOLOv3 train presets, drawn and applied
    in two steps.

    A :class:`~gluonbatch.transforms.presets.Preset`: ``draw`` makes every random
    draw (a :class:`~gluonbatch.transforms.draws.SSDDraw`), ``apply`` draws nothing.
    ``augment(src, label)`` does both on the global generators and returns ``(image,
    boxes)``, the boxes float64 as gluoncv's after ``bbox.flip``; extra label columns
    (YOLOv3's mixup ratio) ride along.

    Parameters
    ----------
    width, height : int
        Output size.
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters (one number for all three channels, or three);
        ``mean * 255`` also fills the expanded canvas.
    normalize : bool
        ``True`` (gluoncv): CHW float32 after ``to_tensor`` and ``normalize``. ``False``:
        HWC float32 before them.
    deferred : bool
        Return the image as a :class:`~gluonbatch.transforms.deferred.DeferredImage`,
        whose last pass (the colour map, the mirror and the CHW split) runs when a
        gluonbatch batchify function writes it into the batch: one write instead of a
        write and a copy. ``numpy.asarray`` of it is the image.
    """

    def __init__(self, width: int, height: int, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD, normalize: bool = True,
                 deferred: bool = False) -> None:
        self._width = check_int(width, 'width', minimum=1)
        self._height = check_int(height, 'height', minimum=1)
        mean = channel_values(mean, 'mean')
        std = channel_values(std, 'std', nonzero=True)
        self._normalize = bool(normalize)
        self._deferred = bool(deferred)
        self._fill = np.asarray(mean, np.float64) * 255
        self._after = color.normalize(mean, std) if self._normalize else color.identity()

    def draw(self, image_shape: Sequence[int], label: np.ndarray,
             generators: Generators) -> draws.SSDDraw:
        """:meth:`Preset.draw <gluonbatch.transforms.presets.Preset.draw>`: every
        random draw of gluoncv's augmentation, in its order (see
        :func:`~gluonbatch.transforms.draws.draw_ssd`)."""
        shape = check_image_shape(image_shape)
        label = label_array(label)
        generators = check_generators(generators)
        return draws.draw_ssd(shape, label, generators.numpy, generators.python)

    def apply(self, sample: Sequence[Any], draw: draws.SSDDraw, generators: Generators, *,
              out: Optional[np.ndarray] = None) -> Tuple[Any, Any]:
        """:meth:`Preset.apply <gluonbatch.transforms.presets.Preset.apply>`: the
        outputs of a call for ``sample``, ``(image, label)``, as ``draw`` says (nothing is
        drawn); here ``(image, boxes)``. ``out`` (C-contiguous float32 of the output's
        shape) receives the image if given; else it is a new array, or a deferred image if
        the preset defers."""
        src, label = unpack_sample(sample, ('image', 'label'))
        check_draw(draw, draws.SSDDraw, self)
        check_generators(generators)
        return self._outputs(*self._apply(image_array(src), label_array(label), draw, out))

    def _apply(self, src, label, params, out=None):
        """The augmentation ``params`` describes, applied to the checked ``src`` (HWC
        numpy, uint8 or float32) and ``label``."""
        expand, crop = params.expand, params.crop
        chain = color.compose(color.distort(params.color), self._after)
        offset = (0, 0)
        if expand is not None:
            offset = (expand.x, expand.y)
            label = tbox.translate(label, expand.x, expand.y)
        if crop.clip:
            label = tbox.crop(label, crop.crop_box)
        crop_rect = (crop.x, crop.y, crop.width, crop.height)
        overlap = crops.crop_overlap(crop_rect, offset, src.shape)
        covered = crops.covers(overlap, crop_rect)
        # the fill (the undistorted mean, normalized if so) is 0 in the crop; the image's
        # pixels are stored minus the colour the chain maps to the fill
        shift = None if covered else crops.fill_shift(chain, color.apply(self._after,
                                                                         self._fill))
        size = (self._width, self._height)
        img = crops.resize_crop(src, crop_rect, offset, size, params.interp, shift)
        label = tbox.resize(label, (crop.width, crop.height), size)
        label = tbox.flip(label, size, flip_x=params.flip_x)
        # the last pass (colour map, mirror, layout) has one home: the deferred image's
        image = DeferredImage.from_owned(img, chain, params.flip_x, shift,
                                         chw=self._normalize)
        if self._deferred and out is None:
            return image, label
        return image.array(out), label

    def augment(self, src: Image, label: Label) -> Tuple[Any, Any]:
        """Check the inputs, draw from the global generators and apply."""
        src = image_array(src)
        label = label_array(label)
        generators = global_generators()
        return self._apply(src, label, draws.draw_ssd(src.shape, label, generators.numpy,
                                                      generators.python))

    def _outputs(self, image, boxes):
        """What a sample becomes from its augmented image and boxes: here, those two."""
        return image, boxes


class SSDDefaultTrainTransform(SSDAugmentation):
    """gluoncv's ``SSDDefaultTrainTransform``: same arguments, same draws.

    Parameters
    ----------
    width, height : int
        Output size.
    anchors : mx.nd.NDArray, optional
        The network's anchors ``(1, N, 4)``: then each sample comes with its training
        targets, ``(image, cls_targets (N,), box_targets (N, 4))`` as gluoncv's
        ``SSDTargetGenerator`` computes them; without, ``(image, label)`` with the label
        float32 ``(M, 5+)``.
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters.
    iou_thresh : float
        Matching threshold of the targets.
    box_norm : sequence of 4 floats
        The box encoding's stds.
    normalize : bool
        ``False`` returns the image HWC before ``to_tensor`` and ``normalize``.
    deferred : bool
        Return the image as a :class:`~gluonbatch.transforms.deferred.DeferredImage`
        (see :class:`SSDAugmentation`).
    **kwargs
        Passed to the target generator, as in gluoncv.
    """

    def __init__(self, width: int, height: int, anchors: np.ndarray | NDArray | None = None,
                 mean: ChannelValues = MEAN, std: ChannelValues = STD, iou_thresh: float = 0.5,
                 box_norm: Sequence[float] = (0.1, 0.1, 0.2, 0.2), normalize: bool = True,
                 deferred: bool = False, **kwargs: Any) -> None:
        super().__init__(width, height, mean, std, normalize, deferred)
        self._targets = None
        if anchors is not None:
            self._targets = SSDTargets(anchors, iou_thresh=iou_thresh, box_norm=box_norm,
                                       **kwargs)

    def __call__(self, src: Image, label: Label) -> Tuple[Any, ...]:
        """``(image, label)`` or, with anchors, ``(image, cls_targets, box_targets)``."""
        return self._outputs(*self.augment(src, label))

    def _outputs(self, img, bbox):
        if self._targets is None:
            return img, bbox.astype(np.float32)
        cls_targets, box_targets = self._targets.targets(bbox)
        return img, cls_targets, box_targets


class SSDDefaultValTransform:
    """gluoncv's ``SSDDefaultValTransform``: resize (MXNet's ``interp=9`` choice, in the
    image's uint8 or float32) then ``to_tensor`` and ``normalize``; ``(image CHW float32,
    label float32)``."""

    def __init__(self, width: int, height: int, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD) -> None:
        self._width = check_int(width, 'width', minimum=1)
        self._height = check_int(height, 'height', minimum=1)
        self._normalizer = pixels.Normalizer(channel_values(mean, 'mean'),
                                             channel_values(std, 'std', nonzero=True))

    def __call__(self, src: Image, label: Label) -> Tuple[np.ndarray, np.ndarray]:
        src = image_array(src)
        label = label_array(label)
        h, w = src.shape[:2]
        size = (self._width, self._height)
        img = pixels.resize(src, size, pixels.val_interp((w, h), size))
        bbox = tbox.resize(label, (w, h), size)
        return self._normalizer(img), bbox.astype(np.float32)


def transform_test(imgs: Image | Iterable[Image], short: float, max_size: float = 1024,
                   mean: ChannelValues = MEAN, std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``ssd.transform_test``: images resized (shorter side to ``short``,
    longer side at most ``max_size``) and normalized as the network's test-time input
    (:mod:`gluonbatch.transforms.evaluation`).

    Parameters
    ----------
    imgs : mx.nd.NDArray, mx.np.ndarray, numpy.ndarray, or an iterable of them
        HWC RGB images with 3 channels (uint8, float32 or float64); never modified.
    short : int or float
        The size the shorter side is resized to.
    max_size : int or float, default 1024
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
    >>> image = np.zeros((60, 80, 3), np.uint8)
    >>> x, img = transform_test(image, short=120)
    >>> x.shape, img.shape
    ((1, 3, 120, 160), (120, 160, 3))
    """
    return evaluation.transform_images(imgs, short, max_size, mean=mean, std=std)


def load_test(filenames: PathLike | Iterable[PathLike], short: float, max_size: float = 1024,
              mean: ChannelValues = MEAN, std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``ssd.load_test``: image files decoded (``mx.image.imread``, RGB)
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
    >>> cv2.imwrite(path, np.zeros((60, 80, 3), np.uint8))
    True
    >>> x, img = load_test(path, short=120)
    >>> x.shape, img.shape
    ((1, 3, 120, 160), (120, 160, 3))
    >>> xs, imgs = load_test([path, path], short=120)
    >>> len(xs), len(imgs)
    (2, 2)
    """
    return evaluation.load_images(filenames, short, max_size, mean=mean, std=std)
