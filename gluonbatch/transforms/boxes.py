"""Box arithmetic of the presets, following gluoncv's dtype rules exactly.

Each function takes a label array ``(N, 4+)`` (``xmin, ymin, xmax, ymax`` then extra columns
that ride along), returns a new array and never writes to its input. The dtype rules are
part of the seeded equivalence: ``translate``, ``crop`` and ``flip`` keep the label's dtype,
``resize`` returns float64 (as gluoncv's ``bbox.resize`` does).

A sample's few boxes cost numpy more in calls than in arithmetic. A float64 label of a few
boxes with plain, finite numbers is done in Python floats, which are float64 and round the
same operations alike (:func:`python_rows` says when); every other label goes through
numpy.

Examples
--------
>>> import numpy as np
>>> label = np.array([[10., 20., 30., 40., 1.]])
>>> flip(label, (100, 50), flip_x=True)
array([[70., 20., 90., 40.,  1.]])
>>> resize(label, (100, 50), (50, 100))
array([[ 5., 40., 15., 80.,  1.]])
"""
import math
from typing import Any, Sequence

import numpy as np

__all__ = ['plain_number', 'python_rows', 'PYTHON_ROWS', 'translate', 'crop', 'resize', 'flip']


def plain_number(value: Any) -> bool:
    """Whether ``value`` is a Python float, or an int that a double holds exactly: numbers
    whose arithmetic with doubles Python and numpy (and C) round alike.

    >>> plain_number(2.5), plain_number(2 ** 53), plain_number(2 ** 53 + 1), plain_number(True)
    (True, True, False, False)
    """
    return type(value) is float or (type(value) is int and abs(value) <= 2 ** 53)


#: Labels of more boxes than this go through numpy, whose cost per call then wins.
PYTHON_ROWS = 16
_FLOAT64 = np.dtype(np.float64)  # native byte order: another order takes numpy's path


def python_rows(label: np.ndarray, numbers: Sequence[Any] = (),
                finite: bool = False) -> list[list[float]] | None:
    """``label``'s rows as lists of Python floats where arithmetic on them gives numpy's
    bits: a plain float64 ``(N, 4+)`` ndarray of at most :data:`PYTHON_ROWS` rows, with
    ``numbers`` all plain (:func:`plain_number`) and finite (two NaNs give either one's
    bits) and, with ``finite``, finite values, extra columns included (numpy's ``maximum``
    spreads a NaN, Python's comparisons do not). None where numpy must do the arithmetic
    (or may: numpy's results are the same). numpy's floating-point error settings
    (``np.errstate``) do not apply to Python's floats.

    >>> python_rows(np.array([[1.0, 2.0, 3.0, 4.0, 7.0]]), (10, 0.5))
    [[1.0, 2.0, 3.0, 4.0, 7.0]]
    >>> python_rows(np.array([[1, 2, 3, 4, 7]])) is None  # ints: numpy's arithmetic
    True
    """
    if (type(label) is not np.ndarray or label.dtype != _FLOAT64 or label.ndim != 2
            or label.shape[1] < 4 or len(label) > PYTHON_ROWS):
        return None
    for number in numbers:
        if not (plain_number(number) and math.isfinite(number)):
            return None
    rows = label.tolist()
    # one sum is finite only if every value is (a sum too large for a double is
    # refused too, and gets numpy's arithmetic all the same)
    if finite and not math.isfinite(sum(map(sum, rows))):
        return None
    return rows


def _from_rows(rows, label):
    """A new float64 array of ``rows``, shaped as ``label``'s rows (``(0, C)`` when empty)."""
    return np.array(rows, np.float64).reshape(-1, label.shape[1])


def translate(label: np.ndarray, x_offset: float = 0, y_offset: float = 0) -> np.ndarray:
    """Shift boxes by ``(x_offset, y_offset)``.

    >>> translate(np.array([[1, 2, 3, 4, 0]]), 10, 20)
    array([[11, 22, 13, 24,  0]])
    """
    rows = python_rows(label, (x_offset, y_offset))
    if rows is not None:
        for row in rows:
            row[0] += x_offset
            row[1] += y_offset
            row[2] += x_offset
            row[3] += y_offset
        return _from_rows(rows, label)
    moved = label.copy()
    moved[:, :2] += (x_offset, y_offset)
    moved[:, 2:4] += (x_offset, y_offset)
    return moved


def crop(label: np.ndarray, crop_box: Sequence[float],
         keep_outside_center: bool = False) -> np.ndarray:
    """Boxes seen through the crop ``crop_box = (x, y, width, height)``: clipped to it,
    shifted to its origin; boxes left empty are dropped, and so (unless
    ``keep_outside_center``) are boxes whose centre lies outside it (half-open:
    ``[x, x + width)``).

    >>> crop(np.array([[0., 0., 10., 10., 0.], [50., 50., 60., 60., 1.]]), (5, 5, 20, 20))
    array([[0., 0., 5., 5., 0.]])
    """
    left, top, width, height = crop_box
    rows = python_rows(label, crop_box, finite=True)
    if rows is not None:
        return _from_rows(_crop_rows(rows, (left, top, left + width, top + height),
                                     keep_outside_center), label)
    # float64 edges as gluoncv's np.array of Python ints/floats; the label dtype decides the
    # arithmetic below exactly as in gluoncv (numpy's in-place casting rules).
    edges = np.array((left, top, left + width, top + height))
    out = label.copy()
    if keep_outside_center:
        keep = np.ones(out.shape[0], dtype=bool)
    else:
        centers = (out[:, :2] + out[:, 2:4]) / 2
        keep = np.logical_and(edges[:2] <= centers, centers < edges[2:]).all(axis=1)
    out[:, :2] = np.maximum(out[:, :2], edges[:2])
    out[:, 2:4] = np.minimum(out[:, 2:4], edges[2:4])
    out[:, :2] -= edges[:2]
    out[:, 2:4] -= edges[:2]
    keep = np.logical_and(keep, (out[:, :2] < out[:, 2:4]).all(axis=1))
    return out[keep]


def _crop_rows(rows, edges, keep_outside_center):
    """:func:`crop` of finite float rows: numpy's ``maximum(a, b)`` is ``a`` only where
    ``a > b`` (a tie gives ``b``, which decides the sign of a zero), ``minimum`` alike."""
    left, top, right, bottom = (float(edge) for edge in edges)
    kept = []
    for row in rows:
        x0, y0, x1, y1 = row[:4]
        if not keep_outside_center:
            center_x, center_y = (x0 + x1) / 2, (y0 + y1) / 2
            if not (left <= center_x < right and top <= center_y < bottom):
                continue
        x0 = (x0 if x0 > left else left) - left
        y0 = (y0 if y0 > top else top) - top
        x1 = (x1 if x1 < right else right) - left
        y1 = (y1 if y1 < bottom else bottom) - top
        if x0 < x1 and y0 < y1:
            kept.append([x0, y0, x1, y1] + row[4:])
    return kept


def resize(label: np.ndarray, in_size: Sequence[float], out_size: Sequence[float]) -> np.ndarray:
    """Scale boxes from an image of ``in_size = (w, h)`` to one of ``out_size``; float64.

    >>> resize(np.array([[2, 2, 4, 4, 7]], 'float32'), (4, 4), (8, 2)).dtype
    dtype('float64')
    """
    x_scale = out_size[0] / in_size[0]
    y_scale = out_size[1] / in_size[1]
    rows = python_rows(label, (x_scale, y_scale))
    if rows is not None:
        for row in rows:
            row[0:4] = x_scale * row[0], y_scale * row[1], x_scale * row[2], y_scale * row[3]
        return _from_rows(rows, label)
    out = label.astype(np.float64)
    out[:, 1] = y_scale * out[:, 1]
    out[:, 3] = y_scale * out[:, 3]
    out[:, 0] = x_scale * out[:, 0]
    out[:, 2] = x_scale * out[:, 2]
    return out


def flip(label: np.ndarray, size: Sequence[float], flip_x: bool = False,
         flip_y: bool = False) -> np.ndarray:
    """Mirror boxes in an image of ``size = (w, h)``, horizontally and/or vertically.

    >>> flip(np.array([[1., 2., 3., 5., 0.]]), (10, 10), flip_y=True)
    array([[1., 5., 3., 8., 0.]])
    """
    width, height = size
    rows = python_rows(label, (width, height))
    if rows is not None:
        for row in rows:
            if flip_y:
                row[1], row[3] = height - row[3], height - row[1]
            if flip_x:
                row[0], row[2] = width - row[2], width - row[0]
        return _from_rows(rows, label)
    out = label.copy()
    if flip_y:
        out[:, 1], out[:, 3] = height - label[:, 3], height - label[:, 1]
    if flip_x:
        out[:, 0], out[:, 2] = width - label[:, 2], width - label[:, 0]
    return out
