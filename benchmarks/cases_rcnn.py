"""Cases 5 and 6: Faster R-CNN train batchify (C4 and FPN) against gluoncv and the floor.

Each case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run a case.
"""
import warnings

import gluoncv.data.batchify as gcv
import mxnet as mx
import numpy as np
from gluoncv.data.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
from gluoncv.model_zoo import get_model

from gluonbatch import batchify as gb

from .rows import percent_check, ratio_check, run_case

__all__ = ['case_rcnn_c4', 'case_rcnn_fpn', 'net_and_samples']


def net_and_samples(model, multi_stage, short, max_size, rng, count):
    """A gluoncv model-zoo network (initialised, no downloads) and ``count`` samples of
    random images 375-500 x 400-700 with two boxes each, through gluoncv's train transform."""
    net = get_model(model, pretrained=False, pretrained_base=False)
    net.initialize()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # gluoncv's anchor generator warns about its inputs
        transform = FasterRCNNDefaultTrainTransform(short, max_size, net,
                                                    multi_stage=multi_stage)
    samples = []
    for _ in range(count):
        height, width = (int(v) for v in rng.integers((375, 400), (500, 700)))
        image = mx.nd.array(rng.integers(0, 255, (height, width, 3)), dtype='uint8')
        boxes = np.array([[10, 20, 100, 150, 3], [50, 60, 200, 220, 1]], np.float32)
        samples.append(transform(image, boxes))
    mx.nd.waitall()
    return net, samples


def _rcnn_case(case, title, model, multi_stage, rng, rounds, quick):
    """Cases 5 and 6: FasterRCNNTrainBatchify, 4 samples of gluoncv's train transform, 2 devices.

    gluonbatch is timed in steady state: its feature-shape cache was filled by the warm-up
    call, as it is after the first batches of each image size in training.
    """
    short, max_size = (200, 320) if quick else (600, 1000)
    net, samples = net_and_samples(model, multi_stage, short, max_size, rng, 4)
    ours = gb.FasterRCNNTrainBatchify(net, num_shards=2)
    row = run_case(case, '%s %d/%d, 4 img, 2 devices' % (title, short, max_size), ours,
                   gcv.FasterRCNNTrainBatchify(net, num_shards=2), rounds, samples)
    info = ours.feature_shapes.cache_info()
    row['cache'] = {'hits': info.hits, 'misses': info.misses}
    row['checks'] = [
        ratio_check('gluoncv / gluonbatch', row['ratios']['gluoncv/gluonbatch'], ('>=', 30)),
        ratio_check('gluonbatch / floor', row['ratios']['gluonbatch/floor']),
        ratio_check('gluoncv / floor', row['ratios']['gluoncv/floor']),
        percent_check('feature-shape cache hit rate', 100.0 * info.hits /
                      max(1, info.hits + info.misses)),
    ]
    return row


def case_rcnn_c4(rng, rounds, quick):
    """Case 5: Faster R-CNN with a C4 backbone (one feature level)."""
    return _rcnn_case('rcnn_c4', 'FasterRCNN C4', 'faster_rcnn_resnet50_v1b_voc', False,
                      rng, rounds, quick)


def case_rcnn_fpn(rng, rounds, quick):
    """Case 6: Faster R-CNN with an FPN backbone (five feature levels)."""
    return _rcnn_case('rcnn_fpn', 'FasterRCNN FPN', 'faster_rcnn_fpn_resnet50_v1b_coco', True,
                      rng, rounds, quick)
