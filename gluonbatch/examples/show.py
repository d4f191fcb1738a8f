"""Draw the first batch of an example loader (``gluonbatch show``, ``make demo``)."""
import argparse

import mxnet as mx
import numpy as np

from .._core.layout import slice_bounds
from .._core.typing import PathLike
from .._core.wording import plural
from ..seeded import SeededDataset
from .picture import draw_detection_batch
from .runner import device_slices

__all__ = ['LOADERS', 'show_batch']

#: Loaders ``show`` can draw, with the batch size and device count used by default.
LOADERS = ('ssd', 'yolo', 'faster_rcnn', 'center_net')


def _rows(slices):
    """Per-sample numpy rows out of device slices: NDArrays, or already numpy (arrays or
    lists)."""
    return [row for piece in slices
            for row in (piece.asnumpy() if isinstance(piece, mx.nd.NDArray) else piece)]


def _first_samples(data, args):
    return [data[i] for i in range(min(args.batch_size, len(data)))]


def show_batch(loader: str, args: argparse.Namespace, path: PathLike) -> PathLike:
    """Build ``loader`` (one of ``LOADERS``) from ``args``; draw its first batch."""
    heatmaps = None
    if loader == 'faster_rcnn':
        from . import rcnn
        parts = rcnn.build('faster', args)
        # the train loader's first batch, each sample read as the seeded loader reads it
        seeded = SeededDataset(parts['train_data'])
        samples = [seeded[key] for key in next(iter(parts['sampler']))]
        batch = parts['train_batchify'](samples)
        images, labels = device_slices(batch[0]), device_slices(batch[1])
        title = 'Faster R-CNN train batch: %s in %s, each padded to its own largest ' \
                'image' % (plural(len(samples), 'image'), plural(len(images), 'device slice'))
    elif loader in ('ssd', 'yolo'):
        if loader == 'ssd':
            from . import ssd
            parts = ssd.build(args)
            data, batchify, box_field = parts['val_data'], parts['val_batchify'], 1
        else:
            from . import yolo
            parts = yolo.build(args)
            data, batchify, box_field = parts['train_data'], parts['train_batchify'], 6
        samples = _first_samples(data, args)
        batch = batchify(samples)
        images, labels = device_slices(batch[0]), device_slices(batch[box_field])
        title = '%s batch: %s, boxes padded with -1 to the longest list' % (
            loader.upper(), plural(len(samples), 'image'))
    elif loader == 'center_net':
        from . import center_net
        parts = center_net.build(args)
        samples = _first_samples(parts['train_data'], args)
        batch = [field.asnumpy() for field in parts['train_batchify'](samples)]
        images, labels = [batch[0]], [center_net.target_boxes(
            batch[1], batch[2], batch[3], batch[4], scale=parts['net'].scale)]
        heatmaps = [heatmap.max(axis=0) for heatmap in batch[1]]  # all classes in one map
        title = 'CenterNet train batch: %s, their heatmap targets and the boxes the ' \
                'targets encode' % plural(len(samples), 'image')
    else:
        raise ValueError('unknown loader %r; choose from %s' % (loader, ', '.join(LOADERS)))
    # SSD and YOLO pad only their labels per device; R-CNN images and labels alike
    bounds = slice_bounds(len(samples), max(len(images), len(labels)))
    devices = [device for device, (start, stop) in enumerate(bounds)
               for _ in range(start, stop)]
    sizes = [tuple(np.shape(sample[0])[1:]) for sample in samples]
    return draw_detection_batch(path, _rows(images), _rows(labels), sizes, devices, title,
                                heatmaps=heatmaps)
