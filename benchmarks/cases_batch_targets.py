"""Cases ``batch_targets_*``: the training targets of one batch, computed at once by
gluonbatch's batchify functions against gluoncv's target generators run per sample.

The labels are realistic: the boxes gluonbatch's train presets, made without targets, give
for seeded augmentations of VOC-like images, which are the boxes the presets made with
targets hand to their target generators. The gluoncv contender does, sample by sample,
what gluoncv's preset does for its targets (the boxes into NDArrays, the generator, the
first element of each output), then waits for MXNet; its time is the sum over the batch
(stacking the samples' targets, which the training script's batchify does afterwards, is
not timed). The gluonbatch contender is one ``targets(...)`` call of
:class:`~gluonbatch.batchify.SSDTrainBatchify`,
:class:`~gluonbatch.batchify.YOLO3TrainBatchify` or
:class:`~gluonbatch.batchify.CenterNetTrainBatchify` in this (main) process: fresh
``cpu_shared`` outputs, whose pages are reserved and faulted in for every batch.
``gluonbatch in a worker`` is the same call where batchify functions run, inside a
DataLoader worker, whose outputs are recycled segments: the median of repeated calls
there after two warm-up calls, in the worker's second batch (once it has sent a batch, a
worker recycles), timed once after the interleaved rounds. The goal is
checked on it. The floor writes the targets' bytes once: one ``memset`` of that many
bytes into a buffer mapped before the timing.

Before timing, both contenders' targets are compared (gluoncv's stacked, its YOLOv3 boxes
padded with -1 as the training script's ``Pad`` does): same shapes, values within
:data:`TOLERANCE`. The case functions take ``(rng, rounds, quick)`` and return the case's
row with its checks. This module imports gluoncv: the runner imports it only to run a case.
"""
import functools
import statistics
import time
import warnings

import mxnet as mx
import numpy as np

from gluonbatch._core.native import fill_zero

from .cases_transforms import (BATCH_SIZE, network_size, preset_pair, seed_all,
                               target_batchify, untargeted_preset)
from .harness import interleave, time_call
from .rows import layout_fields, ratio_check, timing_fields
from .voc_like import VOCLike, voc_like_samples

__all__ = ['case_batch_targets_ssd', 'case_batch_targets_yolo',
           'case_batch_targets_center_net', 'TOLERANCE', 'GOALS']

#: Largest |difference| of a target value accepted between gluonbatch and gluoncv.
TOLERANCE = 1e-5
#: ``gluoncv / gluonbatch`` goals, per kind.
GOALS = {'ssd': 10, 'yolo': 20, 'center_net': 20}
#: The contender timed inside a DataLoader worker.
WORKER = 'gluonbatch in a worker'


def _labels(kind, quick, rng, count):
    """Labels of ``count`` VOC-like images as gluonbatch's preset without targets gives them
    (seeded)."""
    preset = untargeted_preset(kind, quick)
    decoded = VOCLike(voc_like_samples(rng, count))
    seed_all(11)
    return [preset(*decoded[i])[1] for i in range(count)]


def _gluoncv_sample(kind, preset):
    """gluoncv's targets of one label, as its preset ``preset`` (made with targets)
    computes them after the augmentation; ``preset``'s generator and network outputs are
    private attributes, read here so that exactly the preset's work is timed."""
    generator = preset._target_generator
    if kind == 'center_net':  # numpy boxes in, five NDArrays out
        return lambda boxes: generator(boxes[:, :4], boxes[:, 4:5])

    def one(label):
        gt_bboxes = mx.nd.array(label[np.newaxis, :, :4])
        gt_ids = mx.nd.array(label[np.newaxis, :, 4:5])
        if kind == 'ssd':
            cls_targets, box_targets, _ = generator(preset._anchors, None, gt_bboxes, gt_ids)
            return cls_targets[0], box_targets[0]
        targets = generator(preset._fake_x, preset._feat_maps, preset._anchors,
                            preset._offsets, gt_bboxes, gt_ids, None)
        return tuple(target[0] for target in targets) + (gt_bboxes[0],)

    return one


def _gluoncv_batch(one, labels):
    """gluoncv's targets of every label, waited for: a list of per-sample tuples."""
    outputs = [one(label) for label in labels]
    mx.nd.waitall()
    return outputs


def _floor(nbytes):
    """One ``memset`` of ``nbytes`` into a buffer whose pages are already mapped."""
    buffer = np.empty(nbytes, np.uint8)
    fill_zero(buffer)
    return functools.partial(time_call, functools.partial(fill_zero, buffer))


class _TimeTargets:
    """A batchify function for a DataLoader worker: times ``repeats`` calls of
    ``batchify.targets`` on the batch's labels there and returns the median seconds of all
    but the first two."""

    def __init__(self, batchify, size_args, repeats):
        self._batchify, self._size_args, self._repeats = batchify, size_args, repeats

    def __call__(self, data):
        labels = [label for _, label in data]
        seconds = []
        for _ in range(self._repeats):
            start = time.perf_counter()
            outputs = self._batchify.targets(labels, *self._size_args)
            seconds.append(time.perf_counter() - start)
            del outputs  # its segments are free again for the next call
        return mx.nd.array([statistics.median(seconds[2:])], dtype='float64')


def _in_worker(batchify, labels, size_args, repeats):
    """Median seconds of ``batchify.targets(labels)`` inside a 1-worker DataLoader, timed
    in its second batch (a worker recycles its outputs once it has sent a batch)."""
    data = mx.gluon.data.SimpleDataset([(0, label) for label in labels] * 2)
    loader = mx.gluon.data.DataLoader(data, len(labels),
                                      batchify_fn=_TimeTargets(batchify, size_args, repeats),
                                      num_workers=1)
    return float([median for median in loader][-1].asscalar())


def _stacked(outputs):
    """gluoncv's per-sample outputs as batch arrays: each field stacked, fields of unequal
    lengths (YOLOv3's boxes) padded with -1 first.

    >>> fields = _stacked([(mx.nd.ones(2), mx.nd.ones((1, 4))),
    ...                    (mx.nd.zeros(2), mx.nd.ones((2, 4)))])
    >>> [field.shape for field in fields], fields[1][0, 1].tolist()
    ([(2, 2), (2, 2, 4)], [-1.0, -1.0, -1.0, -1.0])
    """
    fields = []
    for field in zip(*outputs):
        arrays = [value.asnumpy() for value in field]
        rows = max(array.shape[0] for array in arrays)
        fields.append(np.stack([np.pad(array, [(0, rows - array.shape[0])]
                                       + [(0, 0)] * (array.ndim - 1), constant_values=-1)
                                for array in arrays]))
    return fields


def check_targets(case, ours, theirs):
    """Raise unless gluonbatch's batch targets ``ours`` equal gluoncv's stacked ``theirs``
    (shapes, and values within :data:`TOLERANCE`); return the targets' layout.

    >>> check_targets('demo', [mx.nd.ones((2, 3))], [np.ones((2, 3))])
    [((2, 3), dtype('float32'))]
    """
    ours = [value.asnumpy() for value in ours]
    if [a.shape for a in ours] != [b.shape for b in theirs]:
        raise AssertionError('%s: gluonbatch returned %s, gluoncv %s' % (
            case, [a.shape for a in ours], [b.shape for b in theirs]))
    gap = max([float(np.abs(a - b).max()) for a, b in zip(ours, theirs) if a.size] or [0.0])
    if gap > TOLERANCE:
        raise AssertionError('%s: targets differ by %g' % (case, gap))
    return [(a.shape, a.dtype) for a in ours]


def _case(kind, rng, rounds, quick):
    case = 'batch_targets_' + kind
    batch_size = 8 if quick else BATCH_SIZE
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # gluoncv's anchor generators warn about their inputs
        title, theirs, _, _ = preset_pair(kind, quick)
    _, size = network_size(kind, quick)
    labels = _labels(kind, quick, rng, batch_size)
    batchify = target_batchify(kind, quick)
    size_args = () if kind == 'ssd' else (size, size)
    ours = functools.partial(batchify.targets, labels, *size_args)
    one = _gluoncv_sample(kind, theirs)
    layout = check_targets(case, ours(), _stacked(_gluoncv_batch(one, labels)))
    fields = layout_fields([layout])
    medians, times = interleave({
        'gluonbatch': functools.partial(time_call, ours),
        'gluoncv': functools.partial(time_call, functools.partial(_gluoncv_batch, one,
                                                                  labels)),
        'floor': _floor(fields['out_bytes']),
    }, rounds)
    medians[WORKER] = _in_worker(batchify, labels, size_args, 2 + max(3, rounds))
    row = {'case': case, 'rounds': rounds,
           'title': '%s targets, B=%d' % (title.split(' +')[0], batch_size),
           'unit': 'ms per batch of %d; gluoncv = sum of its per-sample targets; floor = '
                   'one memset of the targets\' bytes' % batch_size,
           'boxes': sum(len(label) for label in labels), **fields,
           **timing_fields(medians, times)}
    row['ratios']['gluoncv/' + WORKER] = medians['gluoncv'] / medians[WORKER]
    row['checks'] = [
        ratio_check('%s targets gluoncv / gb in a worker' % kind,
                    row['ratios']['gluoncv/' + WORKER], ('>=', GOALS[kind])),
        ratio_check('%s targets gluoncv / gb, fresh memory' % kind,
                    row['ratios']['gluoncv/gluonbatch']),
        ratio_check('%s targets gluonbatch / floor' % kind, row['ratios']['gluonbatch/floor']),
    ]
    return row


def case_batch_targets_ssd(rng, rounds, quick):
    """SSD300's targets (VGG16's 8732 anchors) of a batch of 32."""
    return _case('ssd', rng, rounds, quick)


def case_batch_targets_yolo(rng, rounds, quick):
    """YOLOv3-416's targets (darknet53) of a batch of 32."""
    return _case('yolo', rng, rounds, quick)


def case_batch_targets_center_net(rng, rounds, quick):
    """CenterNet-512's targets (20 classes, scale factor 4) of a batch of 32."""
    return _case('center_net', rng, rounds, quick)
