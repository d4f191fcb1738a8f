"""Faster R-CNN's and Mask R-CNN's evaluation side: the validation presets and the
test-time loading, which resize the shorter side to ``short`` within ``max_size`` and
normalize, and the checks of those arguments the train presets share. Import them from
:mod:`gluonbatch.transforms.presets.rcnn`, gluoncv's module, which gives them all.

Examples
--------
>>> import numpy as np
>>> image = np.full((60, 80, 3), 128, np.uint8)
>>> label = np.array([[10., 10., 50., 40., 1.]])
>>> img, boxes, scale = FasterRCNNDefaultValTransform(short=30, max_size=60)(image, label)
>>> img.shape, boxes, scale
((3, 30, 40), array([[ 5.,  5., 25., 20.,  1.]], dtype=float32), array([2.], dtype=float32))
"""
from collections.abc import Iterable
from typing import Any, TypeAlias

import numpy as np

from ..._core.checks import describe, is_int, is_real
from ..._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from ..._core.inputs import channel_values, image_array, label_array
from .. import boxes as tbox
from .. import pixels
from .. import evaluation
from ..._core.typing import ChannelValues, PathLike
from ...targets.labels import Label
from ..evaluation import Image, TestInput, resize_short_within_size

__all__ = ['FasterRCNNDefaultValTransform', 'MaskRCNNDefaultValTransform', 'transform_test',
           'load_test']

#: The default ``mean`` and ``std``: the ImageNet statistics, as gluoncv's.
MEAN, STD = IMAGENET_MEAN, IMAGENET_STD
#: The shorter side a train preset resizes to: a size, or a ``(low, high)`` range drawn from.
Short: TypeAlias = int | tuple[int, int]


def check_short(short: Short) -> None:
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


def check_max_size(max_size: float) -> None:
    if not is_real(max_size):
        raise TypeError('max_size must be a number, got %r (%s)'
                        % (max_size, describe(max_size)))
    if not max_size >= 1:
        raise ValueError('max_size must be >= 1, got %r' % (max_size,))


def make_normalizer(mean: ChannelValues, std: ChannelValues) -> pixels.Normalizer:
    """``to_tensor`` then ``normalize(mean, std)``: a float32 table per channel for uint8
    images, bit for bit MXNet's output (see :class:`~gluonbatch.transforms.pixels.Normalizer`)."""
    return pixels.Normalizer(channel_values(mean, 'mean'),
                             channel_values(std, 'std', nonzero=True))


def _val_resize(src, short, max_size):
    height, width = src.shape[:2]
    new_w, new_h = resize_short_within_size(height, width, short, max_size)
    check_size(new_w, new_h, src.shape)
    return pixels.resize(src, (new_w, new_h), pixels.BILINEAR)


def check_size(width, height, shape):
    if width < 1 or height < 1:
        raise ValueError('an image of %dx%d resizes to %dx%d: nothing is left (gluoncv fails '
                         'here too)' % (shape[1], shape[0], width, height))


class FasterRCNNDefaultValTransform:
    """Default Faster R-CNN validation transform: gluoncv's, same arguments.

    Returns ``(image, boxes, scale)``: the resized CHW float32 image, the boxes scaled to it
    (float32) and ``[original height / resized height]`` (float32, shape (1,)).
    """

    def __init__(self, short: int = 600, max_size: float = 1000, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD) -> None:
        check_short(short)
        if isinstance(short, (tuple, list)):
            raise TypeError('short must be an int for validation, got %r' % (short,))
        check_max_size(max_size)
        self._short = short
        self._max_size = max_size
        self._normalizer = make_normalizer(mean, std)

    def __call__(self, src: Image, label: Label) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    # gluoncv's Mask R-CNN call takes a third field, the masks, which Faster R-CNN's has not
    def __call__(self, src: Image, label: Any,  # type: ignore[override]
                 mask: Any) -> tuple[np.ndarray, np.ndarray]:
        """Transform one ``(image, label, mask)``."""
        src = image_array(src)
        height = src.shape[0]
        img = _val_resize(src, self._short, self._max_size)
        im_scale = float(img.shape[0]) / height
        img = self._normalizer(img)
        return img, np.array([img.shape[-2], img.shape[-1], im_scale], np.float32)


def transform_test(imgs: Image | Iterable[Image], short: float = 600, max_size: float = 1000,
                   mean: ChannelValues = MEAN, std: ChannelValues = STD) -> TestInput:
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


def load_test(filenames: PathLike | Iterable[PathLike], short: float = 600,
              max_size: float = 1000, mean: ChannelValues = MEAN,
              std: ChannelValues = STD) -> TestInput:
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
