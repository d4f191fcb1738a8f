"""Cases ``transforms_*``: gluoncv's detection train presets against gluonbatch's.

Per sample (one process): each preset with its targets on decoded VOC-like images, gluoncv's
and gluonbatch's seeded alike so both do the same augmentations; the floor is what any
pipeline must do for such a sample: decode the JPEG, resize once to the output size and
normalize once (OpenCV and numpy). End to end: images/s of a 2-worker DataLoader, batch 32,
decoding the JPEGs, gluoncv's presets and batchify against gluonbatch's, and against
gluonbatch's presets made without targets batched by the batchify function that computes
the batch's targets (:mod:`gluonbatch.batchify.detection`).

The case functions take ``(rng, rounds, quick)`` and return the case's row with its checks.
This module imports gluoncv: the runner imports it only to run a case.
"""
import functools
import random
import time
import warnings

import cv2
import gluoncv.data.batchify as gcv
import mxnet as mx
import numpy as np
from gluoncv.data.transforms import presets as gcv_presets
from gluoncv.model_zoo import get_model
from mxnet import autograd

from gluonbatch import batchify as gb
from gluonbatch.transforms.presets import center_net, rcnn, ssd, yolo

from .cases_loader import WORKERS, data_loader
from .harness import interleave, time_epoch
from .rows import ratio_check, timing_fields
from .voc_like import IMAGE_SIZE, VOCLike, voc_like_samples

__all__ = ['case_transforms_ssd', 'case_transforms_yolo', 'case_transforms_center_net',
           'case_transforms_rcnn', 'case_transforms_loader_ssd', 'case_transforms_loader_yolo',
           'case_transforms_loader_center_net', 'network', 'ssd_anchors', 'network_size',
           'preset_pair', 'untargeted_preset', 'target_batchify', 'script_batchify', 'seed_all',
           'check_alike', 'Floor', 'BATCH_TARGETS', 'LOADER_GOALS', 'QUICK_LOADER']

MEAN, STD = gb.images.IMAGENET_MEAN, gb.images.IMAGENET_STD
#: Largest |difference| of normalized images the cases accept between the two presets
#: (2/255 of the pixel range, divided by the smallest std).
IMAGE_TOLERANCE = 2 / 255 / min(STD)
BATCH_SIZE = 32


@functools.lru_cache(maxsize=None)
def network(name):
    """The model zoo network ``name``, random weights, initialized (built once)."""
    net = get_model(name, pretrained=False, pretrained_base=False)
    net.initialize()
    return net


@functools.lru_cache(maxsize=None)
def ssd_anchors(name, size):
    """The anchors SSD network ``name`` returns in train mode for ``size`` x ``size``."""
    with autograd.train_mode():
        _, _, anchors = network(name)(mx.nd.zeros((1, 3, size, size)))
    return anchors


def network_size(kind, quick):
    """``(network name, output size)`` the cases use for ``kind`` ('ssd', 'yolo' or
    'center_net', whose name is None: its targets need no network)."""
    if kind == 'ssd':
        return ('ssd_300_mobilenet0.25_voc' if quick else 'ssd_300_vgg16_atrous_voc'), 300
    if kind == 'yolo':
        return ('yolo3_mobilenet0.25_voc', 320) if quick else ('yolo3_darknet53_voc', 416)
    return None, (256 if quick else 512)


def preset_pair(kind, quick):
    """``(title, gluoncv preset, gluonbatch preset, output size (w, h))`` of ``kind``
    ('ssd', 'yolo', 'center_net' or 'rcnn'), both with their targets."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # gluoncv's anchor generators warn about their inputs
        if kind == 'ssd':
            name, size = network_size(kind, quick)
            anchors = ssd_anchors(name, size)
            return ('SSD%d + targets' % size,
                    gcv_presets.ssd.SSDDefaultTrainTransform(size, size, anchors),
                    ssd.SSDDefaultTrainTransform(size, size, anchors), (size, size))
        if kind == 'yolo':
            name, size = network_size(kind, quick)
            net = network(name)
            return ('YOLOv3-%d + targets' % size,
                    gcv_presets.yolo.YOLO3DefaultTrainTransform(size, size, net),
                    yolo.YOLO3DefaultTrainTransform(size, size, net), (size, size))
        if kind == 'center_net':
            _, size = network_size(kind, quick)
            return ('CenterNet-%d + targets' % size,
                    gcv_presets.center_net.CenterNetDefaultTrainTransform(size, size, 20, 4),
                    center_net.CenterNetDefaultTrainTransform(size, size, 20, 4),
                    (size, size))
        short, max_size = (200, 320) if quick else (600, 1000)
        net = network('faster_rcnn_resnet50_v1b_voc')
        return ('Faster R-CNN %d/%d + RPN targets' % (short, max_size),
                gcv_presets.rcnn.FasterRCNNDefaultTrainTransform(short, max_size, net),
                rcnn.FasterRCNNDefaultTrainTransform(short, max_size, net),
                (round(IMAGE_SIZE[0] * short / IMAGE_SIZE[1]), short))


def untargeted_preset(kind, quick, deferred=True):
    """gluonbatch's train preset of ``kind`` made without targets: ``(image, label)``
    samples, the label as the preset hands it to its target generator, the image deferred
    to the batch (as the examples make it) unless told otherwise."""
    _, size = network_size(kind, quick)
    if kind == 'ssd':
        return ssd.SSDDefaultTrainTransform(size, size, deferred=deferred)
    if kind == 'yolo':
        return yolo.YOLO3DefaultTrainTransform(size, size, deferred=deferred)
    return center_net.CenterNetDefaultTrainTransform(size, size, 20, 4, targets=False,
                                                     deferred=deferred)


def target_batchify(kind, quick):
    """gluonbatch's batchify function of ``kind`` computing the batch's targets, for the
    samples of :func:`untargeted_preset`."""
    name, size = network_size(kind, quick)
    if kind == 'ssd':
        return gb.SSDTrainBatchify(ssd_anchors(name, size))
    if kind == 'yolo':
        return gb.YOLO3TrainBatchify(network(name))
    return gb.CenterNetTrainBatchify(20, 4)


class Floor:
    """The least work a sample needs: decode, one resize to ``size``, one normalize (CHW)."""

    def __init__(self, size):
        self._size = size
        self._scale = (1 / (255 * np.array(STD))).astype(np.float32)
        self._shift = (np.array(MEAN) / np.array(STD)).astype(np.float32)

    def decode(self, encoded):
        """An RGB HWC uint8 image from JPEG bytes."""
        return cv2.cvtColor(cv2.imdecode(np.frombuffer(encoded, np.uint8), cv2.IMREAD_COLOR),
                            cv2.COLOR_BGR2RGB)

    def __call__(self, image, label=None):
        """Resize and normalize a decoded image; ``(image, label)`` as a preset returns."""
        resized = cv2.resize(image, self._size, interpolation=cv2.INTER_LINEAR)
        out = np.empty((3,) + resized.shape[:2], np.float32)
        # plane by plane: numpy broadcasting over a trailing axis of 3 is many times slower
        for channel, plane in enumerate(cv2.split(resized)):
            np.multiply(plane, self._scale[channel], out=out[channel], casting='unsafe')
            out[channel] -= self._shift[channel]
        return out, label


def seed_all(seed):
    """Seed Python's, numpy's and MXNet's generators (the presets draw from all three)."""
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)


def _per_sample(transform, images, labels, seed):
    """Seconds per sample of ``transform`` over the samples, seeded with ``seed``."""
    seed_all(seed)
    start = time.perf_counter()
    outputs = [transform(image, label) for image, label in zip(images, labels)]
    mx.nd.waitall()
    elapsed = time.perf_counter() - start
    del outputs
    return elapsed / len(images)


def _floor_per_sample(floor, encoded, decode_only=False):
    start = time.perf_counter()
    for data, label in encoded:
        image = floor.decode(data)
        if not decode_only:
            floor(image, label)
    return (time.perf_counter() - start) / len(encoded)


def _as_numpy(value):
    return value.asnumpy() if isinstance(value, mx.nd.NDArray) else np.asarray(value)


def check_alike(kind, ours, theirs):
    """Raise unless two presets' samples have the same fields, shapes and (within the
    stated rounding for the image) values; so a case never compares unlike work."""
    ours, theirs = [_as_numpy(v) for v in ours], [_as_numpy(v) for v in theirs]
    shapes = [(a.shape, b.shape) for a, b in zip(ours, theirs)]
    if len(ours) != len(theirs) or any(a != b for a, b in shapes):
        raise AssertionError('%s: gluonbatch returned %s, gluoncv %s' % (
            kind, [a.shape for a in ours], [b.shape for b in theirs]))
    image_gap = float(np.abs(ours[0] - theirs[0]).max()) if ours[0].size else 0.0
    target_gap = max([float(np.abs(a - b).max()) for a, b in zip(ours[1:], theirs[1:])
                      if a.size] or [0.0])
    if image_gap > IMAGE_TOLERANCE or target_gap > 1e-3:
        raise AssertionError('%s: samples differ: images by %g, targets by %g'
                             % (kind, image_gap, target_gap))


def _per_sample_case(kind, rng, rounds, quick):
    title, theirs, ours, size = preset_pair(kind, quick)
    encoded = voc_like_samples(rng, 4 if quick else 16)
    decoded = VOCLike(encoded)
    images, labels = zip(*(decoded[i] for i in range(len(decoded))))
    for seed in range(2):
        seed_all(seed)
        theirs_out = theirs(images[seed], labels[seed])
        seed_all(seed)
        check_alike(kind, ours(images[seed], labels[seed]), theirs_out)
    floor = Floor(size)
    medians, times = interleave({
        'gluonbatch': functools.partial(_per_sample, ours, images, labels, 7),
        'gluoncv': functools.partial(_per_sample, theirs, images, labels, 7),
        'floor': functools.partial(_floor_per_sample, floor, encoded)}, rounds,
        follow={'decode': functools.partial(_floor_per_sample, floor, encoded, True)})
    row = {'case': 'transforms_' + kind, 'rounds': rounds,
           'title': '%s, per sample' % title,
           'unit': 'ms per sample of %d images; floor = decode + resize + normalize'
                   % len(images),
           'decode_ms': medians.pop('decode') * 1e3, 'outputs': [], 'out_bytes': 0}
    times.pop('decode')
    row.update(timing_fields(medians, times))
    row['checks'] = [
        ratio_check('%s gluoncv / gluonbatch' % kind, row['ratios']['gluoncv/gluonbatch'],
                    ('>=', 4)),
        ratio_check('%s gluonbatch / floor' % kind, row['ratios']['gluonbatch/floor']),
    ]
    return row


def case_transforms_ssd(rng, rounds, quick):
    """SSD300's train preset with anchors, per sample."""
    return _per_sample_case('ssd', rng, rounds, quick)


def case_transforms_yolo(rng, rounds, quick):
    """YOLOv3-416's train preset with the network's targets, per sample."""
    return _per_sample_case('yolo', rng, rounds, quick)


def case_transforms_center_net(rng, rounds, quick):
    """CenterNet-512's train preset (20 classes, scale factor 4), per sample."""
    return _per_sample_case('center_net', rng, rounds, quick)


def case_transforms_rcnn(rng, rounds, quick):
    """Faster R-CNN 600/1000's train preset with RPN targets, per sample."""
    return _per_sample_case('rcnn', rng, rounds, quick)


def script_batchify(kind, module):
    """The training scripts' batchify of ``kind`` built from ``module`` (gluoncv's or ours)."""
    if kind == 'yolo':  # train_yolo3.py: six stacked fields and the padded boxes
        return module.Tuple(*([module.Stack() for _ in range(6)] + [module.Pad(pad_val=-1)]))
    fields = 3 if kind == 'ssd' else 6
    return module.Tuple(*[module.Stack() for _ in range(fields)])


#: The loader cases' contender that batches gluonbatch's presets made without targets with
#: the batchify function that computes the batch's targets. The presets normalize the
#: images: normalizing in the batchify function instead (``normalize=True``, the presets'
#: images HWC in the pixel range) made no measurable difference to the epochs and costs
#: the workers more: the presets fold the normalization into their last pass over the
#: pixels, the batchify function makes passes of its own.
BATCH_TARGETS = 'batch targets'
#: Loader goals: gluoncv's ms per batch over :data:`BATCH_TARGETS`.
LOADER_GOALS = {'ssd': 4, 'yolo': 4, 'center_net': 3}
#: The loader cases' batch size and batches per epoch in quick mode (a smoke run: each
#: contender is one more worker pool and its epochs).
QUICK_LOADER = (4, 2)


def _check_batch(kind, ours, preset, batchify, samples):
    """Raise unless ``preset`` then ``batchify`` make the batch the per-sample preset
    ``ours`` and the training script's batchify make of ``samples`` (seeded alike)."""
    seed_all(3)
    reference = script_batchify(kind, gb)([ours(*sample) for sample in samples])
    seed_all(3)
    check_alike(kind, batchify([preset(*sample) for sample in samples]), reference)


def _loader_case(kind, rng, rounds, quick):
    title, theirs, ours, size = preset_pair(kind, quick)
    batch_size, batches = QUICK_LOADER if quick else (BATCH_SIZE, 4)
    dataset = VOCLike(voc_like_samples(rng, batch_size * batches))
    floor = Floor(size)
    untargeted = untargeted_preset(kind, quick)
    batchify = target_batchify(kind, quick)
    _check_batch(kind, ours, untargeted, batchify, [dataset[i] for i in range(batch_size)])
    loaders = {
        'gluonbatch': data_loader(dataset.transform(ours), script_batchify(kind, gb),
                                  batch_size),
        'gluoncv': data_loader(dataset.transform(theirs), script_batchify(kind, gcv),
                               batch_size),
        'floor': data_loader(dataset.transform(lambda image, label: floor(image.asnumpy())[0]),
                             gb.Stack(), batch_size),
        BATCH_TARGETS: data_loader(dataset.transform(untargeted), batchify, batch_size)}
    medians, times = interleave({name: functools.partial(time_epoch, loader)
                                 for name, loader in loaders.items()}, rounds)
    row = {'case': 'transforms_loader_' + kind, 'rounds': rounds,
           'title': '%s, %d-worker loader, B=%d' % (title.split(' +')[0], WORKERS, batch_size),
           'unit': 'ms per batch; rounds are epochs of %d batches' % batches,
           'outputs': [], 'out_bytes': 0,
           'images_per_s': {name: batch_size / seconds for name, seconds in medians.items()},
           **timing_fields(medians, times)}
    row['checks'] = [ratio_check('%s loader images/s vs gluoncv' % kind,
                                 row['ratios']['gluoncv/gluonbatch'])]
    row['ratios']['gluoncv/' + BATCH_TARGETS] = medians['gluoncv'] / medians[BATCH_TARGETS]
    row['checks'].append(ratio_check('%s loader batch targets vs gluoncv' % kind,
                                     row['ratios']['gluoncv/' + BATCH_TARGETS],
                                     ('>=', LOADER_GOALS[kind])))
    return row


def case_transforms_loader_ssd(rng, rounds, quick):
    """SSD300 end to end: a 2-worker DataLoader of the preset and the batchify."""
    return _loader_case('ssd', rng, rounds, quick)


def case_transforms_loader_yolo(rng, rounds, quick):
    """YOLOv3-416 end to end: a 2-worker DataLoader of the preset and the batchify."""
    return _loader_case('yolo', rng, rounds, quick)


def case_transforms_loader_center_net(rng, rounds, quick):
    """CenterNet-512 end to end: a 2-worker DataLoader of the preset and the batchify."""
    return _loader_case('center_net', rng, rounds, quick)
