"""An embedded detection dataset: deterministic pictures of drawn objects and their labels.

Nothing is downloaded: sample ``i`` is drawn from a seed, so every run, worker process and
machine sees the same images. Labels follow gluoncv's dataset classes, so its transforms
apply unchanged: VOC-style ``(image, label)`` with label rows
``[xmin, ymin, xmax, ymax, class_id, difficult]``, or COCO-instance-style
``(image, label, polygons)`` for Mask R-CNN.
"""
from typing import TypeAlias

import mxnet as mx
import numpy as np
from PIL import Image, ImageDraw

from .._core.checks import check_int
from .._core.typing import NDArray

__all__ = ['SyntheticDetection', 'CLASSES']

#: Class names; the same count as Pascal VOC, so gluoncv's ``*_voc`` networks fit.
CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat', 'chair',
           'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person', 'pottedplant',
           'sheep', 'sofa', 'train', 'tvmonitor')

_ELLIPSE_POINTS = 24

#: A sample: ``(image, label)``, and its polygons per object with ``masks=True``.
Item: TypeAlias = (tuple[NDArray, np.ndarray]
                   | tuple[NDArray, np.ndarray, list[list[np.ndarray]]])


class SyntheticDetection(mx.gluon.data.Dataset):
    """Deterministic images with 1..``max_objects`` drawn rectangles and ellipses.

    Parameters
    ----------
    length : int, default 64
        Number of samples.
    size_range : ((int, int), (int, int)), default ((240, 360), (320, 480))
        Ranges of image height and width; sizes vary so that batches need padding.
    max_objects : int, default 6
    masks : bool, default False
        Also return each object's outline as polygons (COCO instance style), for Mask R-CNN.
    seed : int, default 0

    Examples
    --------
    >>> dataset = SyntheticDetection(length=4, seed=1)
    >>> image, label = dataset[0]
    >>> image.dtype, image.shape[2], label.shape[1]
    (<class 'numpy.uint8'>, 3, 6)
    >>> bool((label[:, 2] > label[:, 0]).all() and (label[:, 4] < len(dataset.classes)).all())
    True
    >>> (dataset[0][0] == image).asnumpy().all()  # the same sample every time
    True
    >>> dataset.get_im_aspect_ratio()[0] == image.shape[1] / image.shape[0]
    True
    """

    classes = CLASSES

    def __init__(self, length: int = 64,
                 size_range: tuple[tuple[int, int], tuple[int, int]] = ((240, 360), (320, 480)),
                 max_objects: int = 6, masks: bool = False, seed: int = 0) -> None:
        self._length = check_int(length, 'length', minimum=1)
        self._size_range = size_range
        self._max_objects = check_int(max_objects, 'max_objects', minimum=1)
        self._masks = bool(masks)
        self._seed = check_int(seed, 'seed', minimum=0)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Item:
        if not -self._length <= idx < self._length:
            raise IndexError('sample %d of a dataset of %d' % (idx, self._length))
        rng = np.random.default_rng([self._seed, idx % self._length])
        height, width = self._draw_size(rng)
        picture = Image.fromarray(self._background(rng, height, width))
        draw = ImageDraw.Draw(picture)
        labels, polygons = [], []
        for _ in range(int(rng.integers(1, self._max_objects + 1))):
            class_id = int(rng.integers(len(CLASSES)))
            box_w = int(rng.integers(width // 8, width // 2))
            box_h = int(rng.integers(height // 8, height // 2))
            x0, y0 = int(rng.integers(0, width - box_w)), int(rng.integers(0, height - box_h))
            outline = self._outline(rng, x0, y0, x0 + box_w, y0 + box_h)
            draw.polygon([tuple(p) for p in outline], fill=self._color(class_id),
                         outline=(255, 255, 255))
            labels.append([x0, y0, x0 + box_w, y0 + box_h, class_id, 0])
            polygons.append([outline.astype(np.float32)])
        image = mx.nd.array(np.asarray(picture), dtype='uint8')
        label = np.array(labels, np.float32)
        return (image, label, polygons) if self._masks else (image, label)

    def get_im_aspect_ratio(self) -> list[float]:
        """Width / height of every image, without drawing them (for aspect-ratio batching)."""
        sizes = (self._draw_size(np.random.default_rng([self._seed, idx]))
                 for idx in range(self._length))
        return [width / height for height, width in sizes]

    def _draw_size(self, rng):
        (h_lo, h_hi), (w_lo, w_hi) = self._size_range
        return int(rng.integers(h_lo, h_hi + 1)), int(rng.integers(w_lo, w_hi + 1))

    @staticmethod
    def _background(rng, height, width):
        base = rng.integers(40, 200, size=3)
        ramp = np.linspace(0, 40, width)[None, :, None]
        noise = rng.integers(0, 20, size=(height, width, 1))
        return np.clip(base[None, None, :] + ramp + noise, 0, 255).astype(np.uint8)

    @staticmethod
    def _color(class_id):
        # distinct, stable colours per class
        hue = class_id / len(CLASSES)
        return tuple(int(127 + 127 * np.cos(2 * np.pi * (hue + shift)))
                     for shift in (0, 1 / 3, 2 / 3))

    @staticmethod
    def _outline(rng, x0, y0, x1, y1):
        """A rectangle or an ellipse inscribed in the box, as (K, 2) points."""
        if rng.random() < 0.5:
            return np.array([[x0, y0], [x1, y0], [x1, y1], [x0, y1]], np.float64)
        angles = np.linspace(0, 2 * np.pi, _ELLIPSE_POINTS, endpoint=False)
        cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
        return np.stack([cx + rx * np.cos(angles), cy + ry * np.sin(angles)], axis=1)
