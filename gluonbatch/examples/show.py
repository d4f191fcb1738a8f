"""Draw the first batch of an example loader (``gluonbatch show``, ``make demo``)."""
import numpy as np

from .._core.layout import shard_bounds
from .picture import draw_detection_batch
from .runner import shard_list

__all__ = ['LOADERS', 'show_batch']

#: Loaders ``show`` can draw, with the batch size and shard count used by default.
LOADERS = ('ssd', 'yolo', 'faster_rcnn')


def _rows(shards):
    """Per-sample numpy rows out of per-shard NDArrays."""
    return [row for shard in shards for row in shard.asnumpy()]


def show_batch(loader, args, path):
    """Build ``loader`` ('ssd', 'yolo' or 'faster_rcnn') from ``args``; draw its first batch."""
    if loader == 'faster_rcnn':
        from .rcnn import build
        parts = build('faster', args)
        indices = next(iter(parts['sampler']))
        samples = [parts['train_data'][i] for i in indices]
        batch = parts['train_batchify'](samples)
        images, labels = shard_list(batch[0]), shard_list(batch[1])
        title = 'Faster R-CNN train batch: %d images in %d shard(s), each padded to its own ' \
                'largest image' % (len(samples), len(images))
    elif loader in ('ssd', 'yolo'):
        if loader == 'ssd':
            from .ssd import build
            parts = build(args)
            data, batchify, box_field = parts['val_data'], parts['val_batchify'], 1
        else:
            from .yolo import build
            parts = build(args)
            data, batchify, box_field = parts['train_data'], parts['train_batchify'], 6
        samples = [data[i] for i in range(min(args.batch_size, len(data)))]
        batch = batchify(samples)
        images, labels = shard_list(batch[0]), shard_list(batch[box_field])
        title = '%s batch: %d images, boxes padded with -1 to the longest list' % (
            loader.upper(), len(samples))
    else:
        raise ValueError('unknown loader %r; choose from %s' % (loader, ', '.join(LOADERS)))
    # SSD and YOLO shard only their labels; R-CNN shards images and labels alike
    bounds = shard_bounds(len(samples), max(len(images), len(labels)))
    shards = [shard for shard, (start, stop) in enumerate(bounds) for _ in range(start, stop)]
    sizes = [tuple(np.shape(sample[0])[1:]) for sample in samples]
    return draw_detection_batch(path, _rows(images), _rows(labels), sizes, shards, title)
