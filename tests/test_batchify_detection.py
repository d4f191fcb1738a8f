"""SSDTrainBatchify, YOLO3TrainBatchify and CenterNetTrainBatchify against gluoncv.

The reference of a batch is what gluoncv's training pipeline gives for the same samples:
each sample's targets from gluoncv's own generator, called exactly as its train preset
calls it (``SSDTargetGenerator``, ``YOLOV3PrefetchTargetGenerator`` with the preset's
traced grids, ``CenterNetTargetGenerator``), then the training script's batchify function.
Labels are drawn with 0 to 50 boxes of awkward kinds (overlapping, sharing a cell, on
cell borders, sub-pixel, image-sized, -1 padding rows inside a sample), float32 and
float64, numpy and NDArray. End to end, the real presets run seeded alike on both sides.
Beyond equality: shared memory, device layouts, pickling, inputs untouched and unaliased,
DataLoader workers over recycled memory, thread pools, numpy mode, random-shape loading
and the errors.
"""
import multiprocessing
import pickle
import re
import random
import warnings

import gluoncv.data.batchify as gcv_batchify
import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import RandomTransformDataLoader as GluoncvRandomTransformDataLoader
from gluoncv.data.transforms import presets as gcv_presets
from gluoncv.model_zoo.center_net.target_generator import CenterNetTargetGenerator
from gluoncv.model_zoo.ssd.target import SSDTargetGenerator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxnet import npx

from gluonbatch.batchify import (CenterNetTrainBatchify, Pad, SSDTrainBatchify,
                                 YOLO3TrainBatchify)
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader
from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.devices import split_to_devices
from gluonbatch.transforms.presets import center_net, ssd, yolo
from helpers import SHARED, assert_unchanged, examples, overwrite_all, snapshot

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
NUM_CLASS = 20                      # the *_voc networks
SSD_SIZE = (160, 128)               # (width, height) of the SSD anchors
YOLO_SIZES = [(320, 320), (416, 416), (480, 352)]
#: (grid width, grid height, scale factor) of the CenterNet cases
CENTER_NET_GRIDS = [(32, 24, 4), (16, 16, 2), (20, 12, 1)]
CENTER_NET_CLASSES = 5
#: gluonbatch's SSD/YOLOv3 presets resize with cv2, gluoncv's with MXNet's OpenCV
PRESET_IMAGE_ATOL = 1e-3

# the training scripts' batchify functions
GCV_SSD = gcv_batchify.Tuple(gcv_batchify.Stack(), gcv_batchify.Stack(), gcv_batchify.Stack())
GCV_YOLO = gcv_batchify.Tuple(*([gcv_batchify.Stack() for _ in range(6)]
                                + [gcv_batchify.Pad(axis=0, pad_val=-1) for _ in range(1)]))
GCV_CENTER_NET = gcv_batchify.Tuple([gcv_batchify.Stack() for _ in range(6)])

# fields compared for equality (the others within 1e-6), and the documented targets of a
# sample without boxes, where gluoncv's generators raise
SSD_EXACT, YOLO_EXACT, CENTER_NET_EXACT = (1,), (1, 5, 6), (3, 5)
SSD_EMPTY = (0, 0)
YOLO_EMPTY = (0, 0, 0, 0, -1, -1)


def slow(full):
    """No deadline, ``full`` examples in the full tier (fewer in the everyday one)."""
    return settings(max_examples=examples(full), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------------------
# networks, once per session (conftest.py)


@pytest.fixture(scope='module')
def ssd_anchors(zoo_ssd_anchors):
    return zoo_ssd_anchors('ssd_300_mobilenet0.25_voc', *SSD_SIZE)


@pytest.fixture(scope='module')
def yolo_net(zoo_net):
    return zoo_net('yolo3_mobilenet0.25_voc')


@pytest.fixture(scope='module')
def yolo_batchifiers(yolo_net):
    """One instance per mixup flag, each used for every image size."""
    return {mixup: YOLO3TrainBatchify(yolo_net, mixup=mixup) for mixup in (False, True)}


@pytest.fixture(scope='module')
def yolo_presets(yolo_net):
    """gluoncv's YOLO3DefaultTrainTransform(w, h, net) per size: its traced grids and its
    target generator are the reference."""
    return {size: gcv_presets.yolo.YOLO3DefaultTrainTransform(size[0], size[1], yolo_net)
            for size in YOLO_SIZES}


# ---------------------------------------------------------------------------------------
# gluoncv's per-sample targets, as its presets compute them


def gluoncv_ssd_sample(generator, anchors, image, bbox):
    """The end of SSDDefaultTrainTransform.__call__ made with anchors."""
    gt_bboxes = mx.nd.array(bbox[np.newaxis, :, :4])
    gt_ids = mx.nd.array(bbox[np.newaxis, :, 4:5])
    cls_targets, box_targets, _ = generator(anchors, None, gt_bboxes, gt_ids)
    return image, cls_targets[0], box_targets[0]


def gluoncv_yolo_sample(preset, mixup, image, bbox):
    """The end of YOLO3DefaultTrainTransform.__call__ made with a network."""
    gt_bboxes = mx.nd.array(bbox[np.newaxis, :, :4])
    gt_ids = mx.nd.array(bbox[np.newaxis, :, 4:5])
    gt_mixratio = mx.nd.array(bbox[np.newaxis, :, -1:]) if mixup else None
    outputs = preset._target_generator(preset._fake_x, preset._feat_maps, preset._anchors,
                                       preset._offsets, gt_bboxes, gt_ids, gt_mixratio)
    return (image,) + tuple(o[0] for o in outputs) + (gt_bboxes[0],)


def gluoncv_center_net_sample(generator, image, bbox):
    """The end of CenterNetDefaultTrainTransform.__call__."""
    return (image,) + tuple(generator(bbox[:, :4], bbox[:, 4:5]))


def normalized(image):
    """What gluoncv's presets end with: to_tensor, normalize."""
    nd = mx.nd.array(image, dtype=image.dtype)
    return mx.nd.image.normalize(mx.nd.image.to_tensor(nd), mean=MEAN, std=STD)


def as_numpy(value):
    return value.asnumpy() if isinstance(value, mx.nd.NDArray) else np.asarray(value)


# ---------------------------------------------------------------------------------------
# comparing


def assert_shared_outputs(batch, count):
    assert type(batch) is tuple and len(batch) == count
    for index, field in enumerate(batch):
        assert isinstance(field, mx.nd.NDArray), index
        assert field.context == SHARED, index


def assert_fields_match(ours, theirs, exact, image_atol=0.0, rows=None):
    """Field by field: same count, shapes and dtypes; images within ``image_atol`` (equal
    for 0), ``exact`` fields equal, float targets within 1e-6. ``rows``: the samples of
    ``ours`` that ``theirs`` holds."""
    assert len(ours) == len(theirs)
    for index, (mine, want) in enumerate(zip(ours, theirs)):
        mine, want = as_numpy(mine), as_numpy(want)
        if rows is not None:
            mine = mine[rows]
        assert mine.shape == want.shape and mine.dtype == want.dtype, (
            index, mine.shape, want.shape, mine.dtype, want.dtype)
        if index == 0 and image_atol:
            np.testing.assert_allclose(mine, want, rtol=image_atol, atol=image_atol)
        elif index == 0 or index in exact:
            np.testing.assert_array_equal(mine, want, err_msg='field %d' % index)
        else:
            np.testing.assert_allclose(mine, want, rtol=1e-6, atol=1e-6,
                                       err_msg='field %d' % index)


def check_against_gluoncv(ours, references, gluoncv_sample, gluoncv_batch, exact,
                          empty=None):
    """``ours`` equals gluoncv's batch of ``references`` (``(image, numpy bbox)`` pairs).

    With ``empty`` (gluoncv's generator raises on a label without rows), samples without
    rows must hold those documented targets and every other sample gluoncv's.
    """
    assert_shared_outputs(ours, len(ours))
    if empty is not None:
        assert len(ours) == len(empty) + 1
    rows = [i for i, (_, bbox) in enumerate(references) if empty is None or len(bbox)]
    if rows:
        theirs = gluoncv_batch([gluoncv_sample(*references[i]) for i in rows])
        assert_fields_match(ours, theirs, exact, rows=None if empty is None else rows)
    for i in sorted(set(range(len(references))) - set(rows)):
        np.testing.assert_array_equal(ours[0][i].asnumpy(), as_numpy(references[i][0]))
        for field, value in zip(ours[1:], empty):
            assert (field[i].asnumpy() == value).all()


# ---------------------------------------------------------------------------------------
# labels


@st.composite
def label_rows(draw, width, height, strides, max_boxes=50, num_class=NUM_CLASS, ratio=False):
    """``(M, 5)`` float64 rows (6 with a mix ratio): boxes of every awkward kind, -1
    padding rows anywhere."""
    count = draw(st.integers(0, max_boxes))
    xs, ys = st.floats(0, width - 1), st.floats(0, height - 1)
    # YOLOv3 ignores every box after a padding row: labels without any too
    kinds = ['random', 'random', 'overlap', 'same_cell', 'border', 'tiny', 'image',
             'duplicate'] + (['pad'] if draw(st.booleans()) else [])
    rows = []
    for _ in range(count):
        kind = draw(st.sampled_from(kinds))
        if kind in ('overlap', 'same_cell', 'duplicate') and not rows:
            kind = 'random'
        if kind == 'pad':
            rows.append([-1.0] * (6 if ratio else 5))
            continue
        if kind == 'duplicate':
            rows.append(list(rows[draw(st.integers(0, len(rows) - 1))]))
            continue
        if kind == 'random':
            x1, x2 = sorted((draw(xs), draw(xs)))
            y1, y2 = sorted((draw(ys), draw(ys)))
        elif kind in ('overlap', 'same_cell'):
            x1, y1, x2, y2 = rows[draw(st.integers(0, len(rows) - 1))][:4]
            if min(x1, y1) < 0:  # a padding row: take any box
                x1, y1, x2, y2 = 0.0, 0.0, width / 2, height / 2
            if kind == 'overlap':
                dx, dy = draw(st.floats(-8, 8)), draw(st.floats(-8, 8))
                x1, x2, y1, y2 = x1 + dx, x2 + dx, y1 + dy, y2 + dy
            else:  # the same centre, another size: the same cell
                cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
                half_w = max(x2 - x1, 1.0) * draw(st.sampled_from([0.5, 0.9, 1.1, 2.0])) / 2
                half_h = max(y2 - y1, 1.0) * draw(st.sampled_from([0.5, 0.9, 1.1, 2.0])) / 2
                x1, x2, y1, y2 = cx - half_w, cx + half_w, cy - half_h, cy + half_h
        elif kind == 'border':  # a centre or a corner exactly on a cell border
            stride = draw(st.sampled_from(strides))
            cx = stride * draw(st.integers(0, (width - 1) // stride))
            cy = stride * draw(st.integers(0, (height - 1) // stride))
            half_w = draw(st.sampled_from([0.0, 0.5, stride / 2, stride]))
            half_h = draw(st.sampled_from([0.0, 0.5, stride / 2, stride]))
            if draw(st.booleans()):
                x1, x2, y1, y2 = cx - half_w, cx + half_w, cy - half_h, cy + half_h
            else:
                x1, x2, y1, y2 = cx, cx + 2 * half_w, cy, cy + 2 * half_h
        elif kind == 'tiny':  # sub-pixel
            x1, y1 = draw(xs), draw(ys)
            x2 = x1 + draw(st.sampled_from([0.0, 1e-3, 0.25, 0.999]))
            y2 = y1 + draw(st.sampled_from([0.0, 1e-3, 0.25, 0.999]))
        else:  # the whole image
            x1, y1, x2, y2 = 0.0, 0.0, float(width - 1), float(height - 1)
        x1, x2 = np.clip([x1, x2], 0, width - 1).tolist()
        y1, y2 = np.clip([y1, y2], 0, height - 1).tolist()
        row = [x1, y1, x2, y2, float(draw(st.integers(0, num_class - 1)))]
        if ratio:
            row.append(draw(st.sampled_from([1.0, 0.5, 0.25, 0.7123456789, 0.0])))
        rows.append(row)
    return np.array(rows, np.float64).reshape(-1, 6 if ratio else 5)


@st.composite
def labels(draw, width, height, strides, **kwargs):
    """``(label as given to ours, the numpy bbox gluoncv's preset would have)``: float32
    or float64, numpy or NDArray, maybe an extra column."""
    rows = draw(label_rows(width, height, strides, **kwargs))
    if not kwargs.get('ratio') and draw(st.booleans()):
        rows = np.concatenate([rows, np.zeros((len(rows), 1))], axis=1)  # 'difficult'
    rows = rows.astype(draw(st.sampled_from([np.float32, np.float64])))
    if len(rows) and draw(st.booleans()):
        return mx.nd.array(rows, dtype=rows.dtype), rows
    return rows, rows


def images(count, width, height, normalize, seed=0):
    """``(ours, gluoncv's)`` per sample: HWC uint8 pixels and their normalized CHW NDArray
    with ``normalize``, else the same CHW float32 NDArray."""
    rng = np.random.RandomState(seed)
    pairs = []
    for _ in range(count):
        if normalize:
            pixels = rng.randint(0, 256, (height, width, 3)).astype(np.uint8)
            pairs.append((pixels, normalized(pixels)))
        else:
            image = mx.nd.array(rng.standard_normal((3, height, width)).astype(np.float32))
            pairs.append((image, image))
    return pairs


# ---------------------------------------------------------------------------------------
# against gluoncv's generators: SSD


@slow(40)
@given(data=st.data())
def test_ssd_matches_gluoncv(ssd_anchors, data):
    width, height = SSD_SIZE
    normalize = data.draw(st.booleans(), 'normalize')
    iou_thresh = data.draw(st.sampled_from([0.5, 0.3]), 'iou_thresh')
    box_norm = data.draw(st.sampled_from([(0.1, 0.1, 0.2, 0.2), (1.0, 0.5, 1.0, 2.0)]))
    size = data.draw(st.integers(1, 4), 'batch size')
    drawn = [data.draw(labels(width, height, (8, 16, 32, 64))) for _ in range(size)]
    pictures = images(size, width, height, normalize)
    batchify = SSDTrainBatchify(ssd_anchors, iou_thresh, box_norm, normalize=normalize)
    ours = batchify([(mine, label) for (mine, _), (label, _) in zip(pictures, drawn)])
    generator = SSDTargetGenerator(iou_thresh=iou_thresh, stds=box_norm,
                                   negative_mining_ratio=-1)
    check_against_gluoncv(
        ours, [(theirs, bbox) for (_, theirs), (_, bbox) in zip(pictures, drawn)],
        lambda image, bbox: gluoncv_ssd_sample(generator, ssd_anchors, image, bbox),
        GCV_SSD, SSD_EXACT, SSD_EMPTY)


# ---------------------------------------------------------------------------------------
# YOLOv3


@slow(25)
@given(data=st.data())
def test_yolo_matches_gluoncv(yolo_batchifiers, yolo_presets, data):
    """One batchify instance per mixup flag serves every image size."""
    width, height = data.draw(st.sampled_from(YOLO_SIZES), 'size')
    mixup = data.draw(st.booleans(), 'mixup')
    size = data.draw(st.integers(1, 3), 'batch size')
    drawn = [data.draw(labels(width, height, (8, 16, 32), ratio=mixup)) for _ in range(size)]
    pictures = images(size, width, height, normalize=False)
    ours = yolo_batchifiers[mixup]([(mine, label) for (mine, _), (label, _)
                                    in zip(pictures, drawn)])
    preset = yolo_presets[(width, height)]
    check_against_gluoncv(
        ours, [(theirs, bbox) for (_, theirs), (_, bbox) in zip(pictures, drawn)],
        lambda image, bbox: gluoncv_yolo_sample(preset, mixup, image, bbox),
        GCV_YOLO, YOLO_EXACT, YOLO_EMPTY)


def explicit_yolo_labels(width, height):
    """Hand-made labels: two boxes on one cell (the later wins), centres and corners on
    cell borders, sub-pixel and image-sized boxes, a -1 row inside the label."""
    return {
        # both nearest the 62x45 anchor, centres in one stride-16 cell
        'same_cell': np.array([[100, 100, 162, 145, 3], [101, 102, 161, 144, 7]], 'f8'),
        'borders': np.array([[32, 32, 64, 64, 1], [0, 0, 16, 16, 2], [8, 8, 24, 24, 4],
                             [64, 96, 160, 160, 5]], 'f8'),
        'sub_pixel': np.array([[10.2, 10.4, 10.3, 10.9, 6], [50, 50, 50.5, 50.001, 8]],
                              'f4'),
        'image_size': np.array([[0, 0, width - 1, height - 1, 9],
                                [0, 0, width, height, 10]], 'f8'),
        'padding_inside': np.array([[10, 10, 80, 90, 11], [-1, -1, -1, -1, -1],
                                    [150, 150, 200, 220, 12]], 'f4'),
    }


def test_yolo_explicit_cases_and_sizes_with_one_instance(yolo_batchifiers, yolo_presets):
    """Every hand-made label at every size, one batchify instance; the grids follow the
    batch's image size."""
    batchify = yolo_batchifiers[False]
    rows_per_size = set()
    for width, height in YOLO_SIZES:
        cases = explicit_yolo_labels(width, height)
        pictures = images(len(cases), width, height, normalize=False)
        ours = batchify([(image, label) for (image, _), label in zip(pictures, cases.values())])
        rows_per_size.add(ours[1].shape[1])
        preset = yolo_presets[(width, height)]
        check_against_gluoncv(
            ours, [(image, bbox) for (image, _), bbox in zip(pictures, cases.values())],
            lambda image, bbox: gluoncv_yolo_sample(preset, False, image, bbox),
            GCV_YOLO, YOLO_EXACT)
        # the later of two boxes on one cell owns the cell: one positive row, class 7
        objectness = ours[1][0].asnumpy()[:, 0]
        assert objectness.sum() == 1
        assert ours[5][0].asnumpy()[objectness == 1].argmax() == 7
        # the row after the padding row is no target; gt_bboxes keeps all three rows
        assert ours[1][4].asnumpy().sum() == 1
        np.testing.assert_array_equal(ours[6][4, :3].asnumpy(), cases['padding_inside'][:, :4])
    assert len(rows_per_size) == len(YOLO_SIZES)


def test_samples_without_boxes_leave_the_others_alone(ssd_anchors, yolo_batchifiers,
                                                     yolo_presets):
    """gluoncv's SSD and YOLOv3 generators raise on a label of no rows; here that sample
    has no positive and the others are as in a batch without it."""
    width, height = YOLO_SIZES[0]
    full = np.array([[10, 20, 200, 180, 4], [100, 100, 300, 310, 2]], np.float32)
    empty = np.zeros((0, 5), np.float32)
    pictures = images(3, width, height, normalize=False)
    samples = [(pictures[0][0], full), (pictures[1][0], empty), (pictures[2][0], full[:1])]
    preset = yolo_presets[(width, height)]
    ours = yolo_batchifiers[False](samples)
    check_against_gluoncv(ours, samples,
                          lambda image, bbox: gluoncv_yolo_sample(preset, False, image, bbox),
                          GCV_YOLO, YOLO_EXACT, YOLO_EMPTY)
    np.testing.assert_array_equal(ours[6][1].asnumpy(), -np.ones((2, 4)))
    only_empty = yolo_batchifiers[False]([(pictures[0][0], empty)] * 2)
    assert only_empty[6].shape == (2, 0, 4) and only_empty[1].asnumpy().sum() == 0

    ssd_pictures = images(3, *SSD_SIZE, normalize=False)
    samples = [(ssd_pictures[0][0], full / 3), (ssd_pictures[1][0], empty),
               (ssd_pictures[2][0], full[1:] / 3)]
    generator = SSDTargetGenerator(negative_mining_ratio=-1)
    ours = SSDTrainBatchify(ssd_anchors)(samples)
    check_against_gluoncv(
        ours, samples, lambda image, bbox: gluoncv_ssd_sample(generator, ssd_anchors, image,
                                                               bbox),
        GCV_SSD, SSD_EXACT, SSD_EMPTY)
    assert (ours[1][0].asnumpy() > 0).any() and (ours[1][2].asnumpy() > 0).any()


# ---------------------------------------------------------------------------------------
# CenterNet


@st.composite
def center_net_labels(draw, grid_w, grid_h):
    """Boxes on the output grid as the preset clips them: centres on the grid, and zero
    sized boxes (skipped), borders at whole cells, two boxes sharing a centre cell."""
    rows = draw(label_rows(grid_w, grid_h, (1, 2), max_boxes=30, num_class=CENTER_NET_CLASSES))
    rows = rows.astype(draw(st.sampled_from([np.float32, np.float64])))
    if len(rows) and draw(st.booleans()):
        return mx.nd.array(rows, dtype=rows.dtype), rows
    return rows, rows


@slow(40)
@given(data=st.data())
def test_center_net_matches_gluoncv(data):
    grid_w, grid_h, scale = data.draw(st.sampled_from(CENTER_NET_GRIDS), 'grid')
    # the grid is the image size divided by the scale factor, rounded down
    width = grid_w * scale + data.draw(st.integers(0, scale - 1))
    height = grid_h * scale + data.draw(st.integers(0, scale - 1))
    normalize = data.draw(st.booleans(), 'normalize')
    size = data.draw(st.integers(1, 4), 'batch size')
    drawn = [data.draw(center_net_labels(grid_w, grid_h)) for _ in range(size)]
    pictures = images(size, width, height, normalize)
    batchify = CenterNetTrainBatchify(CENTER_NET_CLASSES, scale, normalize=normalize)
    ours = batchify([(mine, label) for (mine, _), (label, _) in zip(pictures, drawn)])
    generator = CenterNetTargetGenerator(CENTER_NET_CLASSES, grid_w, grid_h)
    check_against_gluoncv(
        ours, [(theirs, bbox) for (_, theirs), (_, bbox) in zip(pictures, drawn)],
        lambda image, bbox: gluoncv_center_net_sample(generator, image, bbox),
        GCV_CENTER_NET, CENTER_NET_EXACT)


def test_center_net_later_box_owns_a_shared_cell():
    boxes = np.array([[2, 2, 6, 6, 1], [3, 3, 5, 5, 2], [8.5, 1, 9.5, 3, 0]], np.float64)
    pictures = images(2, 48, 32, normalize=False)
    ours = CenterNetTrainBatchify(3)([(pictures[0][0], boxes), (pictures[1][0], boxes[:1])])
    generator = CenterNetTargetGenerator(3, 12, 8)
    check_against_gluoncv(ours, [(pictures[0][0], boxes), (pictures[1][0], boxes[:1])],
                          lambda image, bbox: gluoncv_center_net_sample(generator, image, bbox),
                          GCV_CENTER_NET, CENTER_NET_EXACT)
    np.testing.assert_array_equal(ours[2][0, :, 4, 4].asnumpy(), [2, 2])  # the second box
    np.testing.assert_array_equal(ours[2][1, :, 4, 4].asnumpy(), [4, 4])  # alone: the first


# ---------------------------------------------------------------------------------------
# end to end: the real presets, seeded alike


def preset_samples(preset, dataset, seed):
    """``preset`` over ``dataset`` after seeding every generator with ``seed`` (labels
    copied: gluoncv's CenterNet preset writes into the one it is given)."""
    random.seed(seed)
    np.random.seed(seed)
    mx.random.seed(seed)
    return [preset(image, label.copy()) for image, label in dataset]


def small_dataset(length, seed, mix_ratios=False):
    base = SyntheticDetection(length=length, size_range=((70, 110), (90, 150)), seed=seed)
    samples = [base[i] for i in range(length)]
    if mix_ratios:  # the 6th column as a mixup ratio
        samples = [(image, np.concatenate([label[:, :5], np.linspace(
            0.3, 1, len(label))[:, np.newaxis]], axis=1)) for image, label in samples]
    return samples


@pytest.mark.parametrize('seed', [1, 2])
def test_ssd_through_the_presets(ssd_anchors, seed):
    width, height = SSD_SIZE
    dataset = small_dataset(4, seed)
    want = GCV_SSD(preset_samples(
        gcv_presets.ssd.SSDDefaultTrainTransform(width, height, ssd_anchors), dataset, seed))
    plain = preset_samples(gcv_presets.ssd.SSDDefaultTrainTransform(width, height), dataset,
                           seed)
    got = SSDTrainBatchify(ssd_anchors)(plain)
    assert_shared_outputs(got, 3)
    assert_fields_match(got, want, SSD_EXACT, image_atol=1e-6)
    ours = preset_samples(ssd.SSDDefaultTrainTransform(width, height, normalize=False),
                          dataset, seed)
    got = SSDTrainBatchify(ssd_anchors, normalize=True)(ours)
    assert_fields_match(got, want, SSD_EXACT, image_atol=PRESET_IMAGE_ATOL)
    assert (got[1].asnumpy() > 0).any()


@pytest.mark.parametrize('mixup', [False, True])
def test_yolo_through_the_presets(yolo_net, yolo_batchifiers, mixup):
    width, height = 128, 96
    dataset = small_dataset(4, 3, mix_ratios=mixup)
    want = GCV_YOLO(preset_samples(gcv_presets.yolo.YOLO3DefaultTrainTransform(
        width, height, yolo_net, mixup=mixup), dataset, 5))
    plain = preset_samples(gcv_presets.yolo.YOLO3DefaultTrainTransform(width, height),
                           dataset, 5)
    got = yolo_batchifiers[mixup](plain)
    assert_shared_outputs(got, 7)
    assert_fields_match(got, want, YOLO_EXACT, image_atol=1e-6)
    ours = preset_samples(yolo.YOLO3DefaultTrainTransform(width, height, normalize=False),
                          dataset, 5)
    got = YOLO3TrainBatchify(yolo_net, mixup=mixup, normalize=True)(ours)
    assert_fields_match(got, want, YOLO_EXACT, image_atol=PRESET_IMAGE_ATOL)
    if mixup:
        assert set(np.unique(got[1].asnumpy())) - {0.0, 1.0}  # the ratios are objectness


def test_center_net_through_the_presets():
    width, height, scale = 128, 96, 4
    dataset = small_dataset(4, 6)
    want = GCV_CENTER_NET(preset_samples(gcv_presets.center_net.CenterNetDefaultTrainTransform(
        width, height, NUM_CLASS, scale), dataset, 7))
    for normalize in (False, True):
        ours = preset_samples(center_net.CenterNetDefaultTrainTransform(
            width, height, NUM_CLASS, scale, targets=False, normalize=normalize), dataset, 7)
        got = CenterNetTrainBatchify(NUM_CLASS, scale, normalize=not normalize)(ours)
        assert_shared_outputs(got, 6)
        assert_fields_match(got, want, CENTER_NET_EXACT, image_atol=1e-5)
    assert got[3].asnumpy().sum() > 0


# ---------------------------------------------------------------------------------------
# the batch as an object: memory, layout, pickling, inputs, loaders, modes

MODELS = ['ssd', 'yolo', 'center_net']
#: image (width, height) per model below: with 4 samples every target array but
#: gt_bboxes is large enough (64 KiB) to be written into recycled memory in DataLoader
#: workers
CASE_SIZES = {'ssd': SSD_SIZE, 'yolo': (320, 320), 'center_net': (256, 128)}
#: boxes per sample of a 16-sample dataset: batches of 4 alternate many and few boxes
LOADER_BOX_COUNTS = [40, 45, 38, 50, 1, 0, 2, 0, 30, 50, 35, 44, 0, 1, 0, 3]
BATCH = 4


def grid_anchors(width, height, per_side=32):
    """``(1, N, 4)`` centre-format anchors, four sizes on a ``per_side`` square grid:
    N = 4096, so that SSD's class targets of 4 samples fill 64 KiB."""
    xs = (np.arange(per_side) + 0.5) * width / per_side
    ys = (np.arange(per_side) + 0.5) * height / per_side
    cx, cy, side = np.meshgrid(xs, ys, [8., 20., 45., 90.], indexing='ij')
    return np.stack([cx, cy, side, side], axis=-1).reshape(1, -1, 4).astype(np.float32)


@pytest.fixture(scope='module')
def cases(yolo_batchifiers):
    """A batchify function per model: SSD and CenterNet normalizing HWC images (uint8 and
    float32), YOLOv3 stacking CHW ones."""
    return {'ssd': SSDTrainBatchify(grid_anchors(*SSD_SIZE), normalize=True),
            'yolo': yolo_batchifiers[False],
            'center_net': CenterNetTrainBatchify(NUM_CLASS, 4, normalize=True)}


def make_samples(model, counts, seed=0, size=None):
    """One sample per box count, as the model's batchify function in :func:`cases` takes
    them; CenterNet's boxes on its output grid."""
    rng = np.random.RandomState(seed)
    width, height = size or CASE_SIZES[model]
    box_w, box_h = (width // 4, height // 4) if model == 'center_net' else (width, height)
    samples = []
    for count in counts:
        if model == 'yolo':
            image = rng.standard_normal((3, height, width)).astype(np.float32)
        elif model == 'ssd':
            image = rng.randint(0, 256, (height, width, 3)).astype(np.uint8)
        else:
            image = rng.uniform(0, 255, (height, width, 3)).astype(np.float32)
        xs = np.sort(rng.uniform(0, box_w - 1, (count, 2)), axis=1)
        ys = np.sort(rng.uniform(0, box_h - 1, (count, 2)), axis=1)
        label = np.column_stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1],
                                 rng.randint(0, NUM_CLASS, count)])
        samples.append((image, label))
    return samples


def values(batch):
    return [field.asnumpy() for field in batch]


def assert_same_values(batch, want):
    assert len(batch) == len(want)
    for index, (field, expected) in enumerate(zip(batch, want)):
        assert field.context == SHARED
        got = field.asnumpy()
        assert got.shape == expected.shape and got.dtype == expected.dtype, index
        np.testing.assert_array_equal(got, expected, err_msg='field %d' % index)


@pytest.mark.parametrize('model', MODELS)
def test_every_field_splits_by_samples(cases, model):
    batchify = cases[model]
    batch = batchify(make_samples(model, [3, 0, 5]))
    assert batchify.device_layout == ('rows',) * len(batch)
    parts = split_to_devices(batch, [mx.cpu(0), mx.cpu(1)], layout=batchify)
    assert len(parts) == 2
    for part, rows, ctx in zip(parts, (slice(0, 2), slice(2, 3)), (mx.cpu(0), mx.cpu(1))):
        assert type(part) is tuple and len(part) == len(batch)
        for piece, field in zip(part, batch):
            assert piece.context == ctx
            np.testing.assert_array_equal(piece.asnumpy(), field.asnumpy()[rows])


@pytest.mark.parametrize('model', MODELS)
def test_targets_of_label_lists_and_padded_arrays(cases, model):
    """``targets`` of the labels alone (a list, or padded as ``Pad(pad_val=-1)`` pads
    them) are the batch's target fields."""
    batchify = cases[model]
    samples = make_samples(model, [3, 0, 5], seed=2)
    batch = batchify(samples)
    labels = [label for _, label in samples]
    padded = Pad(pad_val=-1)(labels)
    size = () if model == 'ssd' else CASE_SIZES[model]
    for given_labels in (labels, padded, padded.asnumpy()):
        targets = batchify.targets(given_labels, *size)
        assert_shared_outputs(targets, len(batch) - 1)
        assert_same_values(targets, values(batch[1:]))


@pytest.mark.parametrize('model', MODELS)
def test_pickled_batchify_gives_the_same_batches(cases, yolo_net, model):
    batchify = cases[model]
    data = pickle.dumps(batchify)
    copy = pickle.loads(data)
    samples = make_samples(model, [4, 1, 7], seed=3)
    assert_same_values(copy(samples), values(batchify(samples)))
    if model == 'yolo':
        # no weights: a small fraction of the network's parameter bytes
        weights = sum(p.data().size * p.data().dtype(0).itemsize
                      for p in yolo_net.collect_params().values())
        assert len(data) * 50 < weights
        # the copy infers the grids of a size it has not seen
        other = make_samples(model, [2, 3], seed=4, size=(160, 64))
        assert_same_values(copy(other), values(batchify(other)))


def ssd300_like_anchors(seed):
    """``(1, 8732, 4)`` centre-format anchors over the SSD cases' images, as many as
    SSD300's; another ``seed``, other anchors."""
    rng = np.random.RandomState(seed)
    width, height = SSD_SIZE
    centres = rng.uniform(0, 1, (8732, 2)) * (width, height)
    sides = rng.uniform(8, 90, (8732, 2))
    return np.concatenate([centres, sides], axis=1)[None].astype(np.float32)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_ssd_batchify_pickles_small_and_its_workers_batches_are_the_main_processes(
        num_workers):
    """MXNet's DataLoader pickles the batchify function into every task: SSD's pickles
    without its 8,732 anchors, and the copies the workers unpickle give the very batches
    the function gives in the main process."""
    batchify = SSDTrainBatchify(ssd300_like_anchors(seed=11), normalize=True)
    assert len(pickle.dumps(batchify)) < 1024
    samples = make_samples('ssd', LOADER_BOX_COUNTS, seed=12)
    want = [values(batchify(samples[i:i + BATCH])) for i in range(0, len(samples), BATCH)]
    loader = mx.gluon.data.DataLoader(mx.gluon.data.SimpleDataset(samples), batch_size=BATCH,
                                      batchify_fn=batchify, num_workers=num_workers)
    got = [values(batch) for batch in loader]
    assert len(got) == len(want)
    for batch, expected in zip(got, want):
        for field, field_want in zip(batch, expected):
            np.testing.assert_array_equal(field, field_want)


def test_ssd_batchify_copies_keep_their_own_anchors():
    """Two SSD batchify functions with other anchors in one process: each unpickled copy
    (here and in a DataLoader worker forked after both were made) gives its own targets."""
    first, second = (SSDTrainBatchify(ssd300_like_anchors(seed), normalize=True)
                     for seed in (21, 22))
    labels = [label for _, label in make_samples('ssd', [6, 3], seed=23)]
    want = {id(fn): values(fn.targets(labels)) for fn in (first, second)}
    assert not np.array_equal(want[id(first)][1], want[id(second)][1])
    for fn in (first, second, first):
        copy = pickle.loads(pickle.dumps(fn))
        for field, expected in zip(values(copy.targets(labels)), want[id(fn)]):
            np.testing.assert_array_equal(field, expected)
    samples = make_samples('ssd', [6, 3], seed=23)
    for fn in (second, first):
        loader = mx.gluon.data.DataLoader(mx.gluon.data.SimpleDataset(samples),
                                          batch_size=2, batchify_fn=fn, num_workers=1)
        (batch,) = list(loader)
        for field, expected in zip(values(batch)[1:], want[id(fn)]):
            np.testing.assert_array_equal(field, expected)


def _unpickle_in_child(connection):
    payload = connection.recv_bytes()
    try:
        pickle.loads(payload)
        connection.send('unpickled')
    except ValueError as err:
        connection.send(str(err))


def test_ssd_batchify_unpickled_where_its_anchors_are_unknown_says_so():
    """A process forked before the function was made does not know its token."""
    context = multiprocessing.get_context('fork')
    here, there = context.Pipe()
    child = context.Process(target=_unpickle_in_child, args=(there,))
    child.start()
    try:
        batchify = SSDTrainBatchify(ssd300_like_anchors(seed=31))
        here.send_bytes(pickle.dumps(batchify))
        message = here.recv()
    finally:
        child.join(60)
    assert 'cannot unpickle this SSDTrainBatchify' in message
    assert 'its anchors' in message and 'make the SSDTrainBatchify in this process' in message


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('size', [1, 3])
def test_inputs_are_neither_changed_nor_aliased(cases, model, size):
    """numpy and NDArray (cpu and cpu_shared) inputs: the batch is a copy both ways."""
    batchify = cases[model]
    samples = []
    for index, (image, label) in enumerate(make_samples(model, [5, 2, 9][:size], seed=5)):
        if index % 2 == 0:  # NDArrays in shared memory, where a copy could be skipped
            image = mx.nd.array(image, dtype=image.dtype, ctx=SHARED)
            label = mx.nd.array(label.astype(np.float32), dtype=np.float32, ctx=SHARED)
        else:
            label = label.astype(np.float32)
        samples.append((image, label))
    before = snapshot(samples)
    batch = batchify(samples)
    want = values(batch)
    assert_unchanged(before, snapshot(samples))
    overwrite_all(batch)  # writing the batch leaves the inputs alone
    assert_unchanged(before, snapshot(samples))
    batch = batchify(samples)
    for image, label in samples:  # and writing the inputs leaves the batch alone
        image[:] = 7
        label[:] = 3
    assert_same_values(batch, want)


def loader_for(kind, dataset, batchify, num_workers):
    if kind == 'mxnet':
        return mx.gluon.data.DataLoader(dataset, batch_size=BATCH, batchify_fn=batchify,
                                        num_workers=num_workers)
    if kind == 'threads':
        return mx.gluon.data.DataLoader(dataset, batch_size=BATCH, batchify_fn=batchify,
                                        num_workers=num_workers, thread_pool=True)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # deprecated as in gluoncv, still used
        return DetectionDataLoader(dataset, batch_size=BATCH, batchify_fn=batchify,
                                   num_workers=num_workers)


@pytest.mark.parametrize('model', MODELS)
@pytest.mark.parametrize('kind, num_workers', [
    ('mxnet', 0), ('mxnet', 1), ('mxnet', 2), ('gluonbatch', 0), ('gluonbatch', 1),
    ('gluonbatch', 2), ('threads', 2)])
def test_loader_batches_equal_direct_calls(cases, model, kind, num_workers):
    """Two epochs of batches with many, then few boxes: recycled memory never shows a
    target of an earlier batch."""
    batchify = cases[model]
    samples = make_samples(model, LOADER_BOX_COUNTS, seed=6)
    want = [values(batchify(samples[i:i + BATCH])) for i in range(0, len(samples), BATCH)]
    loader = loader_for(kind, mx.gluon.data.SimpleDataset(samples), batchify, num_workers)
    for _ in range(2):
        seen = 0
        for batch in loader:
            assert_same_values(batch, want[seen])
            seen += 1
            del batch  # its memory may serve a later batch
        assert seen == len(want)


@pytest.mark.parametrize('model', MODELS)
def test_numpy_mode_gives_the_same_values(cases, model):
    """mx.np inputs, mx.np outputs; YOLOv3 at a size first seen in numpy mode."""
    batchify = cases[model]
    samples = make_samples(model, [6, 0, 3], seed=7,
                           size=(224, 96) if model == 'yolo' else None)
    npx.set_np()
    try:
        np_samples = [(mx.np.array(image, dtype=image.dtype),
                       mx.np.array(label, dtype=label.dtype)) for image, label in samples]
        batch = batchify(np_samples)
        assert all(type(field) is mx.np.ndarray for field in batch)
        got = values(batch)
    finally:
        npx.reset_np()
    want = batchify(samples)
    assert all(type(field) is mx.nd.NDArray for field in want)
    assert_same_values(want, got)


@pytest.mark.parametrize('loader_class', [GluoncvRandomTransformDataLoader,
                                          RandomTransformDataLoader],
                         ids=['gluoncv', 'gluonbatch'])
def test_random_shape_loader_matches_gluoncv(yolo_net, yolo_batchifiers, loader_class):
    """A RandomTransformDataLoader (gluoncv's, gluonbatch's) over YOLOv3 presets of three
    sizes made without the network and one YOLO3TrainBatchify gives the batches of
    gluoncv's loader over presets made with the network and gluoncv's batchify."""
    dataset = mx.gluon.data.SimpleDataset(small_dataset(8, 8))
    sizes = [64, 96, 128]

    def batches(loader_class, presets, batchify):
        random.seed(11)
        np.random.seed(11)
        mx.random.seed(11)
        loader = loader_class(presets, dataset, batch_size=2, interval=1,
                              last_batch='rollover', num_workers=0, batchify_fn=batchify)
        return [tuple(batch) for batch in loader]

    want = batches(GluoncvRandomTransformDataLoader,
                   [gcv_presets.yolo.YOLO3DefaultTrainTransform(s, s, yolo_net)
                    for s in sizes], GCV_YOLO)
    got = batches(loader_class, [gcv_presets.yolo.YOLO3DefaultTrainTransform(s, s)
                                 for s in sizes], yolo_batchifiers[False])
    assert len(got) == len(want) == 4
    assert len({batch[0].shape[-1] for batch in got}) > 1  # the sizes really vary
    for ours, theirs in zip(got, want):
        assert_shared_outputs(ours, 7)
        assert_fields_match(ours, theirs, YOLO_EXACT, image_atol=1e-6)


# ---------------------------------------------------------------------------------------
# errors


@pytest.fixture(scope='module')
def small_yolo(yolo_net):
    return {normalize: YOLO3TrainBatchify(yolo_net, normalize=normalize)
            for normalize in (False, True)}


def error_case(model, normalize, small_yolo):
    """A batchify function of ``model`` and two good samples for it: 64x64 images, CHW
    float32 (HWC uint8 with ``normalize``)."""
    if model == 'yolo':
        batchify = small_yolo[normalize]
    elif model == 'ssd':
        batchify = SSDTrainBatchify(grid_anchors(64, 64, per_side=4), normalize=normalize)
    else:
        batchify = CenterNetTrainBatchify(3, normalize=normalize)
    image = np.zeros((64, 64, 3), np.uint8) if normalize else np.zeros((3, 64, 64), 'f4')
    label = np.array([[4., 4., 12., 12., 1.]])
    return batchify, [(image, label), (image.copy(), label.copy())]


@pytest.mark.parametrize('model', MODELS)
def test_malformed_samples_are_refused(small_yolo, model):
    batchify, (first, second) = error_case(model, False, small_yolo)
    for bad in (second + (0,), second[:1], second[0]):
        with pytest.raises(ValueError, match=r'sample 1 .*2'):
            batchify([first, bad])
    with pytest.raises(ValueError, match='empty'):
        batchify([])


@pytest.mark.parametrize('model', MODELS)
def test_bad_labels_are_refused(small_yolo, model):
    batchify, (first, second) = error_case(model, False, small_yolo)
    with pytest.raises(ValueError, match=r'sample 1 .*\(1, 4\)'):
        batchify([first, (second[0], second[1][:, :4])])
    with pytest.raises(ValueError, match=r'sample 1 .*\(5,\)'):
        batchify([first, (second[0], second[1][0])])
    for label, kind in (([[4., 4., 12., 12., 1.]], 'list'), (None, 'NoneType')):
        with pytest.raises(TypeError, match=r'sample 1\b.*got %s' % kind
                           if model != 'center_net' else 'got %s' % kind):
            batchify([first, (second[0], label)])


def test_center_net_non_array_label_names_the_sample(small_yolo):
    batchify, (first, second) = error_case('center_net', False, small_yolo)
    with pytest.raises(TypeError, match=r'sample 1\b'):
        batchify([first, (second[0], [[4., 4., 12., 12., 1.]])])


@pytest.mark.parametrize('normalize', [False, True])
@pytest.mark.parametrize('model', MODELS)
def test_images_of_different_shapes_are_refused(small_yolo, model, normalize):
    batchify, (first, second) = error_case(model, normalize, small_yolo)
    other = np.zeros((64, 32, 3), np.uint8) if normalize else np.zeros((3, 64, 32), 'f4')
    with pytest.raises(ValueError, match=r'sample 2 has shape \(%s\)' % (
            '64, 32, 3' if normalize else '3, 64, 32')):
        batchify([first, second, (other, second[1])])


@pytest.mark.parametrize('model', MODELS)
def test_chw_images_to_normalize_are_refused(small_yolo, model):
    batchify, _ = error_case(model, True, small_yolo)
    _, samples = error_case(model, False, small_yolo)
    with pytest.raises(ValueError, match=r'sample 0 has shape \(3, 64, 64\).*HWC'):
        batchify(samples)


@pytest.mark.parametrize('preset_normalize', [False, True])
def test_a_preset_and_a_batchify_function_that_disagree_on_normalize_are_named_both(
        small_yolo, preset_normalize):
    """A preset's output (HWC with normalize=False, CHW with normalize=True) given to a
    batchify function made with the same normalize (which wants the other layout): the
    error names the preset's knob and the batchify function's, and what each should be."""
    preset = ssd.SSDDefaultTrainTransform(64, 64, normalize=preset_normalize)
    image = mx.nd.array(np.random.RandomState(8).randint(0, 256, (80, 96, 3)), dtype='uint8')
    sample = preset(image, np.array([[4., 4., 40., 40., 1.]]))
    agreeing = SSDTrainBatchify(grid_anchors(64, 64, per_side=4),
                                normalize=not preset_normalize)
    assert agreeing([sample, sample])[0].shape == (2, 3, 64, 64)
    remedy = ('Make the two agree: the preset with normalize=False and {0}(..., '
              'normalize=True), which normalizes as it writes the batch, or the preset with '
              'normalize=True and {0}(..., normalize=False)')
    for model in MODELS:
        batchify, _ = error_case(model, preset_normalize, small_yolo)
        name = type(batchify).__name__
        with pytest.raises(ValueError) as error:
            batchify([sample, sample])
        message = str(error.value)
        assert message.startswith('sample 0 has shape %s, an image laid out %s as a preset '
                                  'made with normalize=%s returns it, but %s(normalize=%s) '
                                  'takes images laid out %s' % (
                                      tuple(sample[0].shape),
                                      'CHW' if preset_normalize else 'HWC', preset_normalize,
                                      name, preset_normalize,
                                      'HWC' if preset_normalize else 'CHW')), message
        assert message.endswith(remedy.format(name)), message


@pytest.mark.parametrize('model, image', [
    ('ssd', (64, 64, 3)), ('yolo', (64, 64, 3)), ('yolo', (64, 64)),
    ('center_net', (64, 64, 3))])
def test_images_not_chw_are_refused_without_normalize(small_yolo, model, image):
    batchify, (first, second) = error_case(model, False, small_yolo)
    if model == 'center_net':
        batchify = CenterNetTrainBatchify(3, scale_factor=1)
    samples = [(np.zeros(image, 'f4'), first[1]), (np.zeros(image, 'f4'), second[1])]
    with pytest.raises(ValueError, match=r'sample 0 .*%s' % re.escape(str(tuple(image)))):
        batchify(samples)


def test_center_net_boxes_off_the_grid_are_refused():
    batchify, (first, second) = error_case('center_net', False, None)
    for box, seen in (([30., 0., 40., 4., 1.], r'35\.0, 2\.0'), ([1., 1., 3., 3., 3.], r'3\.0'),
                      ([1., 1., 3., 3., -1.], r'-1\.0')):
        with pytest.raises(ValueError, match=seen):
            batchify([first, (second[0], np.array([box]))])


def test_yolo_bad_class_ids_and_centres_are_refused(small_yolo):
    batchify, (first, second) = error_case('yolo', False, small_yolo)
    for box, seen in (([4., 4., 12., 12., 20.], r'class id 20\.0 \(sample 1'),
                      ([4., 4., 12., 12., -21.], r'class id -21\.0 \(sample 1'),
                      ([900., 900., 910., 910., 1.], r'\(sample 1, row 0\)')):
        with pytest.raises(IndexError, match=seen):  # what gluoncv raises
            batchify([first, (second[0], np.array([box]))])


def test_yolo_bad_class_id_is_a_value_error(small_yolo):
    batchify, (first, second) = error_case('yolo', False, small_yolo)
    with pytest.raises(ValueError):
        batchify([first, (second[0], np.array([[4., 4., 12., 12., 20.]]))])


def test_yolo_targets_per_size_are_never_served_for_another_size(yolo_net):
    """The per-process cache of targets per image size: sizes alternating, through copies
    of the batchify function too, each batch equal to targets made for its own size."""
    from gluonbatch.targets.yolo import YOLO3Targets

    batchify = YOLO3TrainBatchify(yolo_net)
    labels = [np.array([[10., 12., 40., 50., 1.], [3., 4., 60., 62., 2.]], 'float32')]
    for width, height in [(64, 64), (96, 64), (64, 64), (64, 96), (96, 64)]:
        for fn in (batchify, pickle.loads(pickle.dumps(batchify))):
            ours = [field.asnumpy() for field in fn.targets(labels, width, height)]
            expected = YOLO3Targets(yolo_net, width, height).batch(labels)
            assert [o.shape for o in ours[:5]] == [e.shape for e in expected]
            for mine, theirs in zip(ours, expected):
                np.testing.assert_array_equal(mine, theirs)
