"""MXNet's float32 box IoU in numpy: the one implementation the SSD, YOLOv3 and RPN targets share.

gluoncv's target generators call ``mx.nd.contrib.box_iou(lhs, rhs, format='corner')``. Its
kernel works in float32 and in a fixed order: per axis the overlap is ``min(right edges)
- max(left edges)``, taken as 0 unless positive; the intersection is the product of the
two; a box whose width or height is negative has area 0; and the result is 0 where the
intersection is not positive, else ``inter / (area_lhs + area_rhs - inter)``. The targets
compare IoUs against thresholds and against each other, so a float64 IoU (which differs in
a few percent of the entries after rounding) would move anchors across thresholds and
change matches; this module repeats that float32 arithmetic exactly.

- :func:`box_iou` has MXNet's signature and layout, ``(N, M)`` for ``N`` anchors and ``M``
  boxes.
- :class:`AnchorSet` is for anchors that stay fixed while boxes change (every generator
  here): it keeps the anchors' coordinates as contiguous rows and their areas, and
  :meth:`AnchorSet.iou` lays the result out box by anchor, ``(..., M, N)`` for boxes
  ``(..., M, 4)``, so every step is a pass over long contiguous rows and a batch of
  samples is one call.

Examples
--------
>>> import numpy as np
>>> anchors = np.array([[0, 0, 10, 10], [5, 5, 15, 15]], np.float32)
>>> box_iou(anchors, np.array([[0, 0, 10, 10]], np.float32))
array([[1.        ],
       [0.14285715]], dtype=float32)
>>> AnchorSet(anchors).iou(np.array([[[0, 0, 10, 10]], [[5, 5, 15, 15]]], np.float32))
array([[[1.        , 0.14285715]],
<BLANKLINE>
       [[0.14285715, 1.        ]]], dtype=float32)
"""
import numpy as np
from numpy.typing import ArrayLike

__all__ = ['box_iou', 'box_areas', 'AnchorSet']

_F32 = np.float32
_ZERO = np.float32(0)


def box_areas(xmin: np.ndarray, ymin: np.ndarray, xmax: np.ndarray,
              ymax: np.ndarray) -> np.ndarray:
    """Areas of corner boxes as MXNet's ``box_iou`` takes them: ``width * height``, but 0
    for a box whose width or height is negative. The arguments are float32 arrays that
    broadcast together.

    Examples
    --------
    >>> box_areas(*np.array([[0, 0, 2, 3], [4, 4, 1, 9]], np.float32).T)
    array([6., 0.], dtype=float32)
    """
    with np.errstate(over='ignore', invalid='ignore'):
        width = xmax - xmin
        height = ymax - ymin
        area = width * height
    return np.where((width < 0) | (height < 0), _ZERO, area)


class AnchorSet:
    """Fixed float32 anchors, prepared for many :meth:`iou` calls against changing boxes.

    Parameters
    ----------
    corners : array-like
        ``(N, 4)`` anchors, ``xmin, ymin, xmax, ymax`` (cast to float32).

    Attributes
    ----------
    rows : numpy.ndarray
        ``(4, N)`` float32, one contiguous row per coordinate (``xmin`` first).
    areas : numpy.ndarray
        ``(N,)`` float32 areas (:func:`box_areas`).
    regular : bool
        Every area is finite and positive: the condition, together with finite boxes, for
        the quick path of :meth:`iou`.

    Examples
    --------
    >>> anchors = AnchorSet([[0, 0, 4, 4], [2, 2, 6, 6]])
    >>> anchors.iou(np.array([[2, 2, 6, 6], [9, 9, 8, 8]], np.float32))
    array([[0.14285715, 1.        ],
           [0.        , 0.        ]], dtype=float32)
    """

    __slots__ = ('rows', 'areas', 'regular')

    def __init__(self, corners: ArrayLike) -> None:
        corners = np.asarray(corners, dtype=_F32).reshape(-1, 4)
        self.rows = np.ascontiguousarray(corners.T)
        self.areas = box_areas(*self.rows)
        self.regular = bool(np.all(self.areas > 0) and np.all(np.isfinite(self.areas)))

    def __len__(self) -> int:
        return self.rows.shape[1]

    @property
    def nbytes(self) -> int:
        """Memory of the rows and the areas."""
        return self.rows.nbytes + self.areas.nbytes

    def iou(self, boxes: np.ndarray) -> np.ndarray:
        """IoU of every box with every anchor, MXNet's float32 bits, ``(..., M, N)``.

        Parameters
        ----------
        boxes : numpy.ndarray
            ``(..., M, 4)`` float32 corners; any leading axes (e.g. a batch) are kept.

        Returns
        -------
        numpy.ndarray
            ``(..., M, N)`` float32, a new array.
        """
        box_cols = [boxes[..., k, np.newaxis] for k in range(4)]    # (..., M, 1) each
        box_area = box_areas(*box_cols)
        if self._finite(boxes, box_area):
            return _iou_finite(self.rows, self.areas, box_cols, box_area)
        return _iou_literal(self.rows, self.areas, box_cols, box_area)

    def finite(self, boxes: np.ndarray) -> bool:
        """Whether every IoU of ``boxes`` (float32 corners) with these anchors is finite
        and within [0, 1]: finite boxes of finite area, and ``regular`` anchors.

        >>> anchors = AnchorSet([[0, 0, 4, 4]])
        >>> anchors.finite(np.array([[0, 0, 1, 1]], np.float32))
        True
        >>> anchors.finite(np.array([[0, 0, np.inf, 1]], np.float32))
        False
        """
        return self._finite(boxes, box_areas(*(boxes[..., k] for k in range(4))))

    def _finite(self, boxes, box_area):
        return self.regular and bool(np.all(np.isfinite(boxes))) and bool(
            np.all(np.isfinite(box_area)))


def box_iou(anchors: ArrayLike, boxes: ArrayLike) -> np.ndarray:
    """IoU of every anchor with every box, ``mx.nd.contrib.box_iou(anchors, boxes,
    format='corner')`` bit for bit.

    Parameters
    ----------
    anchors : array-like
        ``(N, 4)`` corners (cast to float32).
    boxes : array-like
        ``(M, 4)`` corners (cast to float32).

    Returns
    -------
    numpy.ndarray
        ``(N, M)`` float32.

    Examples
    --------
    >>> box_iou(np.array([[0, 0, 4, 4]], np.float32),
    ...         np.array([[2, 2, 6, 6], [4, 4, 8, 8], [3, 3, 2, 2]], np.float32))
    array([[0.14285715, 0.        , 0.        ]], dtype=float32)
    """
    boxes = np.asarray(boxes, dtype=_F32).reshape(-1, 4)
    return AnchorSet(anchors).iou(boxes).T


def _iou_finite(rows, areas, box_cols, box_area):
    """The quick path, for finite boxes of finite area and anchors of positive finite area.

    There ``np.minimum``/``np.maximum`` pick the same edges as MXNet's comparisons, and the
    clamp ``np.maximum(side, 0)`` turns a ``-0`` into ``+0``, so the intersection is +0 or
    positive and every union positive: ``0 / union`` is MXNet's +0 and no special case is
    needed. Three buffers of the output's shape are written in place, no temporaries.
    """
    shape = np.broadcast_shapes(box_area.shape, areas.shape)
    inter, other, edge = (np.empty(shape, _F32) for _ in range(3))
    for low, high, side in ((0, 2, inter), (1, 3, other)):
        np.minimum(rows[high], box_cols[high], out=side)     # the nearer far edge
        np.maximum(rows[low], box_cols[low], out=edge)       # the farther near edge
        np.subtract(side, edge, out=side)
        np.maximum(side, _ZERO, out=side)                    # argument order: -0 -> +0
    np.multiply(inter, other, out=inter)
    union = np.add(areas, box_area, out=other)
    with np.errstate(over='ignore'):                         # huge areas: MXNet's inf too
        np.subtract(union, inter, out=union)
    return np.divide(inter, union, out=inter)


def _iou_literal(rows, areas, box_cols, box_area):
    """MXNet's comparisons taken literally, for anything the quick path does not cover
    (NaN or infinite coordinates, overflowing or empty areas): a NaN edge loses every
    comparison and an overlap that is not positive counts as 0."""
    x1, y1, x2, y2 = rows
    bx1, by1, bx2, by2 = box_cols
    with np.errstate(all='ignore'):
        across = np.where(x2 < bx2, x2, bx2) - np.where(x1 > bx1, x1, bx1)
        down = np.where(y2 < by2, y2, by2) - np.where(y1 > by1, y1, by1)
        inter = np.where(across > 0, across, _ZERO) * np.where(down > 0, down, _ZERO)
        ratio = inter / (areas + box_area - inter)
    return np.where(inter <= 0, _ZERO, ratio).astype(_F32, copy=False)
