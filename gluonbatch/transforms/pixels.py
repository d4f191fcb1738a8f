"""OpenCV pixel kernels of the presets: each is one pass over the pixels it must touch.

The SSD-family pipeline never builds gluoncv's expanded canvas (up to 16 times the image's
area, filled with the mean): it fills only the crop window, ``0`` outside the image
(:func:`canvas_window`), resizes the window in float32 (:func:`resize_window`, which
averages only the rows that show the image), and then applies
the whole colour chain as one 3x4 matrix (see :mod:`gluonbatch.transforms.color`) while
flipping and writing CHW into the output (:func:`affine_chw`, :func:`affine_hwc`).

Colour maps are affine and resizing weights sum to one, so the colour map may run after the
resize (up to float32 rounding). The constant fill, though, must come out of the chain as
the *undistorted* mean: the window stores ``pixel - shift`` (``0`` on the fill) and the
final map is ``m(r + shift)``, with ``shift`` the pre-image of the wanted fill colour
(:func:`fill_shift`).

Windows with fill (and the rows :func:`resize_window` averages down) are leased from the
thread's zero buffer (:func:`.scratch.zeros`: no fresh pages for a window up to 16 times
the image), other windows and the HWC image between the colour map and the CHW split from
its kept arrays (:func:`.scratch.empty`).

Examples
--------
>>> import numpy as np
>>> src = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
>>> with canvas_window(src, (1, 0, 3, 3), (0, 1)) as window:  # image at (0, 1)
...     window[..., 0]
array([[ 0.,  0.,  0.],
       [ 3.,  6.,  0.],
       [12., 15.,  0.]], dtype=float32)
"""
import contextlib

import cv2
import numpy as np

from .._core import scratch
from .._core.checks import described
from . import color, reach

__all__ = ['INTERPOLATIONS', 'BILINEAR', 'AREA', 'val_interp', 'window_overlap',
           'covers', 'canvas_window', 'fill_shift', 'resize', 'resize_window', 'check_pixels',
           'written', 'affine_chw', 'affine_hwc', 'normalize_lut', 'lut_chw', 'Normalizer']

#: gluoncv's interpolation codes, which OpenCV takes as they are.
INTERPOLATIONS = {0: cv2.INTER_NEAREST, 1: cv2.INTER_LINEAR, 2: cv2.INTER_CUBIC,
                  3: cv2.INTER_AREA, 4: cv2.INTER_LANCZOS4}
#: The bilinear code (MXNet's ``imresize`` default, the R-CNN presets' resize).
BILINEAR = 1
#: The area code (OpenCV averages where both sides shrink, and interpolates otherwise).
AREA = 3


def val_interp(in_size, out_size):
    """MXNet's ``interp=9`` choice: cubic to enlarge both sides, area to shrink both,
    linear otherwise; sizes are ``(width, height)``.

    >>> val_interp((100, 50), (200, 100)), val_interp((100, 50), (50, 25))
    (2, 3)
    >>> val_interp((100, 50), (200, 25))
    1
    """
    (ow, oh), (nw, nh) = in_size, out_size
    if nh > oh and nw > ow:
        return 2
    if nh < oh and nw < ow:
        return AREA
    return BILINEAR


def window_overlap(window, offset, shape):
    """Where an image of ``shape`` placed at ``offset = (x, y)`` of a canvas shows in the
    canvas's ``window = (x, y, width, height)``: ``(window rows, window cols, image rows,
    image cols)`` as slices, or ``None`` when it does not.

    >>> window_overlap((2, 0, 4, 4), (0, 0), (3, 3, 3))
    (slice(0, 3, None), slice(0, 1, None), slice(0, 3, None), slice(2, 3, None))
    """
    x, y, width, height = window
    off_x, off_y = offset
    x0, x1 = max(x, off_x), min(x + width, off_x + shape[1])
    y0, y1 = max(y, off_y), min(y + height, off_y + shape[0])
    if x0 >= x1 or y0 >= y1:
        return None
    return (slice(y0 - y, y1 - y), slice(x0 - x, x1 - x),
            slice(y0 - off_y, y1 - off_y), slice(x0 - off_x, x1 - off_x))


def covers(overlap, window):
    """Whether the image shows in all of ``window``, given their ``overlap`` as
    :func:`window_overlap` returns it.

    >>> covers(window_overlap((1, 0, 2, 2), (0, 0), (3, 3, 3)), (1, 0, 2, 2))
    True
    >>> covers(window_overlap((2, 0, 2, 2), (0, 0), (3, 3, 3)), (2, 0, 2, 2))
    False
    """
    return overlap is not None and (overlap[0].stop - overlap[0].start == window[3]
                                    and overlap[1].stop - overlap[1].start == window[2])


@contextlib.contextmanager
def canvas_window(src, window, offset=(0, 0), shift=None):
    """A context giving the float32 HWC pixels of ``window = (x, y, width, height)`` of a
    virtual canvas holding ``src`` (HWC uint8 or float32) at ``offset``: ``src - shift`` where the
    image is, ``0`` elsewhere. The canvas itself is never built.

    ``shift`` (3 floats, default zeros) is subtracted from the image's pixels only. The
    window lives in a per-thread scratch array (``gluonbatch._core.scratch``): read it only
    inside the ``with`` block, and never write to it.
    """
    width, height = window[2], window[3]
    overlap = window_overlap(window, offset, src.shape)
    shape = (height, width, 3)
    covered = covers(overlap, window)
    # all image: every value is written, any array does; with fill: the zero buffer
    lease = scratch.empty('canvas_window', shape) if covered else scratch.zeros(shape)
    with lease as out:
        if overlap is None:
            yield out
            return
        rows, cols, src_rows, src_cols = overlap
        block, target = src[src_rows, src_cols], out[rows, cols]
        if shift is None or not np.any(shift):
            np.copyto(target, block, casting='unsafe')
        else:
            # OpenCV's pass, in float32 as numpy's, writes the strided target rows in place
            # at twice numpy's speed
            scalar = tuple(float(v) for v in np.asarray(shift, np.float32)) + (0.0,)
            written(target, cv2.subtract(block, scalar, dst=target, dtype=cv2.CV_32F))
        yield out
        if not covered:
            target[...] = 0  # the zero buffer's contract: leave it all zeros


def fill_shift(m, fill):
    """The colour ``s`` that ``m`` maps to ``fill``: stored as ``0`` in a window, the fill
    comes out of ``m(r + s)`` as ``fill`` exactly (up to float rounding).

    >>> m = color.compose(color.contrast(0.5), color.brightness(-16.0))
    >>> color.apply(m, fill_shift(m, (100.0, 50.0, 0.0)))
    array([100.,  50.,   0.])
    """
    return color.apply(color.invert(m), np.asarray(fill, np.float64))


def resize(img, size, interp):
    """``img`` (HWC, uint8 or float32) resized to ``size = (width, height)`` with the
    interpolation code ``interp`` (0-4, :data:`INTERPOLATIONS`), as MXNet's ``imresize``
    does it: OpenCV's ``cv2.resize``, a new C-contiguous array (any strides in: OpenCV's
    binding copies what it cannot read as it is).

    >>> img = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    >>> resize(img[:, ::-1], (4, 1), BILINEAR)[..., 0]
    array([[6, 5, 4, 3]], dtype=uint8)
    """
    return cv2.resize(img, tuple(size), interpolation=INTERPOLATIONS[interp])


def resize_window(src, window, offset, size, interp, shift=None):
    """:func:`resize` of a :func:`canvas_window`, without resizing fill that no output
    reads, nor averaging the window's rows of fill.

    - Only the part of the window that outputs reading the image need is built and resized,
      at the whole window's scale (:func:`.reach.span`); the other outputs are ``0``.
    - OpenCV's area averaging (where both sides shrink) costs a pass over every pixel of
      the part. It runs in two passes, across each row then down each column, and a row of
      fill comes out of the first as zeros: so where the image shows in only some of the
      part's rows, those rows alone are averaged across, put back among zero rows, and
      averaged down.

    Parameters
    ----------
    src, window, offset, shift
        As for :func:`canvas_window`.
    size : (int, int)
        The output's ``(width, height)``.
    interp : int
        The interpolation code, 0-4 (:data:`INTERPOLATIONS`).

    Returns
    -------
    numpy.ndarray
        A new float32 HWC array, within float32 rounding of resizing the whole window
        (of its sample positions, for a part resized from the window's end).

    Raises
    ------
    ValueError
        If the window or the output is empty.

    Examples
    --------
    >>> src = np.full((2, 2, 3), 9, np.uint8)
    >>> resize_window(src, (0, 0, 4, 8), (0, 4), (2, 2), AREA)[..., 0]
    array([[0. , 0. ],
           [4.5, 0. ]], dtype=float32)
    """
    width, height = window[2], window[3]
    out_w, out_h = size
    if min(width, height, out_w, out_h) < 1:
        raise ValueError('a window of %dx%d resized to %dx%d: both must be at least 1x1'
                         % (width, height, out_w, out_h))
    overlap = window_overlap(window, offset, src.shape)
    if overlap is None:  # all fill: resized zeros are zeros
        INTERPOLATIONS[interp]  # an unknown code fails as in resize
        return np.zeros((out_h, out_w, 3), np.float32)
    x, y = reach.spans(overlap[0], overlap[1], (width, height), size, interp)
    # the part, as a window at (0, 0) of the canvas mirrored about the window as it says
    view, off_x, off_y = src, offset[0] - window[0], offset[1] - window[1]
    if x.mirrored:
        view, off_x = view[:, ::-1], width - off_x - src.shape[1]
    if y.mirrored:
        view, off_y = view[::-1], height - off_y - src.shape[0]
    part = _resize_part(view, (0, 0, x.kept, y.kept), (off_x, off_y),
                        (out_w / width, out_h / height), interp, shift)
    if x.kept == width and y.kept == height:
        return part
    out = np.empty((out_h, out_w, 3), np.float32)
    rows = _placed(part.shape[0], out_h, y.mirrored)
    cols = _placed(part.shape[1], out_w, x.mirrored)
    out[:rows.start] = 0
    out[rows.stop:] = 0
    out[rows, :cols.start] = 0
    out[rows, cols.stop:] = 0
    np.copyto(out[rows, cols], part[::-1 if y.mirrored else 1, ::-1 if x.mirrored else 1])
    return out


def _placed(count, out, mirrored):
    """Where a part's ``count`` outputs go among ``out``: the first, or the last."""
    return slice(out - count, out) if mirrored else slice(0, count)


def _resize_part(src, window, offset, scale, interp, shift):
    """The window resized by ``scale = (fx, fy)``, averaging down only the rows that show
    the image (see :func:`resize_window`)."""
    width, height = window[2], window[3]
    fx, fy = scale
    rows = window_overlap(window, offset, src.shape)[0]
    shown = rows.stop - rows.start
    if interp != AREA or shown == height or fx > 1 or fy > 1:
        with canvas_window(src, window, offset, shift) as img:
            return _scaled(img, fx, fy, interp)
    band = (window[0], window[1] + rows.start, width, shown)
    with canvas_window(src, band, offset, shift) as img:
        across = _scaled(img, fx, 1.0, interp)
    with scratch.zeros((height,) + across.shape[1:]) as tall:
        tall[rows] = across
        out = _scaled(tall, 1.0, fy, interp)
        tall[rows] = 0  # the zero buffer's contract: leave it all zeros
    return out


def _scaled(img, fx, fy, interp):
    """``cv2.resize`` by the factors ``fx, fy``: a whole image resized by ``out / in`` gets
    ``out`` samples and the very arithmetic of a resize to that size, and a part of it
    keeps the whole's sample positions."""
    return cv2.resize(img, None, fx=fx, fy=fy, interpolation=INTERPOLATIONS[interp])


def _shifted(m, shift):
    """``m(x + shift)`` as one matrix."""
    if shift is None:
        return m
    out = np.array(m, np.float64)
    out[:, 3] += out[:, :3] @ np.asarray(shift, np.float64)
    return out


def check_pixels(img, name='img'):
    """Raise unless ``img`` is what the colour maps take: a uint8 or float32 numpy array
    (else ``TypeError``), HWC with 3 channels (else ``ValueError``).

    >>> check_pixels(np.zeros((2, 2, 4), np.uint8))
    Traceback (most recent call last):
    ...
    ValueError: img must be HWC with 3 channels, got shape (2, 2, 4)
    """
    if not (isinstance(img, np.ndarray) and img.dtype in (np.uint8, np.float32)):
        raise TypeError('%s must be a uint8 or float32 numpy array, got %s'
                        % (name, described(img)))
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError('%s must be HWC with 3 channels, got shape %s' % (name, img.shape))


@contextlib.contextmanager
def _float32_values(img):
    """A context giving ``img`` (HWC, 3 channels, uint8 or float32) as C-contiguous float32
    values for ``cv2.transform``, which keeps the input's depth (uint8 would saturate): the
    image itself when it is that already, else a copy in the thread's kept array."""
    check_pixels(img)
    if img.dtype == np.float32 and img.flags.c_contiguous:
        yield img
        return
    with scratch.empty('affine.values', img.shape, np.float32) as values:
        np.copyto(values, img)
        yield values


def affine_chw(img, m, flip_x=False, shift=None, out=None):
    """The 3x4 colour map ``m`` applied to ``img + shift``, written CHW.

    Parameters
    ----------
    img : numpy.ndarray
        HWC uint8 or float32, 3 channels; not written to.
    m : array-like
        3x4: ``m[:, :3] @ pixel + m[:, 3]`` per pixel.
    flip_x : bool
        Mirror left-right.
    shift : array-like of 3, optional
        Added to every pixel before ``m`` (see :func:`fill_shift`).
    out : numpy.ndarray, optional
        ``(3, H, W)`` float32 to write into; a new C-contiguous array if ``None``.

    Returns
    -------
    numpy.ndarray
        ``out``.

    Examples
    --------
    >>> img = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    >>> plus_one = np.hstack([np.eye(3), np.ones((3, 1))])
    >>> affine_chw(img, plus_one, flip_x=True)[0]
    array([[4., 1.]], dtype=float32)
    """
    h, w = img.shape[:2]
    if out is None:
        out = np.empty((3, h, w), np.float32)
    # one cv2.transform pass, then a split into the planes: faster than any per-plane
    # arithmetic; the HWC result goes to a kept array, fresh pages cost more than the pass
    with _float32_values(img) as values, \
            scratch.empty('affine_chw', img.shape, np.float32) as mapped:
        result = cv2.transform(values, _shifted(m, shift), dst=mapped)
        if flip_x:
            # mirrored after the map, so the input stays untouched; OpenCV may round a
            # run's last pixels otherwise, so mirroring first could differ in the last bit
            cv2.flip(result, 1, dst=result)
        planes = [out[0], out[1], out[2]]
        for plane, split in zip(planes, cv2.split(result, planes)):
            written(plane, split)
    return out


def affine_hwc(img, m, flip_x=False, shift=None, out=None):
    """The 3x4 colour map ``m`` applied to ``img + shift``, written HWC.

    Parameters are those of :func:`affine_chw`, except that ``out`` is ``(H, W, 3)``.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous float32 array if it is ``None``.

    Examples
    --------
    >>> img = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    >>> plus_one = np.hstack([np.eye(3), np.ones((3, 1))])
    >>> affine_hwc(img, plus_one, shift=(1, 0, 0))[0, 0]
    array([2., 2., 3.], dtype=float32)
    """
    m = _shifted(m, shift)
    # OpenCV maps the rows of a strided ``out`` one by one, and a row's last pixels round
    # otherwise than in one run: map into contiguous memory only, for the same bits
    direct = out is None or out.flags.c_contiguous
    with _float32_values(img) as values:
        if not flip_x and direct:
            return written(out, cv2.transform(values, m, dst=out))
        with scratch.empty('affine_hwc', values.shape, np.float32) as mapped:
            cv2.transform(values, m, dst=mapped)
            if not flip_x:
                return written(out, mapped)
            return written(out, cv2.flip(mapped, 1, dst=out if direct else None))


def written(out, result):
    """``out`` holding ``result``, which an OpenCV call given ``dst=out`` returned: OpenCV
    writes into ``out`` where it fits (then ``result`` is ``out``) and returns a new array
    otherwise, copied in here. ``result`` itself if ``out`` is ``None``.

    >>> out = np.zeros((1, 2), np.float32)
    >>> written(out, cv2.add(np.ones((1, 2), np.float32), 1.0, dst=out)) is out
    True
    """
    if out is None or result is out:
        return result
    np.copyto(out, result)
    return out


def normalize_lut(mean, std):
    """Per channel, the float32 value MXNet's ``to_tensor`` then ``normalize(mean, std)``
    give each uint8 value: ``(v / 255 - mean) / std``, in float32 as MXNet computes it.
    Shape ``(3, 256)``.

    >>> normalize_lut((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))[:, [0, 255]]
    array([[-1.,  1.],
           [-1.,  1.],
           [-1.,  1.]], dtype=float32)
    """
    values = np.arange(256, dtype=np.float32) / np.float32(255)
    mean = np.asarray(mean, np.float32).reshape(3, 1)
    std = np.asarray(std, np.float32).reshape(3, 1)
    return np.ascontiguousarray((values[np.newaxis, :] - mean) / std, dtype=np.float32)


def lut_chw(img, lut, out=None):
    """A uint8 HWC image through the per-channel ``lut`` ``(3, 256)`` into float32 CHW
    ``out`` (new if ``None``): bit for bit what the table says."""
    h, w = img.shape[:2]
    if out is None:
        out = np.empty((3, h, w), np.float32)
    for k, plane in enumerate(cv2.split(img)):
        target = out[k]
        written(target, cv2.LUT(plane, lut[k], dst=target))
    return out


class Normalizer:
    """MXNet's ``to_tensor`` then ``normalize(mean, std)`` of an HWC image, written CHW
    float32: ``(x / 255 - mean) / std`` per channel, nothing clipped.

    A uint8 image goes through the per-channel table :func:`normalize_lut` (bit for bit
    MXNet's float32 arithmetic, and the fastest pass); a float32 one, whose values no
    table can hold, through the same map as a 3x4 matrix (:func:`affine_chw`), within
    float32 rounding of MXNet's.

    Parameters
    ----------
    mean, std : sequence of 3 floats
        ``normalize``'s parameters.

    Examples
    --------
    >>> half = Normalizer((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    >>> half(np.full((1, 2, 3), 255, np.uint8))[:, 0, 0]
    array([1., 1., 1.], dtype=float32)
    >>> half(np.full((1, 2, 3), -255.0, np.float32))[:, 0, 0]
    array([-3., -3., -3.], dtype=float32)
    """

    def __init__(self, mean, std):
        self.lut = normalize_lut(mean, std)
        self.matrix = color.normalize(mean, std)

    def __call__(self, img, out=None):
        """``img`` (HWC, uint8 or float32; not written to) normalized into ``out``
        (``(3, H, W)`` float32, new if ``None``)."""
        if img.dtype == np.uint8:
            return lut_chw(img, self.lut, out)
        return affine_chw(img, self.matrix, out=out)
