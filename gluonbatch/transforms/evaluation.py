"""Images for a detector at test time: the one mechanism behind the presets' ``load_test``
and ``transform_test`` (:mod:`~gluonbatch.transforms.presets.ssd`,
:mod:`~gluonbatch.transforms.presets.yolo`, :mod:`~gluonbatch.transforms.presets.rcnn`,
:mod:`~gluonbatch.transforms.presets.center_net`), which differ only in their defaults.

Each image is resized so that its shorter side becomes ``short`` unless its longer side
would then pass ``max_size`` (which decides instead), both sides rounded to multiples of
``mult_base``; MXNet resizes it (bicubic, as gluoncv 0.10.5 asks for), so the pixels are
gluoncv's to the bit. ``to_tensor`` and ``normalize`` then run in float32 as MXNet's do:
the network input is gluoncv's bit for bit too. Files are decoded by MXNet's
``mx.image.imread``, as gluoncv's are.

What comes back is gluoncv's: for one image, ``(tensor, original)``, the tensor an
``(1, 3, H, W)`` float32 NDArray on ``cpu(0)`` and the original the resized image as HWC
uint8 numpy, for drawing; for several, a list of tensors and a list of originals. As in
gluoncv, a list holding a single image counts as one image. In MXNet's numpy mode
(``mx.npx.set_np()``) the tensors are ``mx.np.ndarray`` views of the same memory.

Examples
--------
>>> import numpy as np
>>> image = np.random.RandomState(0).randint(0, 256, (30, 40, 3)).astype('uint8')
>>> tensor, original = transform_images(image, short=60, max_size=100)
>>> tensor.shape, tensor.dtype, original.shape, original.dtype
((1, 3, 60, 80), <class 'numpy.float32'>, (60, 80, 3), dtype('uint8'))
>>> tensors, originals = transform_images([image, image[:20]], short=60, max_size=100)
>>> [t.shape for t in tensors]  # the second's longer side stops at max_size
[(1, 3, 60, 80), (1, 3, 50, 100)]
"""
import os
from collections.abc import Iterable
from typing import TypeAlias

import mxnet as mx
import numpy as np

from .._core.alloc import in_numpy_mode, legacy_mode
from .._core.checks import check_int, describe, is_real
from .._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from .._core.inputs import channel_values, check_image
from .._core.native import numpy_view
from .._core.typing import ChannelValues, NDArray, PathLike
from . import pixels

__all__ = ['BICUBIC', 'MXNET_DTYPES', 'resize_short_within_size', 'transform_images',
           'load_images']

#: The interpolation code of gluoncv's test-time resize (OpenCV's bicubic).
BICUBIC = 2
#: The image dtypes run as they are, as gluoncv runs them (those MXNet's resize and
#: ``to_tensor`` both take); any other integer or float dtype is read as float32 first.
MXNET_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float64))

_OUTPUT_CONTEXT = mx.cpu(0)


#: An HWC image: an MXNet array (``mx.nd`` or ``mx.np``) or a numpy array.
Image: TypeAlias = NDArray | np.ndarray
#: A test-time input: ``(tensor, resized image)`` for one image, the two lists for several.
TestInput: TypeAlias = tuple[NDArray, np.ndarray] | tuple[list[NDArray], list[np.ndarray]]


def resize_short_within_size(height: int, width: int, short: float, max_size: float,
                             mult_base: int = 1) -> tuple[int, int]:
    """``(new_width, new_height)`` of gluoncv's ``resize_short_within``: the shorter side
    scaled to ``short`` unless the longer one would then pass ``max_size`` (rounded down to
    a multiple of ``mult_base``), each side rounded half to even (``np.round``) to a
    multiple of ``mult_base``.

    >>> resize_short_within_size(375, 500, 600, 1000)
    (800, 600)
    >>> resize_short_within_size(100, 1000, 600, 1000)
    (1000, 100)
    >>> resize_short_within_size(375, 500, 416, 1024, mult_base=32)
    (544, 416)
    """
    shorter, longer = min(height, width), max(height, width)
    scale = float(short) / float(shorter)
    if np.round(scale * longer / mult_base) * mult_base > max_size:
        scale = float(np.floor(max_size / mult_base) * mult_base) / float(longer)
    return (int(np.round(width * scale / mult_base) * mult_base),
            int(np.round(height * scale / mult_base) * mult_base))


def _check_positive(value, name):
    """``value`` if it is a real number above 0."""
    if not is_real(value):
        raise TypeError('%s must be a number, got %r (%s)' % (name, value, describe(value)))
    if not value > 0:
        raise ValueError('%s must be positive, got %r' % (name, value))
    return value


class _Resizer:
    """The checked arguments of one ``transform_test`` call, applied image by image."""

    def __init__(self, short, max_size, mult_base, mean, std):
        self.short = _check_positive(short, 'short')
        self.max_size = _check_positive(max_size, 'max_size')
        self.mult_base = check_int(mult_base, 'mult_base (stride)', minimum=1)
        mean = channel_values(mean, 'mean')
        std = channel_values(std, 'std', nonzero=True)
        self.mean = np.asarray(mean, np.float32)
        self.std = np.asarray(std, np.float32)
        self.normalizer = pixels.Normalizer(mean, std)

    def __call__(self, image, index):
        """``(tensor, original)`` of one legacy HWC NDArray."""
        height, width = image.shape[:2]
        new_w, new_h = resize_short_within_size(height, width, self.short, self.max_size,
                                                self.mult_base)
        if new_w < 1 or new_h < 1:
            raise ValueError('image %d (%dx%d) resizes to %dx%d with short=%r, max_size=%r: '
                             'nothing is left; pass a larger max_size'
                             % (index, width, height, new_w, new_h, self.short,
                                self.max_size))
        resized = mx.image.imresize(image, new_w, new_h, interp=BICUBIC).asnumpy()
        tensor = mx.nd.empty((1, 3, new_h, new_w), ctx=_OUTPUT_CONTEXT, dtype=np.float32)
        chw = numpy_view(tensor, readonly=False)[0]
        if resized.dtype == np.uint8:
            original = resized
            self.normalizer(resized, out=chw)
        else:
            original = resized.astype(np.uint8)
            # MXNet's to_tensor divides in the image's dtype, then normalize runs in float32
            scale = resized.dtype.type(255)
            for k in range(3):
                plane = (resized[:, :, k] / scale).astype(np.float32, copy=False)
                np.divide(plane - self.mean[k], self.std[k], out=chw[k])
        return tensor, original


def _legacy_image(img, index):
    """``img`` checked, as a legacy ``mx.nd.NDArray`` on the CPU (numpy is copied); a
    dtype outside :data:`MXNET_DTYPES` is read as float32."""
    if not isinstance(img, (mx.nd.NDArray, np.ndarray)):  # mx.np.ndarray is an NDArray
        raise TypeError('image %d must be an mx.nd.NDArray, an mx.np.ndarray or a numpy '
                        'array (HWC, 3 channels), got %s' % (index, describe(img)))
    dtype = np.dtype(img.dtype)
    check_image(dtype, img.shape, img, 'image %d' % index)
    if dtype not in MXNET_DTYPES:
        dtype = np.dtype(np.float32)
    if isinstance(img, np.ndarray):
        return mx.nd.array(img, ctx=_OUTPUT_CONTEXT, dtype=dtype)
    if isinstance(img, mx.np.ndarray):
        img = img.as_nd_ndarray()
    return img if img.dtype == dtype else img.astype(dtype)


def _single_or_lists(pairs):
    """gluoncv's return convention: one pair alone, else a list of tensors and a list of
    originals (both empty for no image)."""
    if len(pairs) == 1:
        return pairs[0]
    return [tensor for tensor, _ in pairs], [original for _, original in pairs]


def _transform(images, resizer):
    """``(tensor, original)`` pairs of legacy NDArray images, in the caller's mode."""
    with legacy_mode():
        pairs = [resizer(image, index) for index, image in enumerate(images)]
    if in_numpy_mode():
        pairs = [(tensor.as_np_ndarray(), original) for tensor, original in pairs]
    return _single_or_lists(pairs)


def transform_images(imgs: Image | Iterable[Image], short: float, max_size: float,
                     mult_base: int = 1, mean: ChannelValues = IMAGENET_MEAN,
                     std: ChannelValues = IMAGENET_STD) -> TestInput:
    """Test-time tensors of images, gluoncv's ``transform_test``.

    Parameters
    ----------
    imgs : mx.nd.NDArray, mx.np.ndarray, numpy.ndarray, or an iterable of them
        HWC images with 3 channels (RGB); uint8, float32 and float64 are taken as
        gluoncv takes them, any other integer or float dtype is read as float32; never
        modified.
    short : int or float
        The size the shorter side is resized to.
    max_size : int or float
        The most the longer side may become; it decides the size when ``short`` would
        make the longer side pass it.
    mult_base : int, default 1
        Both sides are rounded to multiples of it (YOLOv3's ``stride``).
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters, applied after ``to_tensor`` (scaling to [0, 1]).

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray) or (list, list)
        For one image (or a list of one), the ``(1, 3, H, W)`` float32 network input on
        ``cpu(0)`` and the resized HWC uint8 image; for several, the list of inputs and
        the list of resized images. The inputs are ``mx.np.ndarray`` in numpy mode.

    Raises
    ------
    TypeError
        An image that is not an array of real numbers, or ``imgs`` not iterable.
    ValueError
        An image that is not HWC with 3 channels, bad ``short``, ``max_size``, ``mean`` or
        ``std``, or an image that would resize to nothing.

    Examples
    --------
    >>> import mxnet as mx
    >>> tensor, original = transform_images(mx.nd.zeros((50, 40, 3), dtype='uint8'),
    ...                                     short=32, max_size=100, mult_base=32)
    >>> tensor.shape, original.shape
    ((1, 3, 32, 32), (32, 32, 3))
    """
    resizer = _Resizer(short, max_size, mult_base, mean, std)
    if isinstance(imgs, (mx.nd.NDArray, np.ndarray)):
        imgs = [imgs]
    elif isinstance(imgs, (str, bytes)) or not hasattr(imgs, '__iter__'):
        raise TypeError('imgs must be an image (mx.nd.NDArray, mx.np.ndarray or numpy array) '
                        'or an iterable of images, got %s' % describe(imgs))
    images = [_legacy_image(img, index) for index, img in enumerate(imgs)]
    return _transform(images, resizer)


def _read(filename, index):
    """The file decoded by MXNet as a legacy HWC uint8 RGB NDArray."""
    if not isinstance(filename, (str, os.PathLike)):
        raise TypeError('filename %d must be a str or a path, got %s'
                        % (index, describe(filename)))
    path = os.fspath(filename)
    if not os.path.isfile(path):
        raise FileNotFoundError('image file %r does not exist (filename %d); check the path'
                                % (path, index))
    try:
        return mx.image.imread(path)
    except mx.base.MXNetError as error:
        raise ValueError('%r could not be decoded as an image (filename %d); pass a JPEG, '
                         'PNG or another format OpenCV reads' % (path, index)) from error


def load_images(filenames: PathLike | Iterable[PathLike], short: float, max_size: float,
                mult_base: int = 1, mean: ChannelValues = IMAGENET_MEAN,
                std: ChannelValues = IMAGENET_STD) -> TestInput:
    """Image files read and made test-time tensors, gluoncv's ``load_test``.

    Parameters
    ----------
    filenames : str, os.PathLike, or an iterable of them
        The image files, decoded to RGB by ``mx.image.imread``.
    short, max_size, mult_base, mean, std
        As for :func:`transform_images`.

    Returns
    -------
    (mx.nd.NDArray, numpy.ndarray) or (list, list)
        As :func:`transform_images` returns: one pair for one file (or a list of one).

    Raises
    ------
    FileNotFoundError
        A file that does not exist.
    ValueError
        A file that is not an image, or the errors of :func:`transform_images`.

    Examples
    --------
    >>> import os, tempfile
    >>> import cv2
    >>> import numpy as np
    >>> folder = tempfile.mkdtemp()
    >>> path = os.path.join(folder, 'street.jpg')
    >>> cv2.imwrite(path, np.full((300, 400, 3), 200, np.uint8))
    True
    >>> tensor, original = load_images(path, short=150, max_size=1000)
    >>> tensor.shape, original.shape
    ((1, 3, 150, 200), (150, 200, 3))
    """
    resizer = _Resizer(short, max_size, mult_base, mean, std)
    if isinstance(filenames, (str, os.PathLike)):
        filenames = [filenames]
    elif not hasattr(filenames, '__iter__'):
        raise TypeError('filenames must be a filename or an iterable of filenames, got %s'
                        % describe(filenames))
    with legacy_mode():
        images = [_read(filename, index) for index, filename in enumerate(filenames)]
    return _transform(images, resizer)
