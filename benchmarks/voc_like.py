"""VOC-like detection samples for the transform cases: 500x375 JPEGs with 2-8 boxes.

A sample is what gluoncv's ``VOCDetection`` hands a transform: the image decoded by
``mx.image.imdecode`` (an ``mx.nd.NDArray``, HWC uint8) and a float64 label with rows
``[xmin, ymin, xmax, ymax, class_id, difficult]``.

Examples
--------
>>> import numpy as np
>>> encoded = voc_like_samples(np.random.default_rng(0), 2)
>>> data = VOCLike(encoded)
>>> image, label = data[0]
>>> image.shape, label.dtype, 2 <= len(label) <= 8
((375, 500, 3), dtype('float64'), True)
"""
import io

import mxnet as mx
import numpy as np
from PIL import Image, ImageDraw

__all__ = ['voc_like_samples', 'VOCLike', 'IMAGE_SIZE']

#: (width, height) of every image.
IMAGE_SIZE = (500, 375)


def voc_like_samples(rng, count, size=IMAGE_SIZE):
    """``count`` samples ``(jpeg bytes, label)``: a noisy background with 2-8 filled boxes
    of 1/20 to 3/4 of the image's sides, labels float64, classes 0-19."""
    width, height = size
    samples = []
    for _ in range(count):
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        picture = Image.fromarray(pixels // 2 + 64)
        draw = ImageDraw.Draw(picture)
        rows = []
        for _ in range(int(rng.integers(2, 9))):
            box_w = int(rng.integers(width // 20, width * 3 // 4))
            box_h = int(rng.integers(height // 20, height * 3 // 4))
            x0 = int(rng.integers(0, width - box_w))
            y0 = int(rng.integers(0, height - box_h))
            draw.rectangle((x0, y0, x0 + box_w, y0 + box_h),
                           fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
            rows.append([x0, y0, x0 + box_w, y0 + box_h, int(rng.integers(0, 20)), 0])
        encoded = io.BytesIO()
        picture.save(encoded, format='JPEG', quality=90)
        samples.append((encoded.getvalue(), np.array(rows, np.float64)))
    return samples


class VOCLike(mx.gluon.data.Dataset):
    """The samples of :func:`voc_like_samples`, decoded on access as VOC's dataset does."""

    def __init__(self, samples):
        self._samples = samples

    def __len__(self):
        return len(self._samples)

    def __getitem__(self, idx):
        encoded, label = self._samples[idx]
        return mx.image.imdecode(encoded), label.copy()
