"""Images into a batch, normalized as they are written.

gluoncv's presets end with ``to_tensor`` (HWC pixels to CHW float32 in [0, 1]) and
``normalize`` (minus ``mean``, over ``std``, per channel), each a pass over the image, and
the batchify function then copies the float image once more. :class:`NormalizedStack`
takes the images before those two steps, HWC ``uint8`` (a quarter of the bytes) or
``float32`` in the pixel range, and writes each one normalized, CHW, straight into the
batch: ``mx.nd.image.normalize(mx.nd.image.to_tensor(x), mean, std)`` bit for bit, as
MXNet computes it in float32 (``x / 255``, minus the mean, over the std).

The detection batchifiers (:mod:`gluonbatch.batchify.detection`) write their images the
same way when made with ``normalize=True``.

Examples
--------
>>> import numpy as np
>>> images = NormalizedStack(mean=0.5, std=0.5)([np.full((2, 3, 3), 255, 'uint8')] * 4)
>>> images.shape, images.dtype, float(images.asnumpy().max())
((4, 3, 2, 3), <class 'numpy.float32'>, 1.0)
"""
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._core import scratch
from .._core.alloc import allocate
from .._core.checks import check_batch, described
from .._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from .._core.inputs import channel_values
from .._core.layout import check_same_shape
from .._core.samples import as_host_array
from .._core.device_layout import ROWS
from .._core.typing import ChannelValues, DeviceLayout, NDArray

__all__ = ['NormalizedStack', 'IMAGENET_MEAN', 'IMAGENET_STD']


_PIXEL_TYPES = (np.dtype(np.uint8), np.dtype(np.float32))
_FLOAT32 = np.dtype(np.float32)
_255 = np.float32(255)


class NormalizedStack:
    """Stack HWC images as normalized CHW float32: MXNet's ``to_tensor`` then
    ``normalize`` of every image, fused into the one write of the batch.

    Parameters
    ----------
    mean, std : float or sequence of 3 floats
        ``normalize``'s parameters (one number for all channels); default gluoncv's.

    Returns
    -------
    NDArray
        ``(N, 3, H, W)`` float32, ``cpu_shared`` (``mx.np.ndarray`` in numpy mode).

    Raises
    ------
    TypeError
        An image that is not an array, or not ``uint8`` / ``float32``.
    ValueError
        An image that is not ``(H, W, 3)``, or not of the first image's shape.

    Examples
    --------
    >>> import numpy as np
    >>> stack = NormalizedStack()
    >>> batch = stack([np.zeros((4, 5, 3), 'uint8'), np.full((4, 5, 3), 255., 'float32')])
    >>> batch.shape
    (2, 3, 4, 5)
    >>> batch.asnumpy()[:, :, 0, 0]
    array([[-2.117904 , -2.0357141, -1.8044444],
           [ 2.2489083,  2.4285715,  2.64     ]], dtype=float32)
    """

    #: Every row is one sample: split on the device slices' boundaries (see
    #: ``split_to_devices``).
    device_layout: DeviceLayout = ROWS

    def __init__(self, mean: ChannelValues = IMAGENET_MEAN,
                 std: ChannelValues = IMAGENET_STD) -> None:
        # float32 constants, as MXNet's normalize casts its float parameters
        self._mean = np.array(channel_values(mean, 'mean'), np.float32)
        self._std = np.array(channel_values(std, 'std', nonzero=True), np.float32)

    def __call__(self, data: Sequence[Any]) -> NDArray:
        """Normalize and stack ``data``, a list of ``(H, W, 3)`` uint8 or float32 images."""
        check_batch(data)
        images = [self._checked(image, index) for index, image in enumerate(data)]
        check_same_shape([image.shape for image in images], images[0].shape)
        height, width, channels = images[0].shape
        out, view = allocate((len(images), channels, height, width), _FLOAT32)
        with scratch.empty('normalized-stack', images[0].shape, np.float32) as unit:
            for index, image in enumerate(images):
                self._write(view[index], image, unit)
        return out

    def _checked(self, image, index):
        array = as_host_array(image, index)
        if array.dtype not in _PIXEL_TYPES:
            raise TypeError('sample %d is %s; expected uint8 or float32 pixels (HWC)'
                            % (index, described(image)))
        if array.ndim != 3 or array.shape[2] != 3:
            raise ValueError('sample %d has shape %s; expected an HWC image (height, width, 3)'
                             % (index, array.shape))
        return array

    def _write(self, out, image, unit):
        """``out`` (3, H, W) = normalize(to_tensor(image)), through ``unit`` (H, W, 3)."""
        # one contiguous pass for the division, then per channel the strided read
        np.divide(image, _255, out=unit)
        for channel in range(3):
            plane = out[channel]
            np.subtract(unit[:, :, channel], self._mean[channel], out=plane)
            np.divide(plane, self._std[channel], out=plane)

    def __repr__(self):
        return 'NormalizedStack(mean=%s, std=%s)' % (tuple(self._mean.tolist()),
                                                      tuple(self._std.tolist()))
