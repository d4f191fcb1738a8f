"""A batch of detection labels as padded float32 arrays: the input of the batch targets.

SSD and YOLOv3 targets are computed for a whole batch at once from ``(B, M, ...)`` arrays;
:func:`label_batch` makes them from a list of per-sample ``(M_i, 5+)`` labels (rows
``xmin, ymin, xmax, ymax, class, ...``) or from one padded ``(B, M, 5+)`` array, as
gluoncv's ``Pad(pad_val=-1)`` gives it.

Examples
--------
>>> import numpy as np
>>> batch = label_batch([np.array([[1., 2., 3., 4., 0.]]), np.zeros((0, 5))])
>>> batch.boxes[1].tolist(), batch.ids.tolist(), batch.real.tolist()
([[-1.0, -1.0, -1.0, -1.0]], [[0.0], [-1.0]], [[True], [False]])
"""
from collections.abc import Sequence
from typing import NamedTuple, TypeAlias

import numpy as np

from .._core.inputs import as_numpy, label_array
from .._core.typing import NDArray

__all__ = ['LabelBatch', 'label_batch']

#: One sample's ``(M, 5+)`` label: rows ``xmin, ymin, xmax, ymax, class, ...``.
Label: TypeAlias = np.ndarray | NDArray
#: A batch's labels: one :data:`Label` per sample, or one padded ``(B, M, 5+)`` array.
Labels: TypeAlias = Sequence[Label] | np.ndarray | NDArray


class LabelBatch(NamedTuple):
    """Labels of ``B`` samples padded to ``M`` rows: padding rows have boxes and ids of -1
    and a last column of 1."""

    #: ``(B, M, 4)`` float32 corner boxes.
    boxes: np.ndarray
    #: ``(B, M)`` float32 class ids.
    ids: np.ndarray
    #: ``(B, M)`` float32, each row's last column (YOLOv3's mixup ratio).
    last: np.ndarray
    #: ``(B, M)`` bool: the row is one of the sample's own (for a padded array: its class
    #: id is not negative).
    real: np.ndarray


def label_batch(labels: Labels) -> LabelBatch:
    """A :class:`LabelBatch` of a list of ``(M_i, 5+)`` labels or of a padded
    ``(B, M, 5+)`` array (numpy or NDArray)."""
    if isinstance(labels, (list, tuple)):
        rows = [label_array(label, name='the label of sample %d' % i)
                for i, label in enumerate(labels)]
        longest = max((r.shape[0] for r in rows), default=0)
        shape = (len(rows), longest)
        boxes = np.full(shape + (4,), -1, np.float32)
        ids = np.full(shape, -1, np.float32)
        last = np.ones(shape, np.float32)
        real = np.zeros(shape, bool)
        for i, r in enumerate(rows):
            count = r.shape[0]
            boxes[i, :count] = r[:, :4]
            ids[i, :count] = r[:, 4]
            last[i, :count] = r[:, -1]
            real[i, :count] = True
        return LabelBatch(boxes, ids, last, real)
    labels = as_numpy(labels, 'labels')
    if labels.ndim != 3 or labels.shape[2] < 5:
        raise ValueError('labels must be a list of (M, 5+) arrays or a padded (B, M, 5+) '
                         'array, got shape %s' % (labels.shape,))
    ids = np.asarray(labels[..., 4], np.float32)
    return LabelBatch(np.asarray(labels[..., :4], np.float32), ids,
                      np.asarray(labels[..., -1], np.float32), ids >= 0)
