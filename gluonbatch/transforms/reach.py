"""How far a resize's outputs read into its source: the part of a crop window worth resizing.

An expanded canvas's crop window is mostly fill where the image sits away from the
window's edges, and a resize pays for every row it filters and every output it writes,
fill included (a Lanczos resize of a window 4 times the image's width and height filters
all of the window's rows). An output whose taps read fill alone is ``0`` (the fill is
stored as ``0``), so only the part of the window up to the outputs that read the image is
worth resizing, at the whole window's scale.

An output ``d`` of a resize by ``scale`` reads its source around ``(d + 0.5) * scale - 0.5``
(OpenCV's positions): positions that depend on the part's start, not on its end. So the
part keeps the window's start and ends past the image's reach: its outputs are the
window's, and the rest are ``0``. The part may instead keep the window's end, resized
mirrored, for the interpolations whose taps sit symmetrically about that position (linear,
cubic, Lanczos); their positions are then computed from the other end, the same up to
OpenCV's float32 rounding of positions. Nearest (``floor(d * scale)``) and area (its
cells start at ``d * scale``, and where a side grows it interpolates from
``floor(d * scale)``) lean one way: their parts keep the window's start.

Examples
--------
>>> # an image in the first 100 of a 2000-pixel-wide window, resized to 416
>>> span(slice(0, 100), 2000, 416, 4)
Span(kept=201, mirrored=False)
>>> span(slice(1900, 2000), 2000, 416, 4)    # in the last 100: mirrored
Span(kept=201, mirrored=True)
>>> span(slice(1900, 2000), 2000, 416, 3)    # area keeps the window's start
Span(kept=2000, mirrored=False)
"""
import math
from typing import NamedTuple

__all__ = ['SPARE', 'Span', 'kept', 'span']

#: Source pixels an output's taps reach past its position, by interpolation code
#: (nearest, linear, cubic, area, Lanczos); the scale is added to these (area averages a
#: scale's width, nearest rounds down by up to a scale).
_RADIUS = {0: 1, 1: 1, 2: 2, 3: 1, 4: 4}
#: The interpolation codes whose parts may keep the window's end, mirrored.
_SYMMETRIC = (1, 2, 4)
#: Outputs resized past the last one that reads the image: OpenCV's vector loops and its
#: border handling may round a row's last outputs otherwise, so these (all ``0``) absorb it.
SPARE = 16


class Span(NamedTuple):
    """The part of a window's axis to resize: its first ``kept`` pixels, counted from the
    window's end (and resized mirrored) if ``mirrored``."""
    kept: int
    mirrored: bool


def kept(stop, length, out, interp):
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


def span(shown, length, out, interp):
    """The :class:`Span` of an axis of ``length`` pixels, of which ``shown`` (a slice) shows
    the image, to resize to ``out`` with the interpolation code ``interp`` (0-4): the
    shorter of the part from the start and, for linear, cubic and Lanczos, the part from
    the end."""
    forward = kept(shown.stop, length, out, interp)
    if interp not in _SYMMETRIC:
        return Span(forward, False)
    backward = kept(length - shown.start, length, out, interp)
    return Span(backward, True) if backward < forward else Span(forward, False)
