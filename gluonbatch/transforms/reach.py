"""How far a resize's outputs read into its source: the part of a crop worth resizing.

An expanded canvas's crop is mostly fill where the image sits away from the crop's edges,
and a resize pays for every row it filters and every output it writes, fill included (a
Lanczos resize of a crop 4 times the image's width and height filters all of the crop's
rows). An output whose taps read fill alone is ``0`` (the fill is stored as ``0``), so only
the part of the crop up to the outputs that read the image is worth resizing, at the whole
crop's scale.

An output ``d`` of a resize by ``scale`` reads its source around ``(d + 0.5) * scale - 0.5``
(OpenCV's positions): positions that depend on the part's start, not on its end. So the
part keeps the crop's start and ends past the image's reach: its outputs are the
crop's, and the rest are ``0``. The part may instead keep the crop's end, resized
mirrored, where the resize treats both ends alike (:func:`symmetric`: linear, cubic,
Lanczos, and area where both sides shrink); its positions are then computed from the other
end, the same up to OpenCV's float32 rounding of them. Nearest (``floor(d * scale)``) and
area where a side grows (it interpolates from ``floor(d * scale)`` then) lean one way:
their parts keep the crop's start.

Examples
--------
>>> # an image in the first 100 of a 2000-pixel-wide crop, resized to 416
>>> span(slice(0, 100), 2000, 416, 4)
Span(kept=201, mirrored=False)
>>> span(slice(1900, 2000), 2000, 416, 4, mirror=True)    # in the last 100
Span(kept=201, mirrored=True)
>>> spans(slice(0, 50), slice(1900, 2000), (2000, 100), (416, 416), 4)  # y grows
(Span(kept=201, mirrored=True), Span(kept=66, mirrored=False))
>>> spans(slice(0, 50), slice(1900, 2000), (2000, 100), (416, 416), 3)  # area: no mirror
(Span(kept=2000, mirrored=False), Span(kept=60, mirrored=False))
"""
import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ['SPARE', 'Span', 'kept', 'symmetric', 'span', 'spans']

#: Source pixels an output's taps reach past its position, by interpolation code
#: (nearest, linear, cubic, area, Lanczos); the scale is added to these (area averages a
#: scale's width, nearest rounds down by up to a scale).
_RADIUS = {0: 1, 1: 1, 2: 2, 3: 1, 4: 4}
#: The interpolation codes whose taps sit symmetrically about a sample's position
#: (linear, cubic, Lanczos), and area's.
_SYMMETRIC, _AREA = (1, 2, 4), 3
#: Outputs resized past the last one that reads the image: OpenCV's vector loops and its
#: border handling may round a row's last outputs otherwise, so these (all ``0``) absorb it.
SPARE = 16


class Span(NamedTuple):
    """The part of a crop's axis to resize: its first ``kept`` pixels, counted from the
    crop's end (and resized mirrored) if ``mirrored``."""
    kept: int
    mirrored: bool


def kept(stop: int, length: int, out: int, interp: int) -> int:
    """How many source pixels, from the start of an axis of ``length`` resized to ``out``
    with the interpolation code ``interp``, give every output that reads a pixel before
    ``stop``, and :data:`SPARE` more; ``length`` where that is all of it, or where the
    part would come out of the resize as many pixels as it has (OpenCV copies it then).

    >>> kept(100, 2000, 416, 1), kept(1990, 2000, 416, 1), kept(10, 1000, 999, 1)
    (193, 2000, 1000)
    """
    scale = length / out
    reach = _RADIUS[interp] + scale + 1
    # the first output whose taps all lie past stop
    clear = math.ceil((stop + reach + 0.5) / scale - 0.5)
    part = math.ceil((clear + SPARE + 0.5) * scale - 0.5 + reach) + 1
    # OpenCV copies, not resizes, an image whose resized size is its own (its count:
    # rounded to even, as cv::resize rounds it)
    if part >= length or round(part * (out / length)) == part:
        return length
    return part


def symmetric(interp: int, size: Sequence[int], out_size: Sequence[int]) -> bool:
    """Whether OpenCV's resize of ``size = (width, height)`` to ``out_size`` with the
    interpolation code ``interp`` treats both ends of each axis alike (up to float
    rounding): linear, cubic and Lanczos do; area does where both sides shrink (it
    averages cells then, and interpolates from ``floor(d * scale)`` otherwise); nearest
    does not.

    >>> symmetric(4, (100, 100), (416, 416)), symmetric(3, (500, 500), (416, 416))
    (True, True)
    >>> symmetric(3, (100, 500), (416, 416)), symmetric(0, (500, 500), (416, 416))
    (False, False)
    """
    if interp == _AREA:
        return size[0] >= out_size[0] and size[1] >= out_size[1]
    return interp in _SYMMETRIC


def span(shown: slice, length: int, out: int, interp: int, mirror: bool = False) -> Span:
    """The :class:`Span` of an axis of ``length`` pixels, of which ``shown`` (a slice) shows
    the image, to resize to ``out`` with the interpolation code ``interp`` (0-4): the part
    from the start or, if ``mirror`` (see :func:`symmetric`) and it is shorter, the part
    from the end.

    >>> span(slice(1000, 1100), 2000, 416, 1)      # from the start: up to past the image
    Span(kept=1193, mirrored=False)
    >>> span(slice(1000, 1100), 2000, 416, 1, mirror=True)   # from the end: past it too
    Span(kept=1097, mirrored=True)
    """
    forward = kept(shown.stop, length, out, interp)
    if not mirror:
        return Span(forward, False)
    backward = kept(length - shown.start, length, out, interp)
    return Span(backward, True) if backward < forward else Span(forward, False)


def spans(rows: slice, cols: slice, size: Sequence[int], out_size: Sequence[int],
          interp: int) -> tuple[Span, Span]:
    """The ``(x, y)`` :class:`Span` of a crop of ``size = (width, height)`` whose ``rows``
    and ``cols`` (slices) show the image, to resize to ``out_size`` with ``interp``, parts
    from the end allowed where the resize is :func:`symmetric`.

    >>> spans(slice(0, 375), slice(1500, 2000), (2000, 1500), (416, 416), 4)
    (Span(kept=600, mirrored=True), Span(kept=455, mirrored=False))
    """
    mirror = symmetric(interp, size, out_size)
    return (span(cols, size[0], out_size[0], interp, mirror),
            span(rows, size[1], out_size[1], interp, mirror))
