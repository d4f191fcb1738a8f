"""YOLOv3 presets, drop-in for ``gluoncv.data.transforms.presets.yolo``.

gluoncv's YOLOv3 train preset augments exactly as its SSD one (colour distortion, expand,
constrained crop, resize with a random interpolation, flip, ``to_tensor``, ``normalize``),
so it is :class:`~gluonbatch.transforms.presets.ssd.SSDAugmentation` here too; see
:mod:`gluonbatch.transforms.presets.ssd` for what differs from gluoncv on purpose.
Mixup labels (a 6th column, the mix ratio) go through the augmentation with their extra
columns, as in gluoncv.

Examples
--------
>>> import random
>>> import numpy as np
>>> image = np.full((60, 80, 3), 128, np.uint8)
>>> label = np.array([[10., 10., 50., 40., 1., 0.7]])   # with a mixup ratio
>>> random.seed(0); np.random.seed(0)
>>> img, boxes = YOLO3DefaultTrainTransform(64, 96, mixup=True)(image, label)
>>> img.shape, boxes.shape[1], boxes[:, 5]
((3, 96, 64), 6, array([0.7], dtype=float32))
"""
from collections.abc import Iterable
from typing import Any

import mxnet as mx
import numpy as np

from ..._core.typing import ChannelValues, PathLike
from ...targets.labels import Label
from ...targets.yolo import YOLO3Targets
from ..evaluation import Image, TestInput
from .. import evaluation
from .ssd import MEAN, STD, SSDAugmentation, SSDDefaultValTransform

__all__ = ['YOLO3DefaultTrainTransform', 'YOLO3DefaultValTransform', 'transform_test',
           'load_test']


class YOLO3DefaultTrainTransform(SSDAugmentation):
    """gluoncv's ``YOLO3DefaultTrainTransform``: same arguments, same draws.

    Parameters
    ----------
    width, height : int
        Output size.
    net : mxnet.gluon.HybridBlock, optional
        The YOLOv3 network: then each sample comes with its training targets,
        ``(image, objectness, center_targets, scale_targets, weights, class_targets,
        gt_bboxes)`` as gluoncv's ``YOLOV3PrefetchTargetGenerator`` computes them; without,
        ``(image, label)`` with the label float32 ``(M, 5+)``.
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters.
    mixup : bool
        Whether labels carry a mixup ratio as their last column (for the targets).
    normalize : bool
        ``False`` returns the image HWC before ``to_tensor`` and ``normalize``.
    deferred : bool
        Return the image as a :class:`~gluonbatch.transforms.deferred.DeferredImage`
        (see :class:`~gluonbatch.transforms.presets.ssd.SSDAugmentation`).
    **kwargs
        Passed to the target generator, as in gluoncv.
    """

    def __init__(self, width: int, height: int, net: mx.gluon.Block | None = None,
                 mean: ChannelValues = MEAN, std: ChannelValues = STD, mixup: bool = False,
                 normalize: bool = True, deferred: bool = False, **kwargs: Any) -> None:
        super().__init__(width, height, mean, std, normalize, deferred)
        self._targets = None
        if net is not None:
            self._targets = YOLO3Targets(net, width, height, mixup=mixup, **kwargs)

    def __call__(self, src: Image, label: Label) -> tuple[Any, ...]:
        """``(image, label)`` or, with a network, the image and its six targets."""
        return self._outputs(*self.augment(src, label))

    def _outputs(self, img, bbox):
        if self._targets is None:
            return img, bbox.astype(np.float32)
        return (img,) + tuple(self._targets.targets(bbox))


class YOLO3DefaultValTransform(SSDDefaultValTransform):
    """gluoncv's ``YOLO3DefaultValTransform`` (the same as its SSD one): resize with
    MXNet's ``interp=9`` choice, ``to_tensor``, ``normalize``."""


def transform_test(imgs: Image | Iterable[Image], short: float = 416, max_size: float = 1024,
                   stride: int = 1, mean: ChannelValues = MEAN,
                   std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``yolo.transform_test``: images resized (shorter side to ``short``,
    longer side at most ``max_size``, both sides multiples of ``stride``) and normalized
    as the network's test-time input (:mod:`gluonbatch.transforms.evaluation`).

    Parameters
    ----------
    imgs : mx.nd.NDArray, mx.np.ndarray, numpy.ndarray, or an iterable of them
        HWC RGB images with 3 channels (uint8, float32 or float64); never modified.
    short : int or float, default 416
        The size the shorter side is resized to.
    max_size : int or float, default 1024
        The most the longer side may become.
    stride : int, default 1
        Both sides are rounded to multiples of it.
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
    >>> x, img = transform_test(image, stride=32)
    >>> x.shape, img.shape
    ((1, 3, 416, 544), (416, 544, 3))
    """
    return evaluation.transform_images(imgs, short, max_size, stride, mean=mean, std=std)


def load_test(filenames: PathLike | Iterable[PathLike], short: float = 416,
              max_size: float = 1024, stride: int = 1, mean: ChannelValues = MEAN,
              std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``yolo.load_test``: image files decoded (``mx.image.imread``, RGB)
    and made network inputs as :func:`transform_test` makes them.

    Parameters
    ----------
    filenames : str, os.PathLike, or an iterable of them
        The image files.
    short, max_size, stride, mean, std
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
    >>> x, img = load_test(path, stride=32)
    >>> x.shape, img.shape
    ((1, 3, 416, 544), (416, 544, 3))
    >>> xs, imgs = load_test([path, path], stride=32)
    >>> len(xs), len(imgs)
    (2, 2)
    """
    return evaluation.load_images(filenames, short, max_size, stride, mean=mean, std=std)
