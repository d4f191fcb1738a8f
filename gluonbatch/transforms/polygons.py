"""Instance polygons of the Mask R-CNN presets, following gluoncv's ``data.transforms.mask``.

A sample's ``segm`` holds, per object, a list of polygons, each a numpy ``(K, 2)`` array of
``(x, y)`` points. The polygons are resized and flipped as polygons (as gluoncv does, so
nothing is lost to resampling a bitmap) and rasterised once at the output size with
pycocotools, exactly as gluoncv's ``mask.to_mask``.

The arithmetic keeps gluoncv's dtype rules: each polygon is written in place in a copy of
itself, so it keeps its dtype (a float32 polygon is scaled in float32, an integer one
truncated). Inputs are never modified.

Examples
--------
>>> import numpy as np
>>> square = [np.array([[1., 1.], [3., 1.], [3., 3.], [1., 3.]])]
>>> resize(square, (4, 4), (8, 8))[0][1], flip(square, (4, 4), flip_x=True)[0][1]
(array([6., 2.]), array([1., 1.]))
>>> to_masks([square], (4, 4))[0]
array([[0., 0., 0., 0.],
       [0., 1., 1., 0.],
       [0., 1., 1., 0.],
       [0., 0., 0., 0.]], dtype=float32)
"""
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np

from .._core.checks import describe

__all__ = ['check', 'resize', 'flip', 'to_masks']

#: A Mask R-CNN label's polygons: per object, a list of ``(K, 2)`` arrays of points.
Segmentation: TypeAlias = Sequence[Sequence[np.ndarray]]


def check(segm: Any, name: str = 'segm') -> None:
    """Raise ``TypeError``/``ValueError`` unless ``segm`` is a non-empty list of objects,
    each a non-empty list of numpy ``(K, 2)`` polygons.

    >>> check([[np.zeros((3, 2))]])
    >>> check([[]])
    Traceback (most recent call last):
    ...
    ValueError: segm[0] has no polygon; each object needs at least one (K, 2) array
    """
    if not isinstance(segm, (list, tuple)):
        raise TypeError('%s must be a list with a list of polygons per object, got %s'
                        % (name, describe(segm)))
    if not segm:
        raise ValueError('%s has no object: Mask R-CNN needs at least one (gluoncv fails '
                         'stacking no masks)' % name)
    for i, polys in enumerate(segm):
        if not isinstance(polys, (list, tuple)):
            raise TypeError('%s[%d] must be a list of (K, 2) polygon arrays, got %s'
                            % (name, i, describe(polys)))
        if not polys:
            raise ValueError('%s[%d] has no polygon; each object needs at least one (K, 2) '
                             'array' % (name, i))
        for j, poly in enumerate(polys):
            if not isinstance(poly, np.ndarray):
                raise TypeError('%s[%d][%d] must be a numpy (K, 2) array of points, got %s'
                                % (name, i, j, describe(poly)))
            if poly.ndim != 2 or poly.shape[1] != 2 or poly.dtype.kind not in 'fiu':
                raise ValueError('%s[%d][%d] must be a numeric (K, 2) array of points, got %s'
                                 % (name, i, j, describe(poly)))


def resize(polys: Sequence[np.ndarray], in_size: Sequence[float],
           out_size: Sequence[float]) -> list[np.ndarray]:
    """The polygons of one object scaled from an image of ``in_size = (w, h)`` to one of
    ``out_size``; gluoncv's ``mask.resize``.

    >>> resize([np.array([[2, 4]], 'float32')], (4, 4), (6, 2))[0]
    array([[3., 2.]], dtype=float32)
    """
    x_scale = 1.0 * out_size[0] / in_size[0]
    y_scale = 1.0 * out_size[1] / in_size[1]
    out = []
    for poly in polys:
        moved = poly.copy()
        moved[:, 0] = x_scale * poly[:, 0]
        moved[:, 1] = y_scale * poly[:, 1]
        out.append(moved)
    return out


def flip(polys: Sequence[np.ndarray], size: Sequence[float], flip_x: bool = False,
         flip_y: bool = False) -> list[np.ndarray]:
    """The polygons of one object mirrored in an image of ``size = (w, h)``; gluoncv's
    ``mask.flip``.

    >>> flip([np.array([[1., 2.]])], (10, 8), flip_y=True)[0]
    array([[1., 6.]])
    """
    width, height = size
    out = []
    for poly in polys:
        moved = poly.copy()
        if flip_y:
            moved[:, 1] = height - moved[:, 1]
        if flip_x:
            moved[:, 0] = width - moved[:, 0]
        out.append(moved)
    return out


def to_masks(segm: Segmentation, size: Sequence[int]) -> np.ndarray:
    """Every object's polygons rasterised into one ``(objects, height, width)`` float32
    array of 0 and 1 for an image of ``size = (w, h)``: per object pycocotools'
    ``frPyObjects``, ``merge`` and ``decode``, as gluoncv's ``mask.to_mask``."""
    import pycocotools.mask as cocomask
    width, height = size
    out = np.empty((len(segm), height, width), np.float32)
    for i, polys in enumerate(segm):
        rles = cocomask.frPyObjects([p.flatten().tolist() for p in polys], height, width)
        out[i] = cocomask.decode(cocomask.merge(rles))
    return out
