"""JPEG decoding at libjpeg-turbo's speed with MXNet's pixels.

``mx.image.imdecode`` decodes a 500x375 JPEG in about 2.5-3 ms here; libjpeg-turbo itself,
through simplejpeg, in about 1.1 ms. With the accurate integer DCT and smooth chroma
upsampling (libjpeg's defaults, which MXNet's OpenCV uses) the two give the same pixels:
the tests compare them over baseline and progressive files, 4:4:4, 4:2:2 and 4:2:0
subsampling, grayscale, odd sizes, restart markers and EXIF orientations (which neither
applies). :func:`imdecode` takes the fast path for a JPEG in YCbCr, RGB or grayscale and
leaves everything else to MXNet: other formats, CMYK and YCCK files, files simplejpeg
cannot read, and every file when simplejpeg is not installed. Then the first JPEG
that simplejpeg would have decoded (YCbCr, RGB or grayscale) warns, once per process, that
it goes through MXNet and which install extra (``jpeg``) brings the fast path back.

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
import threading
import warnings

import mxnet as mx

from .alloc import allocate_plain, in_numpy_mode
from .process import ProcessLocal

try:
    import simplejpeg
except ImportError:  # an optional dependency: MXNet decodes everything without it
    simplejpeg = None

__all__ = ['imdecode', 'decode_rgb', 'components', 'FAST_COLORSPACES', 'SLOW_PATH_WARNING']

#: The source colour spaces whose conversion to RGB libjpeg-turbo and MXNet share.
FAST_COLORSPACES = ('YCbCr', 'RGB', 'Gray')
_SOI = b'\xff\xd8'
#: What the first JPEG decoded through MXNet for want of simplejpeg warns, once per process.
SLOW_PATH_WARNING = ('simplejpeg is not installed, so JPEGs are decoded by MXNet, 2 to 3 '
                     'times slower than by libjpeg-turbo (the same pixels); pip install '
                     "'gluonbatch[jpeg]' (or simplejpeg) to decode them fast. `gluonbatch "
                     "info` lists the optional parts found.")
# frame headers (SOF0-SOF15), whose component count tells grayscale and YCbCr from CMYK
_FRAME_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
# markers that stand alone, with no length after them
_BARE_MARKERS = frozenset(range(0xD0, 0xDA)) | {0x01}
_told = False  # whether this process has warned SLOW_PATH_WARNING
_told_lock = ProcessLocal(threading.Lock)


def decode_rgb(data):
    """``data`` (JPEG bytes) as an (H, W, 3) uint8 RGB numpy array decoded by
    libjpeg-turbo, pixel for pixel what ``mx.image.imdecode(data)`` gives; None where the
    fast path does not apply (not a JPEG, a colour space other than
    :data:`FAST_COLORSPACES`, a file libjpeg-turbo refuses, no simplejpeg).

    >>> decode_rgb(b'not a jpeg') is None
    True
    """
    shape = _fast_shape(data)
    return None if shape is None else _decoded(data, None)


def _fast_shape(data):
    """``(height, width)`` of JPEG ``data`` that libjpeg-turbo decodes as MXNet does;
    None where the fast path does not apply."""
    if simplejpeg is None or not isinstance(data, (bytes, bytearray, memoryview)) or \
            bytes(data[:2]) != _SOI:
        return None
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except ValueError:  # damaged or unusual: MXNet decodes it, or says what is wrong
        return None
    return (height, width) if colorspace in FAST_COLORSPACES else None


def _decoded(data, buffer):
    """The RGB pixels of ``data`` (into ``buffer`` if given, else a new array); None
    where libjpeg-turbo refuses the file."""
    try:
        # libjpeg's defaults, as MXNet's OpenCV decodes: accurate DCT, smooth upsampling
        return simplejpeg.decode_jpeg(data, colorspace='RGB', fastdct=False,
                                      fastupsample=False, buffer=buffer)
    except ValueError:  # damaged or unusual: MXNet decodes it, or says what is wrong
        return None


def components(data):
    """The colour components of JPEG ``data`` from its frame header: 1 (grayscale), 3
    (YCbCr or RGB), 4 (CMYK or YCCK); None for what is no JPEG or has no frame header
    before its scan.

    >>> components(b'not a jpeg') is None
    True
    """
    if not isinstance(data, (bytes, bytearray, memoryview)) or bytes(data[:2]) != _SOI:
        return None
    data, at = bytes(data[:65536]), 2  # the header comes first, before any scan data
    while at + 4 <= len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # a fill byte before the marker
            at += 1
        elif marker in _BARE_MARKERS:
            at += 2
        elif marker in _FRAME_MARKERS:
            # length (2), precision (1), height (2), width (2), then the component count
            return data[at + 9] if at + 9 < len(data) else None
        elif marker == 0xDA:  # the scan: no frame header came before it
            return None
        else:
            at += 2 + int.from_bytes(data[at + 2:at + 4], 'big')
    return None


def _warn_slow_path(data):
    """Warn :data:`SLOW_PATH_WARNING` once per process if ``data`` is a JPEG that
    simplejpeg, were it installed, would decode."""
    global _told
    if _told or components(data) not in (1, 3):
        return
    with _told_lock.get():
        if _told:
            return
        _told = True
    # the caller of imdecode: the gluonbatch reader that decoded the image
    warnings.warn(SLOW_PATH_WARNING, UserWarning, stacklevel=3)


def imdecode(data):
    """``mx.image.imdecode(data)``'s image (an (H, W, 3) uint8 RGB NDArray, an
    ``mx.np.ndarray`` in numpy mode), decoded by libjpeg-turbo where :func:`decode_rgb`
    can, else by MXNet (without simplejpeg a JPEG it would have decoded warns once, see
    :data:`SLOW_PATH_WARNING`)."""
    shape = _fast_shape(data)
    if shape is not None:
        # decoded straight into the NDArray's memory
        image, pixels = allocate_plain(shape + (3,), 'uint8')
        if _decoded(data, pixels) is not None:
            return image.as_np_ndarray() if in_numpy_mode() else image
    elif simplejpeg is None:
        _warn_slow_path(data)
    return mx.image.imdecode(data)
