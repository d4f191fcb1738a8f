"""The crop of an expanded canvas, built and resized without building the canvas.

gluoncv's SSD and YOLOv3 presets paste the image on a canvas up to 16 times its area,
filled with the mean, crop it and resize the crop. Here only the crop is filled, ``0``
outside the image (:func:`canvas_crop`), and only the part of it that the resize's outputs
read is resized, in float32 (:func:`resize_crop`, with :mod:`gluonbatch.transforms.reach`).

Colour maps are affine and resizing weights sum to one, so the colour map may run after the
resize (up to float32 rounding). The constant fill, though, must come out of the chain as
the *undistorted* mean: the crop stores ``pixel - shift`` (``0`` on the fill) and the
final map is ``m(r + shift)``, with ``shift`` the pre-image of the wanted fill colour
(:func:`fill_shift`).

A uint8 image's part resized by nearest, area or Lanczos needs no crop at all: it is
computed from the image itself, to the same bits
(:mod:`gluonbatch.transforms.canvas_resize`). Its other crops are written in one compiled
pass, fill included (:func:`~gluonbatch.transforms.canvas_resize.part`), into the thread's
kept arrays (``scratch.empty``). A float32 image's crops with fill (and the rows
:func:`resize_crop` averages down) are leased from the thread's zero buffer
(``scratch.zeros``: no fresh pages for a crop up to 16 times the image).

Examples
--------
>>> import numpy as np
>>> src = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
>>> with canvas_crop(src, (1, 0, 3, 3), (0, 1)) as crop:  # image at (0, 1)
...     crop[..., 0]
array([[ 0.,  0.,  0.],
       [ 3.,  6.,  0.],
       [12., 15.,  0.]], dtype=float32)
"""
import contextlib
from typing import Iterator, Optional, Sequence, Tuple

import cv2
import numpy as np

from .._core import scratch
from . import canvas_resize, color, reach
from .pixels import AREA, INTERPOLATIONS, shift_into, written

__all__ = ['crop_overlap', 'covers', 'canvas_crop', 'fill_shift', 'resize_crop']

#: ``(crop rows, crop cols, image rows, image cols)``, as :func:`crop_overlap` returns it.
Overlap = Tuple[slice, slice, slice, slice]


def crop_overlap(crop: Sequence[int], offset: Sequence[int],
                 shape: Sequence[int]) -> Optional[Overlap]:
    """Where an image of ``shape`` placed at ``offset = (x, y)`` of a canvas shows in the
    canvas's ``crop = (x, y, width, height)``: ``(crop rows, crop cols, image rows,
    image cols)`` as slices, or ``None`` when it does not.

    >>> crop_overlap((2, 0, 4, 4), (0, 0), (3, 3, 3))
    (slice(0, 3, None), slice(0, 1, None), slice(0, 3, None), slice(2, 3, None))
    """
    x, y, width, height = crop
    off_x, off_y = offset
    x0, x1 = max(x, off_x), min(x + width, off_x + shape[1])
    y0, y1 = max(y, off_y), min(y + height, off_y + shape[0])
    if x0 >= x1 or y0 >= y1:
        return None
    return (slice(y0 - y, y1 - y), slice(x0 - x, x1 - x),
            slice(y0 - off_y, y1 - off_y), slice(x0 - off_x, x1 - off_x))


def covers(overlap: Optional[Overlap], crop: Sequence[int]) -> bool:
    """Whether the image shows in all of ``crop``, given their ``overlap`` as
    :func:`crop_overlap` returns it.

    >>> covers(crop_overlap((1, 0, 2, 2), (0, 0), (3, 3, 3)), (1, 0, 2, 2))
    True
    >>> covers(crop_overlap((2, 0, 2, 2), (0, 0), (3, 3, 3)), (2, 0, 2, 2))
    False
    """
    return overlap is not None and (overlap[0].stop - overlap[0].start == crop[3]
                                    and overlap[1].stop - overlap[1].start == crop[2])


@contextlib.contextmanager
def canvas_crop(src: np.ndarray, crop: Sequence[int], offset: Sequence[int] = (0, 0),
                shift: Optional[Sequence[float]] = None) -> Iterator[np.ndarray]:
    """A context giving the float32 HWC pixels of ``crop = (x, y, width, height)`` of a
    virtual canvas holding ``src`` (HWC uint8 or float32) at ``offset``: ``src - shift``
    where the image is, ``0`` elsewhere. The canvas itself is never built.

    ``shift`` (3 floats, default zeros) is subtracted from the image's pixels only. The
    crop lives in a per-thread scratch array (``gluonbatch._core.scratch``): read it only
    inside the ``with`` block, and never write to it.
    """
    width, height = crop[2], crop[3]
    shape = (height, width, 3)
    if canvas_resize.builds_part(src, (width, height)):
        # a uint8 image's part, fill and all, in one compiled pass
        with scratch.empty('canvas_crop', shape) as out:
            canvas_resize.part(src, (offset[0] - crop[0], offset[1] - crop[1]),
                               canvas_resize.byte_values(shift), out)
            yield out
        return
    overlap = crop_overlap(crop, offset, src.shape)
    covered = covers(overlap, crop)
    # all image: every value is written, any array does; with fill: the zero buffer
    lease = scratch.empty('canvas_crop', shape) if covered else scratch.zeros(shape)
    with lease as out:
        if overlap is None:
            yield out
            return
        rows, cols, src_rows, src_cols = overlap
        block, target = src[src_rows, src_cols], out[rows, cols]
        _shifted_into(target, block, shift)
        yield out
        if not covered:
            target[...] = 0  # the zero buffer's contract: leave it all zeros


#: ``cv2.flip``'s code for a block reversed along (rows, columns).
_FLIP_CODES = {(True, False): 0, (False, True): 1, (True, True): -1}


def _shifted_into(target, block, shift):
    """``block - shift`` (uint8 or float32 HWC; ``block`` as it is if ``shift`` is
    ``None`` or zeros) into the float32 ``target``.

    A block read backwards (the mirrored parts of :func:`resize_crop`) costs the pass
    several times over, in copies through numpy's strided loops: it is mirrored forwards
    by ``cv2.flip`` first, in its own (narrower) type, moving the values unchanged.
    """
    reversed_axes = (block.strides[0] < 0, block.strides[1] < 0)
    if not any(reversed_axes):
        shift_into(target, block, shift)
        return
    forwards = block[::-1 if reversed_axes[0] else 1, ::-1 if reversed_axes[1] else 1]
    with scratch.empty('canvas_crop.block', block.shape, block.dtype) as mirrored:
        cv2.flip(forwards, _FLIP_CODES[reversed_axes], dst=mirrored)
        shift_into(target, mirrored, shift)


def fill_shift(m: np.ndarray, fill: Sequence[float]) -> np.ndarray:
    """The colour ``s`` that ``m`` maps to ``fill``: stored as ``0`` in a crop, the fill
    comes out of ``m(r + s)`` as ``fill`` exactly (up to float rounding).

    >>> m = color.compose(color.contrast(0.5), color.brightness(-16.0))
    >>> color.apply(m, fill_shift(m, (100.0, 50.0, 0.0)))
    array([100.,  50.,   0.])
    """
    return color.apply(color.invert(m), np.asarray(fill, np.float64))


def resize_crop(src: np.ndarray, crop: Sequence[int], offset: Sequence[int],
                size: Tuple[int, int], interp: int,
                shift: Optional[Sequence[float]] = None) -> np.ndarray:
    """:func:`~gluonbatch.transforms.pixels.resize` of a :func:`canvas_crop`, without
    resizing fill that no output reads, nor averaging the crop's rows of fill.

    - Only the part of the crop that outputs reading the image need is built and resized,
      at the whole crop's scale (:func:`.reach.span`); the other outputs are ``0``.
    - OpenCV's area averaging (where both sides shrink) costs a pass over every pixel of
      the part. It runs in two passes, across each row then down each column, and a row of
      fill comes out of the first as zeros: so where the image shows in only some of the
      part's rows, those rows alone are averaged across, put back among zero rows, and
      averaged down.

    Parameters
    ----------
    src, crop, offset, shift
        As for :func:`canvas_crop`.
    size : (int, int)
        The output's ``(width, height)``.
    interp : int
        The interpolation code, 0-4 (:data:`~gluonbatch.transforms.pixels.INTERPOLATIONS`).

    Returns
    -------
    numpy.ndarray
        A new float32 HWC array, within float32 rounding of resizing the whole crop
        (of its sample positions, for a part resized from the crop's end).

    Raises
    ------
    ValueError
        If the crop or the output is empty.

    Examples
    --------
    >>> src = np.full((2, 2, 3), 9, np.uint8)
    >>> resize_crop(src, (0, 0, 4, 8), (0, 4), (2, 2), AREA)[..., 0]
    array([[0. , 0. ],
           [4.5, 0. ]], dtype=float32)
    """
    width, height = crop[2], crop[3]
    out_w, out_h = size
    if min(width, height, out_w, out_h) < 1:
        raise ValueError('a crop of %dx%d resized to %dx%d: both must be at least 1x1'
                         % (width, height, out_w, out_h))
    overlap = crop_overlap(crop, offset, src.shape)
    if overlap is None:  # all fill: resized zeros are zeros
        INTERPOLATIONS[interp]  # an unknown code fails as in resize
        return np.zeros((out_h, out_w, 3), np.float32)
    x, y = reach.spans(overlap[0], overlap[1], (width, height), size, interp)
    # the part, as a crop at (0, 0) of the canvas mirrored about the crop as it says
    view, off_x, off_y = src, offset[0] - crop[0], offset[1] - crop[1]
    if x.mirrored:
        view, off_x = view[:, ::-1], width - off_x - src.shape[1]
    if y.mirrored:
        view, off_y = view[::-1], height - off_y - src.shape[0]
    part_crop, part_offset = (0, 0, x.kept, y.kept), (off_x, off_y)
    scale = (out_w / width, out_h / height)
    if x.kept == width and y.kept == height:
        return _resize_part(view, part_crop, part_offset, scale, interp, shift)
    out = np.empty((out_h, out_w, 3), np.float32)
    part_w, part_h = canvas_resize.output_size((x.kept, y.kept), scale)
    rows = _placed(part_h, out_h, y.mirrored)
    cols = _placed(part_w, out_w, x.mirrored)
    out[:rows.start] = 0
    out[rows.stop:] = 0
    out[rows, :cols.start] = 0
    out[rows, cols.stop:] = 0
    target = out[rows, cols]
    if x.mirrored or y.mirrored:  # cv2.flip: numpy's strided copy costs several times it
        part = _resize_part(view, part_crop, part_offset, scale, interp, shift)
        written(target, cv2.flip(part, _FLIP_CODES[y.mirrored, x.mirrored], dst=target))
    else:  # resized where it goes
        _resize_part(view, part_crop, part_offset, scale, interp, shift, target)
    return out


def _placed(count, out, mirrored):
    """Where a part's ``count`` outputs go among ``out``: the first, or the last."""
    return slice(out - count, out) if mirrored else slice(0, count)


def _resize_part(src, crop, offset, scale, interp, shift, out=None):
    """The crop resized by ``scale = (fx, fy)``, averaging down only the rows that show
    the image (see :func:`resize_crop`): a new array, or written into ``out`` (a part of
    a larger float32 image, of the output's shape)."""
    width, height = crop[2], crop[3]
    fx, fy = scale
    if canvas_resize.applies(src, (width, height), scale, interp):
        # the same bits from the uint8 image, without the float32 crop
        return canvas_resize.resize(src, (offset[0] - crop[0], offset[1] - crop[1]),
                                    (width, height), scale, interp,
                                    canvas_resize.byte_values(shift), out)
    rows = crop_overlap(crop, offset, src.shape)[0]
    shown = rows.stop - rows.start
    if interp != AREA or shown == height or fx > 1 or fy > 1:
        with canvas_crop(src, crop, offset, shift) as img:
            return _scaled(img, fx, fy, interp, out)
    band = (crop[0], crop[1] + rows.start, width, shown)
    with canvas_crop(src, band, offset, shift) as img:
        across = _scaled(img, fx, 1.0, interp)
    with scratch.zeros((height,) + across.shape[1:]) as tall:
        tall[rows] = across
        out = _scaled(tall, 1.0, fy, interp, out)
        tall[rows] = 0  # the zero buffer's contract: leave it all zeros
    return out


def _scaled(img, fx, fy, interp, dst=None):
    """``cv2.resize`` by the factors ``fx, fy``, into ``dst`` if given: a whole image
    resized by ``n / size`` gets ``n`` samples and the very arithmetic of a resize to that
    size, and a part of it keeps the whole's sample positions."""
    return written(dst, cv2.resize(img, None, dst=dst, fx=fx, fy=fy,
                                   interpolation=INTERPOLATIONS[interp]))
