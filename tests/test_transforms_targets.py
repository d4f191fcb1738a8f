"""gluonbatch's SSD and YOLOv3 training targets against gluoncv's generators, called exactly
as gluoncv's train presets call them.

Labels are drawn with up to 50 boxes of every awkward kind: random, on cell borders (centres
on multiples of every stride), tiny or empty, image-sized, partly outside the image,
duplicated, several sharing one centre (one cell), and -1 padding rows where gluoncv takes
them. Every target is compared for equality, bit for bit (NaN where gluoncv has NaN). The
batch entry points must equal the per-sample one.
"""
import pickle

import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mxnet import autograd

gcv_model_zoo = pytest.importorskip('gluoncv.model_zoo')
from gluoncv.model_zoo.ssd.target import SSDTargetGenerator  # noqa: E402
from gluoncv.model_zoo.yolo.yolo_target import YOLOV3PrefetchTargetGenerator  # noqa: E402

from gluonbatch.targets.iou import AnchorSet  # noqa: E402
from gluonbatch.targets.ssd import SSDTargets, box_iou, ssd_match  # noqa: E402
from gluonbatch.targets.yolo import YOLO3Targets  # noqa: E402

from helpers import build_zoo_net, examples  # noqa: E402


def slow(full):
    """Settings of a test that runs gluoncv: no deadline, ``full`` examples in the full tier
    (fewer in the everyday one)."""
    return settings(max_examples=examples(full), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# YOLO sizes (height, width): two squares and a non-square one
YOLO_SIZES = [(320, 320), (416, 416), (320, 416)]


# ---------------------------------------------------------------------------------------
# the networks, built once per session (conftest.py)


@pytest.fixture(scope='module')
def ssd_anchors(zoo_ssd_anchors):
    """Anchors of SSD300 (VGG16) and SSD512 (MobileNet), as their train-mode forwards return
    them: ``{size: (1, N, 4) NDArray}``."""
    return {size: zoo_ssd_anchors(name, size, size)
            for name, size in (('ssd_300_vgg16_atrous_voc', 300),
                               ('ssd_512_mobilenet1.0_voc', 512))}


@pytest.fixture(scope='module')
def yolo_net(zoo_net):
    return zoo_net('yolo3_mobilenet1.0_voc')


@pytest.fixture(scope='module')
def yolo_pairs(yolo_net):
    """Per size and mixup flag: (gluoncv's reference, gluonbatch's YOLO3Targets)."""
    grids = {size: gluoncv_yolo_grids(yolo_net, size[1], size[0]) for size in YOLO_SIZES}
    return {(size, mixup): (GluoncvYOLO(grids[size], len(yolo_net.classes), mixup),
                            YOLO3Targets(yolo_net, size[1], size[0], mixup=mixup))
            for size in YOLO_SIZES for mixup in (False, True)}


# ---------------------------------------------------------------------------------------
# gluoncv, called as its presets call it


def gluoncv_ssd(anchors, bbox, iou_thresh=0.5, box_norm=(0.1, 0.1, 0.2, 0.2)):
    """SSDDefaultTrainTransform's last lines."""
    generator = SSDTargetGenerator(iou_thresh=iou_thresh, stds=box_norm,
                                   negative_mining_ratio=-1)
    gt_bboxes = mx.nd.array(bbox[np.newaxis, :, :4])
    gt_ids = mx.nd.array(bbox[np.newaxis, :, 4:5])
    cls_targets, box_targets, _ = generator(anchors, None, gt_bboxes, gt_ids)
    return cls_targets[0].asnumpy(), box_targets[0].asnumpy()


def gluoncv_yolo_grids(net, width, height):
    """YOLO3DefaultTrainTransform's setup: its fake input and the anchors, offsets and
    feature maps of the network's train-mode forward (the same with and without mixup)."""
    fake_x = mx.nd.zeros((1, 3, height, width))
    old_ctx = list(net.collect_params().values())[0].list_ctx()
    net.collect_params().reset_ctx(mx.cpu())
    with autograd.train_mode():
        _, anchors, offsets, feat_maps, _, _, _, _ = net(fake_x)
    net.collect_params().reset_ctx(old_ctx)
    return fake_x, anchors, offsets, feat_maps


class GluoncvYOLO:
    """YOLO3DefaultTrainTransform's last lines, on the grids of :func:`gluoncv_yolo_grids`."""

    def __init__(self, grids, num_class, mixup):
        self._mixup = mixup
        self._fake_x, self._anchors, self._offsets, self._feat_maps = grids
        self._generator = YOLOV3PrefetchTargetGenerator(num_class=num_class)

    def __call__(self, bbox):
        gt_bboxes = mx.nd.array(bbox[np.newaxis, :, :4])
        gt_ids = mx.nd.array(bbox[np.newaxis, :, 4:5])
        gt_mixratio = mx.nd.array(bbox[np.newaxis, :, -1:]) if self._mixup else None
        outputs = self._generator(self._fake_x, self._feat_maps, self._anchors, self._offsets,
                                  gt_bboxes, gt_ids, gt_mixratio)
        return tuple(o[0].asnumpy() for o in outputs) + (gt_bboxes[0].asnumpy(),)


# ---------------------------------------------------------------------------------------
# labels


@st.composite
def labels(draw, width, height, strides=(8, 16, 32), min_boxes=1, max_boxes=50,
           mixup=False, padding=0):
    """An (M, 5) float64 label (6 columns with a mix ratio), M in [min_boxes, max_boxes],
    with ``padding`` -1 rows drawn at the end (up to that many)."""
    count = draw(st.integers(min_boxes, max_boxes))
    rows = []
    coord_x = st.floats(0, width, allow_nan=False)
    coord_y = st.floats(0, height, allow_nan=False)
    for _ in range(count):
        kind = draw(st.sampled_from(['random', 'random', 'border', 'tiny', 'image', 'outside',
                                     'duplicate', 'same_cell']))
        if kind in ('duplicate', 'same_cell') and not rows:
            kind = 'random'
        if kind == 'random':
            x1, x2 = sorted((draw(coord_x), draw(coord_x)))
            y1, y2 = sorted((draw(coord_y), draw(coord_y)))
        elif kind == 'border':
            # centre (or an edge) on a multiple of a stride: exactly on a cell border
            stride = draw(st.sampled_from(strides))
            cx = stride * draw(st.integers(0, width // stride))
            cy = stride * draw(st.integers(0, height // stride))
            half_w = draw(st.sampled_from([0, 0.5, stride / 2, stride, 3 * stride]))
            half_h = draw(st.sampled_from([0, 0.5, stride / 2, stride, 3 * stride]))
            if draw(st.booleans()):
                x1, y1, x2, y2 = cx - half_w, cy - half_h, cx + half_w, cy + half_h
            else:
                x1, y1, x2, y2 = cx, cy, cx + 2 * half_w, cy + 2 * half_h
            x1, y1 = max(x1, 0.0), max(y1, 0.0)
            x2, y2 = min(x2, float(width)), min(y2, float(height))
        elif kind == 'tiny':
            x1, y1 = draw(coord_x), draw(coord_y)
            x2 = x1 + draw(st.sampled_from([0.0, 1e-3, 0.5, 0.999, 1.0, 1.5]))
            y2 = y1 + draw(st.sampled_from([0.0, 1e-3, 0.5, 0.999, 1.0, 1.5]))
        elif kind == 'image':
            x1, y1, x2, y2 = 0.0, 0.0, float(width), float(height)
        elif kind == 'outside':
            x1, y1 = draw(coord_x), draw(coord_y)
            x2 = x1 + draw(st.floats(0, width / 2))
            y2 = y1 + draw(st.floats(0, height / 2))
        elif kind == 'duplicate':
            rows.append(list(rows[draw(st.integers(0, len(rows) - 1))]))
            continue
        else:  # same_cell: another size around the centre of an earlier box
            x1, y1, x2, y2 = rows[draw(st.integers(0, len(rows) - 1))][:4]
            cx, cy = (x1 + x2) / 2, (y1 + y2) / 2
            scale = draw(st.sampled_from([0.25, 0.5, 2.0, 4.0]))
            half_w = max(x2 - x1, 1.0) * scale / 2
            half_h = max(y2 - y1, 1.0) * scale / 2
            x1, y1 = max(cx - half_w, 0.0), max(cy - half_h, 0.0)
            x2, y2 = cx + half_w, cy + half_h
        class_id = float(draw(st.integers(0, 19)))
        row = [x1, y1, x2, y2, class_id]
        if mixup:
            row.append(draw(st.sampled_from([1.0, 0.5, 0.3, 0.7123456789, 0.0])))
        rows.append(row)
    pads = draw(st.integers(0, padding))
    rows.extend([[-1.0] * (6 if mixup else 5)] * pads)
    label = np.array(rows, np.float64).reshape(-1, 6 if mixup else 5)
    if draw(st.booleans()):
        label = label.astype(np.float32)  # gluoncv labels come in both
    return label


def assert_ssd_equal(ours, reference):
    """Class and box targets equal, bit for bit."""
    np.testing.assert_array_equal(ours[0], reference[0])
    np.testing.assert_array_equal(ours[1], reference[1])
    assert ours[0].dtype == ours[1].dtype == np.float32
    assert ours[0].shape == reference[0].shape and ours[1].shape == reference[1].shape


# ---------------------------------------------------------------------------------------
# SSD


@slow(100)
@given(data=st.data())
@pytest.mark.parametrize('size', [300, 512])
def test_ssd_matches_gluoncv(ssd_anchors, size, data):
    label = data.draw(labels(size, size, strides=(8, 16, 32, 64, 100, 300), padding=3))
    anchors = ssd_anchors[size]
    assert_ssd_equal(SSDTargets(anchors).targets(label), gluoncv_ssd(anchors, label))


@slow(60)
@given(data=st.data(), iou_thresh=st.sampled_from([0.45, 0.5, 0.7, 1.0]),
       box_norm=st.sampled_from([(0.1, 0.1, 0.2, 0.2), (1.0, 1.0, 1.0, 1.0),
                                 (0.3, 0.05, 0.7, 0.15)]))
def test_ssd_options_match_gluoncv(ssd_anchors, data, iou_thresh, box_norm):
    label = data.draw(labels(300, 300, max_boxes=20))
    anchors = ssd_anchors[300]
    ours = SSDTargets(anchors, iou_thresh=iou_thresh, box_norm=box_norm, neg_thresh=0.3)
    assert_ssd_equal(ours.targets(label), gluoncv_ssd(anchors, label, iou_thresh, box_norm))


def test_ssd_exact_ties_match_gluoncv(ssd_anchors):
    """Boxes equal to anchors (IoU exactly 1 with them), each several times, and boxes
    halfway between two anchors: the greedy matching's ties go the way MXNet's go."""
    anchors = ssd_anchors[300]
    corners = SSDTargets(anchors).anchor_corners
    picks = corners[[0, 1, 4, 4, 100, 2000, 2000, 2000, 8000]]
    label = np.concatenate([picks, np.arange(len(picks))[:, np.newaxis]], 1)
    assert_ssd_equal(SSDTargets(anchors).targets(label), gluoncv_ssd(anchors, label))
    # two anchors of one size side by side; a box spanning both halves equally
    first, second = corners[0], corners[4]
    between = np.array([[first[0], first[1], second[2], second[3], 7.0]] * 3)
    for label in (between, np.concatenate([between, label])):
        assert_ssd_equal(SSDTargets(anchors).targets(label), gluoncv_ssd(anchors, label))


def test_ssd_no_boxes_means_all_negatives(ssd_anchors):
    anchors = ssd_anchors[300]
    with pytest.raises(mx.base.MXNetError):  # gluoncv cannot
        gluoncv_ssd(anchors, np.zeros((0, 5)))
    cls_targets, box_targets = SSDTargets(anchors).targets(np.zeros((0, 5)))
    assert cls_targets.shape == (8732,) and box_targets.shape == (8732, 4)
    assert not cls_targets.any() and not box_targets.any()


@slow(40)
@given(data=st.data())
def test_ssd_batch_equals_per_sample(ssd_anchors, data):
    """A list of labels, and the same labels padded with -1 rows (some between real rows),
    give per-sample targets; ``out=`` arrays are written whole."""
    generator = SSDTargets(ssd_anchors[300])
    batch = data.draw(st.lists(labels(300, 300, min_boxes=0, max_boxes=12), min_size=1,
                               max_size=5))
    expected = [generator.targets(label) for label in batch]
    from_list = generator.batch(batch)
    longest = max(len(label) for label in batch) + 2
    padded = np.full((len(batch), longest, 5), -1.0)
    for i, label in enumerate(batch):
        slots = sorted(data.draw(st.permutations(range(longest)))[:len(label)])
        padded[i, slots] = label[:, :5]
    out = (np.full((len(batch), 8732), 9, np.float32),
           np.full((len(batch), 8732, 4), 9, np.float32))
    from_padded = generator.batch(padded, out=out)
    assert from_padded[0] is out[0] and from_padded[1] is out[1]
    for result in (from_list, from_padded):
        for i, (cls_targets, box_targets) in enumerate(expected):
            np.testing.assert_array_equal(result[0][i], cls_targets)
            np.testing.assert_array_equal(result[1][i], box_targets)


@settings(max_examples=examples(20), deadline=None)
@given(data=st.data())
def test_a_batch_with_a_nan_box_gets_each_samples_own_targets(ssd_anchors, data):
    """One NaN coordinate sends the batch through numpy's IoU matrices, in groups, instead
    of the compiled matching of the whole batch: each sample still gets the targets it
    gets alone."""
    generator = SSDTargets(ssd_anchors[300])
    batch = data.draw(st.lists(labels(300, 300, min_boxes=1, max_boxes=12), min_size=2,
                               max_size=5))
    odd = data.draw(st.integers(0, len(batch) - 1))
    batch[odd][0, data.draw(st.integers(0, 3))] = np.nan
    with np.errstate(invalid='ignore'):
        expected = [generator.targets(label) for label in batch]
        cls_targets, box_targets = generator.batch(batch)
    for i, (want_cls, want_box) in enumerate(expected):
        np.testing.assert_array_equal(cls_targets[i], want_cls)
        np.testing.assert_array_equal(box_targets[i], want_box)


def test_padding_after_the_last_real_box_is_not_read(ssd_anchors):
    """Rows after every sample's last real box are padding that no step reads: huge values
    there raise nothing under ``np.errstate(all='raise')`` and change no target."""
    generator = SSDTargets(ssd_anchors[300])
    real = np.array([[[0.1, 0.1, 0.6, 0.6]]], np.float32)
    padded = np.concatenate([real, [[[-3e38, 0, 3e38, 3e38]]]], axis=1)
    ids = np.zeros((1, 2), np.float32)
    want = generator.compute(real, ids[:, :1])
    with np.errstate(all='raise'):
        got = generator.compute(padded, ids, valid=np.array([[True, False]]))
    for ours, theirs in zip(got, want):
        np.testing.assert_array_equal(ours, theirs)


def test_ssd_core_functions():
    anchors = np.array([[0, 0, 2, 2], [1, 1, 3, 3], [5, 5, 6, 6]], np.float32)
    boxes = np.array([[[0, 0, 2, 2], [1, 1, 3, 3], [-1, -1, -1, -1]]], np.float32)
    ious = box_iou(anchors, boxes)
    reference = mx.nd.contrib.box_iou(mx.nd.array(anchors), mx.nd.array(boxes))
    np.testing.assert_array_equal(ious, reference.asnumpy().transpose(1, 2, 0))
    match = ssd_match(ious.copy(), valid=np.array([[True, True, False]]))
    np.testing.assert_array_equal(match, [[0, 1, -1]])
    # no real box at all: nothing matched
    np.testing.assert_array_equal(
        ssd_match(ious.copy(), valid=np.zeros((1, 3), bool)), [[-1, -1, -1]])


@settings(max_examples=300, deadline=None)
@given(data=st.data(), iou_thresh=st.sampled_from([0.0, 0.3, 0.5, 1.0]))
def test_ssd_compiled_matching_equals_the_numpy_definition(data, iou_thresh):
    """Finite boxes are matched in C; ``ssd_match`` on ``box_iou`` is the definition. Boxes
    on a small integer grid of anchors make many exact ties (equal IoUs, boxes equal to
    anchors, duplicates), padding rows come anywhere, and a box id shows its match."""
    grid = np.array([[x, y, x + w, y + h] for x in range(0, 6, 2) for y in range(0, 6, 3)
                     for w, h in ((2, 2), (4, 2), (3, 5))], np.float32)
    corner = st.integers(-2, 8).map(float)
    batch = data.draw(st.integers(1, 4))
    count = data.draw(st.integers(1, 7))
    boxes = np.array(data.draw(st.lists(st.lists(corner, min_size=4, max_size=4),
                                        min_size=batch * count, max_size=batch * count)),
                     np.float32).reshape(batch, count, 4)
    valid = np.array(data.draw(st.lists(st.booleans(), min_size=batch * count,
                                        max_size=batch * count)), bool).reshape(batch, count)
    ids = np.broadcast_to(np.arange(count, dtype=np.float32), (batch, count))
    # SSDTargets takes centre-format anchors and turns them into these corners
    centres = np.stack([(grid[:, 0] + grid[:, 2]) / 2, (grid[:, 1] + grid[:, 3]) / 2,
                        grid[:, 2] - grid[:, 0], grid[:, 3] - grid[:, 1]], 1)
    generator = SSDTargets(centres, iou_thresh=iou_thresh)
    np.testing.assert_array_equal(generator.anchor_corners, grid)
    assert AnchorSet(grid).finite(boxes)  # the compiled path
    cls_targets, _ = generator.compute(boxes, ids, valid)
    match = ssd_match(box_iou(grid, boxes), iou_thresh, valid)
    np.testing.assert_array_equal(cls_targets, np.where(match >= 0, match + 1, 0))


def test_ssd_iou_is_mxnets_with_awkward_boxes():
    """The IoU SSD, YOLOv3 and RPN share, in SSD's batch layout: MXNet's bits also for
    NaN, infinite, inverted, empty and overflowing boxes."""
    rng = np.random.default_rng(3)
    anchors = rng.uniform(0, 1, (500, 4)).astype(np.float32)
    anchors[:, 2:] = anchors[:, :2] + rng.uniform(0.01, 0.6, (500, 2))
    boxes = rng.uniform(-0.2, 1.2, (3, 6, 4)).astype(np.float32)
    boxes[..., 2:] = boxes[..., :2] + rng.uniform(-0.1, 0.7, (3, 6, 2))
    boxes[0, 0] = [np.nan, 0.1, 0.5, 0.5]
    boxes[0, 1] = [0, 0, np.inf, 0.4]
    boxes[1, 0] = [-3e38, 0, 3e38, 3e38]
    boxes[1, 1] = [0.3, 0.3, 0.3, 0.3]
    boxes[2, 0] = [0.6, 0.6, 0.2, 0.2]
    with np.errstate(all='ignore'):
        ours = box_iou(anchors, boxes)
    theirs = mx.nd.contrib.box_iou(mx.nd.array(anchors), mx.nd.array(boxes)).asnumpy()
    theirs = np.ascontiguousarray(theirs.transpose(1, 2, 0))
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_ssd_arguments(ssd_anchors):
    anchors = ssd_anchors[300]
    SSDTargets(anchors.asnumpy()[0], prefix='ssd_')  # numpy (N, 4) and a Block kwarg
    with pytest.raises(TypeError, match='unexpected'):
        SSDTargets(anchors, negative_mining_ratio=3)
    with pytest.raises(ValueError):
        SSDTargets(np.zeros((2, 5, 4)))
    with pytest.raises(ValueError):
        SSDTargets(anchors).targets(np.zeros((3, 4)))
    with pytest.raises(ValueError):
        SSDTargets(anchors).compute(np.zeros((1, 1, 4)), np.zeros((1, 1)),
                                    out=(np.zeros((1, 10)), np.zeros((1, 10, 4))))


# ---------------------------------------------------------------------------------------
# YOLOv3


def assert_yolo_equal(ours, reference):
    assert len(ours) == len(reference) == 6
    for field, (mine, theirs) in enumerate(zip(ours, reference)):
        assert mine.dtype == np.float32, field
        assert mine.shape == theirs.shape, field
        # equal, but for the last bit of a subnormal (a box centre offset of ~1e-39 is
        # rounded once more by MXNet's kernels than by numpy)
        np.testing.assert_allclose(mine, theirs, rtol=0, err_msg='field %d' % field,
                                   atol=np.finfo(np.float32).smallest_subnormal)


def run_both(reference, ours, label):
    """Both outputs, or the same exception class from both."""
    try:
        expected = reference(label)
    except IndexError:
        with pytest.raises(IndexError):
            ours.targets(label)
        return None
    assert_yolo_equal(ours.targets(label), expected)
    return expected


@slow(70)
@given(data=st.data())
@pytest.mark.parametrize('size', YOLO_SIZES)
@pytest.mark.parametrize('mixup', [False, True])
def test_yolo_matches_gluoncv(yolo_pairs, size, mixup, data):
    height, width = size
    label = data.draw(labels(width, height, mixup=mixup, padding=3))
    if data.draw(st.booleans()) and len(label) > 2:
        # a -1 row among the boxes: gluoncv stops there
        label = label.copy()
        label[data.draw(st.integers(0, len(label) - 1)), :5] = -1
    run_both(*yolo_pairs[(size, mixup)], label)


def test_yolo_last_writer_wins(yolo_pairs):
    """Boxes on one cell and anchor: the last one's every field is written (also when an
    earlier box with another class, ratio and size went to the same row)."""
    reference, ours = yolo_pairs[((416, 416), True)]
    label = np.array([[100, 100, 140, 140, 3, 0.25],
                      [102, 102, 142, 142, 5, 0.5],     # same cell, same anchor
                      [100, 100, 140, 140, 3, 0.75],    # duplicate of the first
                      [0, 0, 416, 416, 1, 1.0],
                      [0, 0, 416, 416, 2, 0.125]])      # duplicate image-size box
    expected = run_both(reference, ours, label)
    objectness = expected[0][:, 0]
    assert sorted(objectness[objectness > 0]) == [0.125, 0.75]
    classes = expected[4][objectness > 0]
    assert sorted(classes.argmax(axis=1)) == [2, 3] and classes.sum() == 2


def test_yolo_centre_past_the_last_cell_raises_like_gluoncv(yolo_pairs):
    reference, ours = yolo_pairs[((416, 416), False)]
    # small box centred on the bottom edge: its layer's row 52 is past the last cell
    label = np.array([[400, 410, 420, 422, 1.0]])
    with pytest.raises(IndexError):
        reference(label)
    with pytest.raises(IndexError):
        ours.targets(label)
    # centred on the right edge: the next row of the same layer, as in gluoncv
    run_both(reference, ours, np.array([[404, 100, 428, 120, 2.0]]))
    # past the bottom of a layer, into the next layer's cells: dropped, as in gluoncv
    run_both(reference, ours, np.array([[400, 410, 420, 520, 1.0]]))


def test_yolo_no_boxes(yolo_pairs):
    reference, ours = yolo_pairs[((320, 320), False)]
    with pytest.raises(mx.base.MXNetError):  # gluoncv cannot
        reference(np.zeros((0, 5)))
    objectness, center, scale, weights, classes, gt_bboxes = ours.targets(np.zeros((0, 5)))
    assert objectness.shape == (6300, 1) and classes.shape == (6300, 20)
    assert not (objectness.any() or center.any() or scale.any() or weights.any())
    assert (classes == -1).all() and gt_bboxes.shape == (0, 4)


@slow(30)
@given(data=st.data(), mixup=st.booleans())
def test_yolo_batch_equals_per_sample(yolo_pairs, data, mixup):
    """A list of labels and the same labels padded with -1 rows give per-sample targets;
    ``out=`` arrays are written whole."""
    ours = yolo_pairs[((320, 416), mixup)][1]
    batch = data.draw(st.lists(labels(416, 320, min_boxes=0, max_boxes=10, mixup=mixup),
                               min_size=1, max_size=4))
    expected = []
    for label in batch:
        try:
            expected.append(ours.targets(label))
        except IndexError:
            with pytest.raises(IndexError):
                ours.batch(batch)
            return
    columns = 6 if mixup else 5
    padded = np.full((len(batch), max(len(label) for label in batch) + 1, columns), -1.0)
    for i, label in enumerate(batch):
        padded[i, :len(label)] = label
    out = tuple(np.full(shape, 7, np.float32) for shape in ours.shapes(len(batch)))
    from_padded = ours.batch(padded, out=out)
    assert all(a is b for a, b in zip(from_padded, out))
    for result in (ours.batch(batch), from_padded):
        for i, sample in enumerate(expected):
            for field in range(5):
                np.testing.assert_array_equal(result[field][i], sample[field])


def test_yolo_restores_parameter_contexts(monkeypatch):
    yolo_net = build_zoo_net('yolo3_mobilenet1.0_voc')  # its own: the test moves its parameters
    params = yolo_net.collect_params()
    params.reset_ctx(mx.cpu(1))
    try:
        targets = YOLO3Targets(yolo_net, 320, 320, prefix='yolo_')
        assert all(p.list_ctx() == [mx.cpu(1)] for p in params.values())
        assert targets.num_rows == 3 * (10 * 10 + 20 * 20 + 40 * 40)
        # the forward runs on the CPU in train mode, and a failing one restores them too
        seen = []

        def failing_forward(block, x, *args):
            seen.append((x.shape, x.context, autograd.is_training(),
                         {p.list_ctx()[0] for p in params.values()}))
            raise RuntimeError('forward failed')

        monkeypatch.setattr(type(yolo_net), 'forward', failing_forward)
        with pytest.raises(RuntimeError, match='forward failed'):
            YOLO3Targets(yolo_net, 416, 320)
        assert seen == [((1, 3, 320, 416), mx.cpu(), True, {mx.cpu()})]
        assert all(p.list_ctx() == [mx.cpu(1)] for p in params.values())
    finally:
        monkeypatch.undo()
        params.reset_ctx(mx.cpu())


def test_outputs_never_alias_the_label(ssd_anchors, yolo_pairs):
    """Targets are new arrays, also ``gt_bboxes`` of a float32 label (where a cast would
    be a view): a caller reusing the label's buffer must not change them."""
    generators = (SSDTargets(ssd_anchors[300]), yolo_pairs[((416, 416), False)][1])
    for generator in generators:
        for dtype in ('float32', 'float64'):
            label = np.array([[10, 20, 200, 220, 3], [30, 40, 60, 90, 1]], dtype)
            outputs = generator.targets(label)
            kept = [out.copy() for out in outputs]
            for out in outputs:
                assert not np.shares_memory(out, label)
            label[...] = 7
            for out, copy in zip(outputs, kept):
                np.testing.assert_array_equal(out, copy)


def test_yolo_arguments(yolo_net):
    with pytest.raises(TypeError, match='unexpected'):
        YOLO3Targets(yolo_net, 320, 320, num_class=3)
    ours = YOLO3Targets(yolo_net, 320, 320)
    with pytest.raises(ValueError):
        ours.targets(np.zeros((2, 4)))
    with pytest.raises(ValueError):
        ours.compute(np.zeros((1, 1, 4)), np.zeros((1, 1)), out=(np.zeros(3),) * 5)
    with pytest.raises(IndexError, match='class id'):
        ours.targets(np.array([[1, 1, 5, 5, 20.0]]))


def test_generators_pickle(ssd_anchors, yolo_pairs):
    """DataLoader workers get the transform pickled: the generators hold numpy arrays only
    (no network)."""
    label = np.array([[10, 20, 200, 220, 3.0, 0.5], [30, 40, 60, 90, 1.0, 1.0]])
    for generator in (SSDTargets(ssd_anchors[300]), yolo_pairs[((416, 416), True)][1]):
        copy = pickle.loads(pickle.dumps(generator))
        for mine, theirs in zip(copy.targets(label), generator.targets(label)):
            np.testing.assert_array_equal(mine, theirs)


def test_numpy_keeps_the_last_of_duplicate_fancy_writes():
    """What the companion batchify code may rely on in practice; the generators do not:
    numpy documents the order of duplicate fancy-index writes as unspecified, so the
    YOLO writer keeps the last write per row itself before writing."""
    target = np.zeros((4, 3), np.float32)
    target[[1, 1, 2, 1], [0, 0, 2, 0]] = [1, 2, 3, 4]
    assert target[1, 0] == 4 and target[2, 2] == 3
