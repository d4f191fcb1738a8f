"""JPEG decoding at libjpeg-turbo's speed with MXNet's pixels.

``mx.image.imdecode`` decodes a 500x375 JPEG in about 2.5-3 ms here; libjpeg-turbo itself,
through simplejpeg, in about 1.1 ms. With the accurate integer DCT and smooth chroma
upsampling (libjpeg's defaults, which MXNet's OpenCV uses) the two give the same pixels:
the tests compare them over baseline and progressive files, 4:4:4, 4:2:2 and 4:2:0
subsampling, grayscale, odd sizes, restart markers and EXIF orientations (which neither
applies). :func:`imdecode` takes the fast path for a JPEG in YCbCr, RGB or grayscale and
leaves everything else to MXNet: other formats, CMYK and YCCK files, files simplejpeg
cannot read, and every file when simplejpeg is not installed.

Examples
--------
>>> import io
>>> import numpy as np
>>> from PIL import Image
>>> encoded = io.BytesIO()
>>> Image.new('RGB', (5, 4), (200, 30, 60)).save(encoded, 'JPEG')
>>> image = imdecode(encoded.getvalue())
>>> type(image).__name__, image.shape, image.dtype
('NDArray', (4, 5, 3), <class 'numpy.uint8'>)
>>> bool((image.asnumpy() == mx.image.imdecode(encoded.getvalue()).asnumpy()).all())
True
"""
import mxnet as mx

from .alloc import in_numpy_mode

try:
    import simplejpeg
except ImportError:  # an optional dependency: MXNet decodes everything without it
    simplejpeg = None

__all__ = ['imdecode', 'decode_rgb', 'FAST_COLORSPACES']

#: The source colour spaces whose conversion to RGB libjpeg-turbo and MXNet share.
FAST_COLORSPACES = ('YCbCr', 'RGB', 'Gray')
_SOI = b'\xff\xd8'


def decode_rgb(data):
    """``data`` (JPEG bytes) as an (H, W, 3) uint8 RGB numpy array decoded by
    libjpeg-turbo, pixel for pixel what ``mx.image.imdecode(data)`` gives; None where the
    fast path does not apply (not a JPEG, a colour space other than
    :data:`FAST_COLORSPACES`, a file libjpeg-turbo refuses, no simplejpeg).

    >>> decode_rgb(b'not a jpeg') is None
    True
    """
    if simplejpeg is None or not isinstance(data, (bytes, bytearray, memoryview)) or \
            bytes(data[:2]) != _SOI:
        return None
    try:
        if simplejpeg.decode_jpeg_header(data)[2] not in FAST_COLORSPACES:
            return None
        # libjpeg's defaults, as MXNet's OpenCV decodes: accurate DCT, smooth upsampling
        return simplejpeg.decode_jpeg(data, colorspace='RGB', fastdct=False,
                                      fastupsample=False)
    except ValueError:  # damaged or unusual: MXNet decodes it, or says what is wrong
        return None


def imdecode(data):
    """``mx.image.imdecode(data)``'s image (an (H, W, 3) uint8 RGB NDArray, an
    ``mx.np.ndarray`` in numpy mode), decoded by libjpeg-turbo where :func:`decode_rgb`
    can, else by MXNet."""
    pixels = decode_rgb(data)
    if pixels is None:
        return mx.image.imdecode(data)
    # zero-copy: the array is this call's own, and the NDArray keeps it alive
    image = mx.nd.from_numpy(pixels, zero_copy=True)
    return image.as_np_ndarray() if in_numpy_mode() else image
