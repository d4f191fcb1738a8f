"""CenterNet's train and validation presets, drop-in for gluoncv 0.10.5's
``gluoncv.data.transforms.presets.center_net``.

The train preset does what gluoncv's does, with the same draws from the same generators in
the same order (numpy's global generator for the flip, the crop centre and the scale;
Python's ``random`` for the order of the colour steps; the instance's own
``RandomState(123)`` for the colour factors and the lighting):

1. flip horizontally with probability 0.5 (the pixels in their dtype, the boxes in theirs);
2. pick a centre at least ``get_border(128, size)`` from the edges and a side
   ``max(h, w) * clip(randn() * 0.4 + 1, 0.6, 1.4)``, and warp that square onto the
   ``width x height`` input (``cv2.warpAffine`` in the image's uint8 or float32, bilinear,
   border 0) and the boxes onto the output grid ``width // scale_factor x height //
   scale_factor`` (with gluoncv's clipping, see :mod:`gluonbatch.transforms.affine`);
3. jitter the colours (:mod:`gluonbatch.transforms.jitter`) and normalize: here one 3x4
   matrix per sample, applied to the warped pixels by
   :func:`~gluonbatch.transforms.pixels.affine_chw` (the SSD presets' pass);
4. compute the five training targets (:mod:`gluonbatch.targets.center_net`).

Outputs equal gluoncv's: the warped pixels, the boxes and all five targets to the bit; the
image within float32 rounding of gluoncv's step-by-step float32 arithmetic (about 1e-6).
A float64 image is warped in float32 where gluoncv warps it in float64 (again about 1e-6).
They are C-contiguous float32 numpy arrays where gluoncv returns NDArrays.

Examples
--------
>>> import numpy as np
>>> image = np.random.RandomState(0).randint(0, 256, (60, 80, 3)).astype('uint8')
>>> label = np.array([[10., 10., 50., 40., 2.]])
>>> transform = CenterNetDefaultTrainTransform(64, 64, num_class=3)
>>> [out.shape for out in transform(image, label)]
[(3, 64, 64), (3, 16, 16), (2, 16, 16), (2, 16, 16), (2, 16, 16), (2, 16, 16)]
>>> image, boxes = CenterNetDefaultTrainTransform(64, 64, 3, targets=False)(image, label)
>>> boxes.shape, boxes.dtype
((1, 5), dtype('float64'))
"""
from collections.abc import Iterable
from typing import Any, NamedTuple, Sequence, Tuple

import cv2
import numpy as np

from .. import boxes as box_ops
from .. import jitter
from ..._core import scratch
from ..._core.checks import check_int
from ..._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from ..._core.inputs import channel_values, image_array, label_array
from ..affine import get_affine_transform, get_border, warp_boxes, warp_image
from ..deferred import DeferredImage
from ..draws import draw_flip
from ..pixels import Normalizer
from ..._core.typing import ChannelValues, PathLike
from ...targets.center_net import CenterNetTargetGenerator, output_grid
from ...targets.labels import Label
from ..evaluation import Image, TestInput
from .. import evaluation
from .protocol import (Generators, check_draw, check_generators, check_image_shape,
                       global_generators, unpack_sample)

__all__ = ['CenterNetDraw', 'CenterNetDefaultTrainTransform', 'CenterNetDefaultValTransform',
           'get_post_transform', 'transform_test', 'load_test']

#: The default ``mean`` and ``std``: the ImageNet statistics, as gluoncv's.
MEAN, STD = IMAGENET_MEAN, IMAGENET_STD


class CenterNetDraw(NamedTuple):
    """Everything the CenterNet train preset draws for one sample."""
    flip_x: bool
    flip_y: bool
    #: the crop centre, in the (flipped) input image
    center_x: int
    center_y: int
    #: the side of the square warped onto the input
    scale: float
    jitter: jitter.JitterParams


def _normalization(mean, std):
    """``mean`` and ``std`` checked, as the float32 ``(1, 1, 3)`` arrays gluoncv's
    arithmetic uses."""
    mean = channel_values(mean, 'mean')
    std = channel_values(std, 'std', nonzero=True)
    return (np.array(mean, np.float32).reshape(1, 1, 3),
            np.array(std, np.float32).reshape(1, 1, 3))


class CenterNetDefaultTrainTransform:
    """gluoncv's CenterNet train transform: flip, random crop-and-scale by one affine warp,
    colour jitter, normalize, and the training targets.

    A call takes ``(src, label)``: an HWC image (``mx.nd.NDArray`` or numpy; uint8, or any
    integer or float dtype, read as float32 values) and a
    numpy ``(N, 5+)`` label ``xmin, ymin, xmax, ymax, class, ...``; neither is modified.
    It returns ``(image, heatmap, wh_target, wh_mask, center_reg, center_reg_mask)``, numpy
    float32: the image ``(3, height, width)``, the heatmap ``(num_class, h, w)`` and the
    others ``(2, h, w)`` with ``h, w = height // scale_factor, width // scale_factor``.

    Parameters
    ----------
    width, height : int
        The network's input size.
    num_class : int
        Number of categories.
    scale_factor : int or float, default 4
        The input size over the output (heatmap) size, ``width // scale_factor`` by
        ``height // scale_factor`` (gluoncv's train script passes the network's ``scale``,
        a float).
    mean, std : float or array-like of 3
        Normalization, as gluoncv's (float32; one number for all three channels, or
        three).
    data_rng : numpy.random.RandomState, optional
        The colour jitter's generator; ``None`` (gluoncv's only choice) is a fresh
        ``RandomState(123)`` of this instance, so every new instance (and every DataLoader
        worker's copy of one) starts from the same state, as in gluoncv.
    targets : bool, default True
        Compute the targets; with ``False`` a call returns ``(image, boxes)``, the boxes
        ``(N, 5+)`` on the output grid in the label's dtype, exactly what the target
        generator would get (for batchify functions that compute a whole batch's targets,
        see :func:`gluonbatch.targets.center_net.center_net_targets`).
    normalize : bool, default True
        With ``False`` the image comes back HWC float32 after the colour jitter, in the
        pixel range (gluoncv's image there times 255), so that ``to_tensor`` then
        ``normalize`` of it is the normalized image, as for the other presets.
    deferred : bool, default False
        Return the image as a :class:`~gluonbatch.transforms.deferred.DeferredImage`:
        the warped pixels, whose colour jitter, normalization and CHW split run when a
        gluonbatch batchify function writes them into the batch (one write instead of a
        write and a copy). ``numpy.asarray`` of it is the image.
    **kwargs
        Accepted and kept, as gluoncv keeps them (and ignores them).
    """

    def __init__(self, width: int, height: int, num_class: int, scale_factor: float = 4,
                 mean: ChannelValues = MEAN, std: ChannelValues = STD,
                 data_rng: np.random.RandomState | None = None, targets: bool = True,
                 normalize: bool = True, deferred: bool = False, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._width = check_int(width, 'width', minimum=1)
        self._height = check_int(height, 'height', minimum=1)
        self._num_class = check_int(num_class, 'num_class', minimum=1)
        # gluoncv's train script passes the network's float scale (4.0): the grid is the
        # floor either way
        self._target_width, self._target_height = output_grid(self._width, self._height,
                                                              scale_factor)
        self._mean, self._std = _normalization(mean, std)
        self._data_rng = np.random.RandomState(123) if data_rng is None else data_rng
        self._eig_val = jitter.EIG_VAL.copy()
        self._eig_vec = jitter.EIG_VEC.copy()
        self._targets = bool(targets)
        self._normalize = bool(normalize)
        self._deferred = bool(deferred)
        self._target_generator = CenterNetTargetGenerator(
            self._num_class, self._target_width, self._target_height)

    def draw(self, image_shape: Sequence[int], label: np.ndarray,
             generators: Generators) -> CenterNetDraw:
        """:meth:`Preset.draw <gluonbatch.transforms.presets.Preset.draw>`:
        gluoncv's draws, none decided by the label. ``generators.numpy`` draws the flip,
        the centre and the scale, ``generators.python`` the order of the colour steps, and
        the instance's ``data_rng`` the colour factors and the lighting (so a draw moves
        the instance's state on).
        """
        shape = check_image_shape(image_shape)
        label_array(label, min_columns=5)
        generators = check_generators(generators)
        return self._draw(shape, generators.numpy, generators.python)

    def _draw(self, shape, np_rng, py_rng):
        h, w = int(shape[0]), int(shape[1])
        flip_x, flip_y = draw_flip(np_rng, px=0.5)
        w_border = get_border(128, w)
        h_border = get_border(128, h)
        center_x = int(np_rng.randint(low=w_border, high=w - w_border))
        center_y = int(np_rng.randint(low=h_border, high=h - h_border))
        sf = 0.4
        scale = max(h, w) * 1.0 * np.clip(np_rng.randn() * sf + 1, 1 - sf, 1 + sf)
        color = jitter.draw_jitter(self._data_rng, py_rng)
        return CenterNetDraw(bool(flip_x), bool(flip_y), center_x, center_y, float(scale),
                             color)

    def apply(self, sample: Sequence[Any], draw: CenterNetDraw,
              generators: Generators) -> Tuple[Any, ...]:
        """:meth:`Preset.apply <gluonbatch.transforms.presets.Preset.apply>`: the
        outputs of a call for ``sample``, ``(image, label)``, as ``draw`` says (nothing is
        drawn)."""
        src, label = unpack_sample(sample, ('image', 'label'))
        check_draw(draw, CenterNetDraw, self)
        check_generators(generators)
        return self._apply(image_array(src), label_array(label, min_columns=5), draw)

    def _apply(self, pixels, label, params):
        h, w = pixels.shape[:2]
        if params.flip_x or params.flip_y:
            code = -1 if (params.flip_x and params.flip_y) else (1 if params.flip_x else 0)
            pixels = cv2.flip(np.ascontiguousarray(pixels), code)
            label = box_ops.flip(label, (w, h), flip_x=params.flip_x, flip_y=params.flip_y)

        c = np.array([params.center_x, params.center_y], np.float32)  # the warps' dtype
        trans_input = get_affine_transform(c, params.scale, (self._width, self._height))
        out_w, out_h = self._target_width, self._target_height
        trans_output = get_affine_transform(c, params.scale, (out_w, out_h))
        boxes = warp_boxes(label, trans_output, (out_w, out_h))
        # warped in the image's dtype, as gluoncv warps (uint8: OpenCV's fixed point); its
        # colour pass is the deferred image's, run now into a new array unless deferred
        size = (self._width, self._height)
        if self._deferred:
            warped = warp_image(pixels, trans_input, size)  # new: the image keeps it
            image = self._deferred_image(warped, params.jitter)
        else:
            # this thread's kept array: fresh pages cost more than the pixel work
            with scratch.empty('center_net.warped', (self._height, self._width, 3),
                               pixels.dtype) as warped:
                warp_image(pixels, trans_input, size, out=warped)
                image = self._deferred_image(warped, params.jitter).array()
        if not self._targets:
            return image, boxes
        return (image,) + self._target_generator(boxes[:, :4], boxes[:, 4:5])

    def _deferred_image(self, warped, params):
        """The warped pixels (uint8 or float32) with their colour pass: the jitter, then
        normalized CHW, or in the pixel range HWC as the other presets' unnormalized images
        (so that ``to_tensor`` (/255) then ``normalize`` gives the normalized one)."""
        gs_mean = jitter.gray_mean(warped) / 255.
        if self._normalize:
            m = jitter.color_matrix(params, gs_mean, 1 / 255., self._mean, self._std,
                                    self._eig_val, self._eig_vec)
        else:
            m = jitter.color_matrix(params, gs_mean, 1 / 255., eig_val=self._eig_val,
                                    eig_vec=self._eig_vec) * 255.
        return DeferredImage.from_owned(warped, m, chw=self._normalize)

    def __call__(self, src: Image, label: Label) -> Tuple[Any, ...]:
        """Apply the transform to a training image and its label."""
        pixels = image_array(src)
        label = label_array(label, min_columns=5)
        generators = global_generators()
        return self._apply(pixels, label, self._draw(pixels.shape, generators.numpy,
                                                     generators.python))


class CenterNetDefaultValTransform:
    """gluoncv's CenterNet validation transform: the whole image warped (centred, longer
    side fitted) onto ``width x height``, normalized, and its boxes moved alike.

    A call takes ``(src, label)`` (HWC image as the train preset takes it, numpy ``(N, 4+)``
    label) and returns ``(image, boxes)``: the image ``(3, height, width)`` float32, equal
    to gluoncv's to the bit for a uint8 image (a lookup table per channel does gluoncv's
    float32 arithmetic on the 256 values) and within float32 rounding for a float one,
    and the boxes float32, clipped as gluoncv clips them. Unlike gluoncv's, it does not
    write the moved boxes into ``label``.

    Parameters
    ----------
    width, height : int
        The network's input size.
    mean, std : float or array-like of 3
        Normalization, as gluoncv's (float32; one number for all three channels, or
        three).
    """

    def __init__(self, width: int, height: int, mean: ChannelValues = MEAN,
                 std: ChannelValues = STD) -> None:
        self._width = check_int(width, 'width', minimum=1)
        self._height = check_int(height, 'height', minimum=1)
        self._mean, self._std = _normalization(mean, std)
        # gluoncv's (img.astype(np.float32) / 255. - mean) / std: a table of the 256 uint8
        # values, or the same map as a matrix on float pixels
        self._normalizer = Normalizer(self._mean.ravel(), self._std.ravel())

    def __call__(self, src: Image, label: Label) -> Tuple[np.ndarray, np.ndarray]:
        """Apply the transform to a validation image and its label."""
        pixels = image_array(src)
        label = label_array(label, min_columns=4)
        h, w = pixels.shape[:2]
        s = max(h, w) * 1.0
        c = np.array([w / 2., h / 2.], dtype=np.float32)
        trans = get_affine_transform(c, s, (self._width, self._height))
        shape = (self._height, self._width, 3)
        with scratch.empty('center_net.warped', shape, pixels.dtype) as warped:
            warp_image(pixels, trans, (self._width, self._height), out=warped)
            image = self._normalizer(warped)
        # gluoncv's trans_output is the same call, hence the same matrix
        boxes = warp_boxes(label, trans, (self._width, self._height))
        return image, boxes.astype(np.float32)


def get_post_transform(orig_w: int, orig_h: int, out_w: int, out_h: int) -> np.ndarray:
    """The 2x3 map from a prediction grid of ``out_w x out_h`` back to the original image
    of ``orig_w x orig_h`` (the inverse of the validation preset's warp, the longer side
    fitted): what gluoncv's ``train_center_net.py`` applies to predicted boxes.

    >>> (get_post_transform(200, 100, 50, 50).round(3) + 0.0).tolist()
    [[4.0, 0.0, 0.0], [0.0, 4.0, -50.0]]
    """
    center = np.array([orig_w / 2., orig_h / 2.], dtype=np.float32)
    return get_affine_transform(center, max(orig_w, orig_h) * 1.0, (out_w, out_h),
                                inverse=True)


def transform_test(imgs: Image | Iterable[Image], short: float, max_size: float = 1024,
                   mean: ChannelValues = MEAN, std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``center_net.transform_test``: images resized (shorter side to ``short``,
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
    >>> image = np.zeros((80, 60, 3), np.uint8)
    >>> x, img = transform_test(image, short=512)
    >>> x.shape, img.shape
    ((1, 3, 683, 512), (683, 512, 3))
    """
    return evaluation.transform_images(imgs, short, max_size, mean=mean, std=std)


def load_test(filenames: PathLike | Iterable[PathLike], short: float, max_size: float = 1024,
              mean: ChannelValues = MEAN, std: ChannelValues = STD) -> TestInput:
    """gluoncv's ``center_net.load_test``: image files decoded (``mx.image.imread``, RGB)
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
    >>> cv2.imwrite(path, np.zeros((80, 60, 3), np.uint8))
    True
    >>> x, img = load_test(path, short=512)
    >>> x.shape, img.shape
    ((1, 3, 683, 512), (683, 512, 3))
    >>> xs, imgs = load_test([path, path], short=512)
    >>> len(xs), len(imgs)
    (2, 2)
    """
    return evaluation.load_images(filenames, short, max_size, mean=mean, std=std)
