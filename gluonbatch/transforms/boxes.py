"""Box arithmetic of the presets, following gluoncv's dtype rules exactly.

Each function takes a label array ``(N, 4+)`` (``xmin, ymin, xmax, ymax`` then extra columns
that ride along), returns a new array and never writes to its input. The dtype rules are
part of the seeded equivalence: ``translate``, ``crop`` and ``flip`` keep the label's dtype,
``resize`` returns float64 (as gluoncv's ``bbox.resize`` does).

Examples
--------
>>> import numpy as np
>>> label = np.array([[10., 20., 30., 40., 1.]])
>>> flip(label, (100, 50), flip_x=True)
array([[70., 20., 90., 40.,  1.]])
>>> resize(label, (100, 50), (50, 100))
array([[ 5., 40., 15., 80.,  1.]])
"""
from typing import Sequence

import numpy as np

__all__ = ['translate', 'crop', 'resize', 'flip']


def translate(label: np.ndarray, x_offset: float = 0, y_offset: float = 0) -> np.ndarray:
    """Shift boxes by ``(x_offset, y_offset)``.

    >>> translate(np.array([[1, 2, 3, 4, 0]]), 10, 20)
    array([[11, 22, 13, 24,  0]])
    """
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


def resize(label: np.ndarray, in_size: Sequence[float], out_size: Sequence[float]) -> np.ndarray:
    """Scale boxes from an image of ``in_size = (w, h)`` to one of ``out_size``; float64.

    >>> resize(np.array([[2, 2, 4, 4, 7]], 'float32'), (4, 4), (8, 2)).dtype
    dtype('float64')
    """
    out = label.astype(np.float64)
    x_scale = out_size[0] / in_size[0]
    y_scale = out_size[1] / in_size[1]
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
    out = label.copy()
    if flip_y:
        out[:, 1], out[:, 3] = height - label[:, 3], height - label[:, 1]
    if flip_x:
        out[:, 0], out[:, 2] = width - label[:, 2], width - label[:, 0]
    return out
