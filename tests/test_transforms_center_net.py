"""gluonbatch's CenterNet presets side by side with gluoncv 0.10.5's, sample by sample.

The draws leave all three generators (numpy's global, Python's, the preset's own
``RandomState``) in gluoncv's states after every sample; boxes and the five targets equal
gluoncv's to the bit; images within float32 rounding (the colour chain is one matrix here,
gluoncv's float32 steps there). Each building block (affine matrix, box warp, colour jitter,
gaussian radius and patch, target generator) is also checked against gluoncv's own function.
"""
import pickle
import random
import threading

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from gluoncv.data.transforms import bbox as gcv_bbox
from gluoncv.data.transforms import experimental as gcv_experimental
from gluoncv.data.transforms.presets import center_net as gcv_center_net
from gluoncv.model_zoo.center_net import target_generator as gcv_targets

from gluonbatch._core import scratch
from gluonbatch.targets import center_net as targets
from gluonbatch.transforms import affine, jitter, pixels
from gluonbatch.transforms.presets import center_net, global_generators

from helpers import examples

#: max |difference| of normalized train images (measured: under 2e-6)
IMAGE_ATOL = 2e-5


def as_numpy(value):
    return value.asnumpy() if hasattr(value, 'asnumpy') else value


def random_image(rng, height, width):
    return rng.randint(0, 256, (height, width, 3)).astype(np.uint8)


def random_label(rng, width, height, num_class=5, count=None):
    """Boxes in and around an image, some tiny, some degenerate; float64 or float32."""
    count = rng.randint(0, 9) if count is None else count
    xs = np.sort(rng.uniform(-0.1 * width, 1.1 * width, (count, 2)), axis=1)
    ys = np.sort(rng.uniform(-0.1 * height, 1.1 * height, (count, 2)), axis=1)
    label = np.stack([xs[:, 0], ys[:, 0], xs[:, 1], ys[:, 1],
                      rng.randint(0, num_class, count)], axis=1)
    if count and rng.rand() < 0.3:  # a tiny box and an empty one
        label[0, 2:4] = label[0, :2] + rng.uniform(0, 2)
        label[-1, 2] = label[-1, 0]
    if count and rng.rand() < 0.2:  # integral coordinates
        label[:, :4] = np.round(label[:, :4])
    return label.astype(np.float32) if rng.rand() < 0.3 else label


def gluoncv_colour_rng(transform):
    """The generator gluoncv's train preset draws its colour jitter from. gluoncv's preset
    takes none from outside, so it is read from gluoncv's own attribute (ours is given one,
    see :func:`our_train_preset`)."""
    return transform._data_rng


def our_train_preset(*args, **kwargs):
    """Our train preset and the generator its colour jitter draws from, given explicitly
    (``RandomState(123)``, what gluoncv's preset makes for itself)."""
    data_rng = np.random.RandomState(123)
    return center_net.CenterNetDefaultTrainTransform(*args, data_rng=data_rng, **kwargs), data_rng


def rng_states(data_rng):
    """States of numpy's global generator, Python's, and the preset's ``data_rng``."""
    return (np.random.get_state()[1].copy(), np.random.get_state()[2], random.getstate(),
            data_rng.get_state()[1].copy(), data_rng.get_state()[2])


def assert_same_states(a, b):
    assert np.array_equal(a[0], b[0]) and a[1] == b[1], 'numpy global generator'
    assert a[2] == b[2], 'Python random'
    assert np.array_equal(a[3], b[3]) and a[4] == b[4], "the preset's RandomState"


def run_seeded(transform, data_rng, seed, image, label):
    """``transform(image, label)`` after seeding numpy's and Python's generators: the
    outputs as numpy arrays (or the exception) and the generators' states after
    (``data_rng``: the preset's colour generator)."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        out = [as_numpy(v) for v in transform(image, label)]
    except Exception as error:  # pylint: disable=broad-except
        out = error
    return out, rng_states(data_rng)


# ---------------------------------------------------------------------------------------
# building blocks


def test_get_border_is_gluoncvs():
    for size in list(range(1, 600)) + [1000, 4000]:
        assert affine.get_border(128, size) == gcv_center_net._get_border(128, size)


def test_affine_matrix_is_gluoncvs_to_the_bit():
    rng = np.random.RandomState(0)
    for _ in range(300):
        w, h = rng.randint(1, 2000, 2)
        c = np.array([w / 2., h / 2.], np.float32)
        c[0], c[1] = rng.randint(0, w), rng.randint(0, h)
        s = max(h, w) * 1.0 * np.clip(rng.randn() * 0.4 + 1, 0.6, 1.4)
        size = [int(rng.randint(1, 600)), int(rng.randint(1, 600))]
        inv = rng.rand() < 0.2
        ours = affine.get_affine_transform(c, s, size, inverse=inv)
        theirs = gcv_bbox.get_affine_transform(c, s, 0, size, inv=inv)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


def gluoncv_box_warp(label, trans, out_w, out_h):
    """gluoncv's train preset's box lines, on a copy."""
    bbox = label.copy()
    for i in range(bbox.shape[0]):
        bbox[i, :2] = gcv_bbox.affine_transform(bbox[i, :2], trans)
        bbox[i, 2:4] = gcv_bbox.affine_transform(bbox[i, 2:4], trans)
    bbox[:, :2] = np.clip(bbox[:, :2], 0, out_w - 1)
    bbox[:, 2:4] = np.clip(bbox[:, 2:4], 0, out_h - 1)
    return bbox


@pytest.mark.parametrize('dtype', ['float64', 'float32', 'int64'])
def test_box_warp_is_gluoncvs_to_the_bit(dtype):
    rng = np.random.RandomState(1)
    for _ in range(200):
        w, h = rng.randint(1, 1000, 2)
        c = np.array([rng.randint(0, w), rng.randint(0, h)], np.float32)
        s = max(h, w) * np.clip(rng.randn() * 0.4 + 1, 0.6, 1.4)
        out_w, out_h = rng.randint(1, 200, 2)
        trans = gcv_bbox.get_affine_transform(c, s, 0, [out_w, out_h])
        label = random_label(rng, w, h, count=rng.randint(0, 20)).astype(dtype)
        label = np.concatenate([label, rng.rand(len(label), 1)], axis=1)  # an extra column
        before = label.copy()
        ours = affine.warp_boxes(label, trans, (out_w, out_h))
        theirs = gluoncv_box_warp(label, trans, out_w, out_h)
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
        assert np.array_equal(label, before)


def test_box_clipping_keeps_gluoncvs_swap():
    # columns 0, 1 against the width, 2, 3 against the height
    trans = np.array([[1., 0., 0.], [0., 1., 0.]])
    out = affine.warp_boxes(np.array([[50., 50., 50., 50., 0.]]), trans, (20, 40))
    assert out.tolist() == [[19., 19., 39., 39., 0.]]


def test_warp_image_writes_into_out():
    rng = np.random.RandomState(2)
    image = random_image(rng, 30, 40)
    trans = gcv_bbox.get_affine_transform(np.array([20., 15.], np.float32), 40., 0, [16, 12])
    out = np.empty((12, 16, 3), np.uint8)
    assert affine.warp_image(image, trans, (16, 12), out=out) is out
    assert np.array_equal(out, affine.warp_image(image, trans, (16, 12)))
    assert np.array_equal(out, affine.warp_image(image[:, ::-1][:, ::-1], trans, (16, 12)))


def test_color_jitter_matches_gluoncvs():
    """gluoncv's ``np_random_color_distort`` (on a copy: it jitters in place) against its
    pieces here: the draws, the folded matrix and the pixel pass, which leaves the image
    alone."""
    rng = np.random.RandomState(3)
    for seed in range(40):
        image = rng.rand(rng.randint(1, 40), rng.randint(1, 40), 3).astype(np.float32)
        before, theirs = image.copy(), image.copy()
        random.seed(seed)
        gcv_rng = np.random.RandomState(seed)
        gcv_experimental.image.np_random_color_distort(theirs, data_rng=gcv_rng)
        after = random.getstate()
        random.seed(seed)
        our_rng = np.random.RandomState(seed)
        params = jitter.draw_jitter(our_rng)     # the shuffle by Python's global random
        assert random.getstate() == after
        assert np.array_equal(our_rng.get_state()[1], gcv_rng.get_state()[1])
        assert our_rng.get_state()[2:] == gcv_rng.get_state()[2:]
        gs_mean = jitter.gray_mean(image)
        hwc = pixels.affine_hwc(image, jitter.jitter_matrix(params, gs_mean))
        chw = pixels.affine_chw(image, jitter.color_matrix(params, gs_mean))
        assert np.array_equal(image, before)
        np.testing.assert_allclose(hwc, theirs, rtol=1e-5, atol=2e-6)
        np.testing.assert_allclose(chw, theirs.transpose(2, 0, 1), rtol=1e-5, atol=2e-6)


def test_color_jitter_draws_in_gluoncvs_order():
    params = jitter.draw_jitter(np.random.RandomState(123), random.Random(4))
    order = ['brightness', 'contrast', 'saturation']
    random.Random(4).shuffle(order)
    data_rng = np.random.RandomState(123)
    alphas = {name: 1. + data_rng.uniform(low=-0.4, high=0.4) for name in order}
    assert params.order == tuple(order)
    assert (params.brightness, params.contrast, params.saturation) == (
        alphas['brightness'], alphas['contrast'], alphas['saturation'])
    assert params.lighting == tuple(data_rng.normal(scale=0.1, size=(3,)).tolist())


def test_color_matrix_applies_the_steps_in_order():
    """The folded matrix against gluoncv's steps done in float64 on a few pixels."""
    rng = np.random.RandomState(5)
    pixels = rng.randint(0, 256, (7, 3)).astype(np.float64)
    for seed in range(20):
        params = jitter.draw_jitter(np.random.RandomState(seed), random.Random(seed))
        x = pixels / 255.
        gs = x @ jitter.GRAY_WEIGHTS.astype(np.float64)
        gs_mean = 0.37
        for name in params.order:
            a = getattr(params, name)
            if name == 'brightness':
                x = x * a
            elif name == 'contrast':
                x = x * a + (1 - a) * gs_mean
            else:
                x = x * a + (1 - a) * gs[:, None]
        x = x + np.dot(jitter.EIG_VEC, jitter.EIG_VAL * np.array(params.lighting))
        mean, std = np.float32([0.485, 0.456, 0.406]), np.float32([0.229, 0.224, 0.225])
        expected = (x - mean) / std
        m = jitter.color_matrix(params, gs_mean, 1 / 255., mean, std)
        np.testing.assert_allclose(pixels @ m[:, :3].T + m[:, 3], expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize('dtype', ['float64', 'float32', 'float16', 'int64'])
def test_gaussian_radius_is_gluoncvs_to_the_bit(dtype):
    rng = np.random.RandomState(6)
    scale = 250 if dtype == 'float16' else 1e7  # float16 products stay finite
    sizes = np.concatenate([rng.uniform(0, 4, (200, 2)), rng.uniform(0, 200, (300, 2)),
                            rng.uniform(0, scale, (300, 2))]).astype(dtype)
    heights, widths = np.ceil(sizes[:, 0]), np.ceil(sizes[:, 1])
    ours = targets.gaussian_radius(heights, widths)
    for h, w, r in zip(heights, widths, ours):
        theirs = gcv_targets._gaussian_radius((h, w))
        assert r == theirs and int(r) == int(theirs)


def test_gaussian_patch_is_gluoncvs():
    for radius in list(range(0, 70)) + [255, 256, 257]:
        d = 2 * radius + 1
        theirs = gcv_targets._gaussian_2d((d, d), sigma=d / 6)
        ours = targets.gaussian_patch(radius)
        assert ours.dtype == np.float32 and np.array_equal(ours, theirs.astype(np.float32))
        assert not ours.flags.writeable


def square_box_of_radius(radius, x, y):
    """A square box centred in cell ``(x, y)`` whose gaussian has radius ``radius``."""
    sides = np.arange(1., 8 * radius + 16)
    side = sides[np.trunc(targets.gaussian_radius(sides, sides)) == radius][0]
    return np.array([[x + 0.5 - side / 2, y + 0.5 - side / 2,
                      x + 0.5 + side / 2, y + 0.5 + side / 2]])


@pytest.mark.parametrize('radius,cell,grid', [
    (255, (255, 255), (511, 511)),          # patches cached whole
    (256, (256, 256), (513, 513)),          # the largest of them
    (257, (257, 257), (515, 515)),          # past it: only the cells on the grid computed
    (300, (300, 7), (303, 27))])            # ... cut by the grid's edges
def test_large_gaussians_are_gluoncvs(radius, cell, grid):
    box, ids = square_box_of_radius(radius, *cell), np.zeros((1, 1))
    ours = targets.CenterNetTargetGenerator(1, *grid)(box, ids)[0][0]
    theirs = gcv_targets.CenterNetTargetGenerator(1, *grid)(box, ids)[0].asnumpy()[0]
    assert np.array_equal(ours, theirs)
    # what is drawn is gaussian_patch(radius) clipped to the grid
    (x, y), (width, height) = cell, grid
    top, bottom = min(y, radius), min(height - y, radius + 1)
    left, right = min(x, radius), min(width - x, radius + 1)
    clipped = targets.gaussian_patch(radius)[radius - top:radius + bottom,
                                             radius - left:radius + right]
    assert np.array_equal(ours[y - top:y + bottom, x - left:x + right], clipped)
    assert ours.sum(dtype=np.float64) == clipped.sum(dtype=np.float64)  # nothing elsewhere


# ---------------------------------------------------------------------------------------
# targets


def grid_boxes(rng, out_w, out_h, count, dtype):
    """Boxes on an output grid: random ones, repeats of a centre cell, edge ones."""
    x = np.sort(rng.uniform(0, out_w - 1, (count, 2)), axis=1)
    y = np.sort(rng.uniform(0, out_h - 1, (count, 2)), axis=1)
    boxes = np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1]], axis=1)
    if count > 3:
        boxes[1] = boxes[0] + rng.uniform(-0.3, 0.3)      # likely the same centre cell
        boxes[2] = boxes[0] * [1, 1, 1.01, 1.01]
        boxes[3] = [0, 0, out_w - 1, out_h - 1]
    if count > 5:
        boxes[4, 2] = boxes[4, 0]                         # no width
        boxes[5, 3] = boxes[5, 1] - 1                     # negative height
    if dtype == 'int64':
        boxes = np.round(boxes)
    return boxes.astype(dtype)


@pytest.mark.parametrize('dtype', ['float64', 'float32', 'int64'])
def test_targets_equal_gluoncvs_to_the_bit(dtype):
    rng = np.random.RandomState(7)
    for trial in range(60):
        num_class = rng.randint(1, 6)
        out_w, out_h = rng.randint(1, 48, 2)
        boxes = grid_boxes(rng, out_w, out_h, rng.randint(0, 12), dtype)
        ids = rng.randint(0, num_class, (len(boxes), 1)).astype(
            'float32' if trial % 2 else dtype)
        theirs = gcv_targets.CenterNetTargetGenerator(num_class, out_w, out_h)(boxes, ids)
        ours = targets.CenterNetTargetGenerator(num_class, out_w, out_h)(boxes, ids)
        assert len(ours) == 5
        for a, b in zip(ours, theirs):
            b = b.asnumpy()
            assert a.dtype == np.float32 and a.shape == b.shape and np.array_equal(a, b)


def test_the_last_box_of_a_cell_wins():
    boxes = np.array([[2., 2., 6., 6.], [2.2, 2.2, 5.2, 5.2], [1., 1., 4., 4.]])
    ids = np.array([[0], [1], [0]])
    ours = targets.CenterNetTargetGenerator(2, 10, 10)(boxes, ids)
    theirs = gcv_targets.CenterNetTargetGenerator(2, 10, 10)(boxes, ids)
    for a, b in zip(ours, theirs):
        assert np.array_equal(a, b.asnumpy())
    assert ours[1][:, 3, 3].tolist() == [3.0, 3.0]                  # the second box's size
    assert ours[0][0, 4, 4] == 1 and ours[0][1, 3, 3] == 1          # both classes drawn


def test_batch_targets_equal_per_sample_targets():
    rng = np.random.RandomState(8)
    generator = targets.CenterNetTargetGenerator(4, 24, 16)
    samples = [grid_boxes(rng, 24, 16, n, dtype) for n, dtype in
               [(5, 'float64'), (0, 'float64'), (9, 'float32'), (7, 'float64'), (1, 'int64')]]
    labels = [np.concatenate([b, rng.randint(0, 4, (len(b), 1)).astype(b.dtype)], axis=1)
              for b in samples]
    out = tuple(np.full(shape, 7, np.float32) for shape in generator.shapes(len(labels)))
    assert targets.center_net_targets(labels, out) is out   # zeroed first
    fresh = generator.batch(labels)
    by_ids = generator.batch([l[:, :4] for l in labels], ids=[l[:, 4:5] for l in labels])
    for index, label in enumerate(labels):
        single = generator(label[:, :4], label[:, 4:5])
        for k in range(5):
            assert np.array_equal(out[k][index], single[k])
            assert np.array_equal(fresh[k][index], single[k])
            assert np.array_equal(by_ids[k][index], single[k])


def test_target_errors_are_gluoncvs_kinds():
    ours = targets.CenterNetTargetGenerator(3, 8, 8)
    theirs = gcv_targets.CenterNetTargetGenerator(3, 8, 8)
    outside = np.array([[6., 1., 12., 3.]])                     # centre x = 9 >= 8
    for generator in (ours, theirs):
        with pytest.raises(AssertionError):
            generator(outside, np.array([[0]]))
        with pytest.raises(IndexError):
            generator(np.array([[1., 1., 3., 3.]]), np.array([[3]]))
        with pytest.raises(ValueError):
            generator(np.array([[1., 1., 3., 3.]]), np.array([[np.nan]]))
    with pytest.raises(targets.BoxOutsideGrid, match='8x8 output grid'):
        ours(outside, np.array([[0]]))
    with pytest.raises(targets.ClassOutOfRange, match=r'\[0, 3\)'):
        ours(np.array([[1., 1., 3., 3.]]), np.array([[-1]]))
    # boxes of no size are skipped whatever their class, as in gluoncv
    empty = np.array([[1., 1., 1., 3.]])
    for a, b in zip(ours(empty, np.array([[9]])), theirs(empty, np.array([[9]]))):
        assert np.array_equal(a, b.asnumpy()) and not a.any()
    with pytest.raises(ValueError, match='target arrays hold 4'):
        targets.center_net_targets([empty], ours.allocate(4))


# ---------------------------------------------------------------------------------------
# the train preset


SIZES = [(64, 64, 4), (96, 64, 4), (128, 128, 4.0), (80, 48, 2), (64, 64, 1), (96, 72, 3.5)]


@pytest.mark.parametrize('width,height,scale_factor', SIZES)
def test_train_preset_matches_gluoncv_sample_by_sample(width, height, scale_factor):
    rng = np.random.RandomState(int(width * height + scale_factor))
    theirs = gcv_center_net.CenterNetDefaultTrainTransform(width, height, 5, scale_factor)
    ours, our_rng = our_train_preset(width, height, 5, scale_factor)
    worst = 0.0
    for k in range(40):
        h, w = rng.randint(1, 300, 2) if k % 5 else rng.randint(1, 12, 2)
        image, label = random_image(rng, h, w), random_label(rng, w, h)
        expected, after = run_seeded(theirs, gluoncv_colour_rng(theirs), k,
                                     mx.nd.array(image, dtype='uint8'), label.copy())
        got, our_after = run_seeded(ours, our_rng, k,
                                    image if k % 2 else mx.nd.array(image, dtype='uint8'), label)
        assert_same_states(our_after, after)
        assert not isinstance(expected, Exception), expected
        assert len(got) == 6
        assert got[0].shape == (3, height, width) and got[0].flags.c_contiguous
        worst = max(worst, float(np.abs(got[0] - expected[0]).max()))
        for a, b in zip(got[1:], expected[1:]):
            assert a.dtype == np.float32 and np.array_equal(a, b)
    assert worst <= IMAGE_ATOL


def test_tall_outputs_fail_where_gluoncv_fails():
    """gluoncv clips xmax to height - 1: on a tall output a box can end up centred past the
    grid's right edge, and gluoncv's generator asserts; so does this one, with the same
    draws made."""
    theirs = gcv_center_net.CenterNetDefaultTrainTransform(32, 96, 3)
    ours, our_rng = our_train_preset(32, 96, 3)
    image = random_image(np.random.RandomState(9), 60, 60)
    label = np.array([[50., 10., 59., 50., 1.]])
    failed = 0
    for seed in range(12):
        expected, after = run_seeded(theirs, gluoncv_colour_rng(theirs), seed,
                                     mx.nd.array(image, dtype='uint8'), label)
        got, our_after = run_seeded(ours, our_rng, seed, image, label)
        assert_same_states(our_after, after)
        assert isinstance(got, Exception) == isinstance(expected, Exception)
        if isinstance(expected, Exception):
            assert isinstance(expected, AssertionError)
            assert isinstance(got, targets.BoxOutsideGrid) and isinstance(got, AssertionError)
            failed += 1
    assert failed


class Recorder:
    """Records what gluoncv hands a function (copies), then calls it."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, *args, **kwargs):
        result = self.fn(*args, **kwargs)
        self.calls.append([np.array(a, copy=True) for a in args if isinstance(a, np.ndarray)]
                          + ([np.array(result, copy=True)] if isinstance(result, np.ndarray)
                             else []))
        return result


def test_targets_false_returns_what_the_generator_gets(monkeypatch):
    recorder = Recorder(gcv_targets.CenterNetTargetGenerator.forward)
    monkeypatch.setattr(gcv_targets.CenterNetTargetGenerator, 'forward',
                        lambda self, *args: recorder(self, *args))
    rng = np.random.RandomState(10)
    theirs = gcv_center_net.CenterNetDefaultTrainTransform(96, 64, 5)
    ours, our_rng = our_train_preset(96, 64, 5, targets=False)
    full, full_rng = our_train_preset(96, 64, 5)
    for k in range(20):
        image, label = random_image(rng, 120, 150), random_label(rng, 150, 120)
        _, after = run_seeded(theirs, gluoncv_colour_rng(theirs), k,
                              mx.nd.array(image, dtype='uint8'), label)
        (got_image, boxes), our_after = run_seeded(ours, our_rng, k, image, label)
        assert_same_states(our_after, after)
        gt_boxes, gt_ids = recorder.calls[-1][:2]
        assert boxes.dtype == label.dtype == gt_boxes.dtype
        assert np.array_equal(boxes[:, :4], gt_boxes) and np.array_equal(boxes[:, 4:5], gt_ids)
        with_targets, _ = run_seeded(full, full_rng, k, image, label)
        assert np.array_equal(with_targets[0], got_image)
        single = targets.CenterNetTargetGenerator(5, 24, 16)(boxes[:, :4], boxes[:, 4:5])
        for a, b in zip(single, with_targets[1:]):
            assert np.array_equal(a, b)


def test_normalize_false_returns_the_jittered_image(monkeypatch):
    recorder = Recorder(gcv_experimental.image.np_random_color_distort)
    monkeypatch.setattr(gcv_experimental.image, 'np_random_color_distort', recorder)
    rng = np.random.RandomState(11)
    theirs = gcv_center_net.CenterNetDefaultTrainTransform(80, 64, 5)
    ours, our_rng = our_train_preset(80, 64, 5, normalize=False)
    full, full_rng = our_train_preset(80, 64, 5)
    mean, std = np.float32([0.485, 0.456, 0.406]), np.float32([0.229, 0.224, 0.225])
    for k in range(15):
        image, label = random_image(rng, 100, 90), random_label(rng, 90, 100)
        run_seeded(theirs, gluoncv_colour_rng(theirs), k, mx.nd.array(image, dtype='uint8'),
                   label)
        jittered = recorder.calls[-1][-1]
        got, _ = run_seeded(ours, our_rng, k, image, label)
        assert got[0].shape == (64, 80, 3) and got[0].dtype == np.float32
        # gluoncv's jittered image is in [0, 1] (before normalize); ours in the pixel range
        assert np.abs(got[0] / 255 - jittered).max() <= 1e-6
        normalized, _ = run_seeded(full, full_rng, k, image, label)
        tensor = mx.nd.image.to_tensor(mx.nd.array(got[0]))
        np.testing.assert_allclose(mx.nd.image.normalize(tensor, tuple(mean.tolist()),
                                                         tuple(std.tolist())).asnumpy(),
                                   normalized[0], rtol=0, atol=1e-5)
        for a, b in zip(got[1:], normalized[1:]):
            assert np.array_equal(a, b)


def test_inputs_are_not_modified():
    rng = np.random.RandomState(12)
    image, label = random_image(rng, 50, 70), random_label(rng, 70, 50, count=4)
    before = image.copy(), label.copy()
    center_net.CenterNetDefaultTrainTransform(64, 64, 5)(image, label)
    center_net.CenterNetDefaultValTransform(64, 64)(image, label)
    assert np.array_equal(image, before[0]) and np.array_equal(label, before[1])


def draw(preset, shape):
    """The preset's draws on the global generators (no label decides them)."""
    return preset.draw(shape, np.zeros((0, 5)), global_generators())


def apply(preset, image, label, params):
    """``params`` applied to ``(image, label)`` (nothing is drawn)."""
    return preset.apply((image, label), params, global_generators())


def test_each_instance_starts_at_seed_123():
    shape = (40, 50, 3)
    a, b = (center_net.CenterNetDefaultTrainTransform(32, 32, 2) for _ in range(2))
    np.random.seed(0), random.seed(0)
    first = draw(a, shape)
    np.random.seed(0), random.seed(0)
    assert draw(b, shape) == first
    assert draw(b, shape) != first                       # the instance's state moves on
    np.random.seed(0), random.seed(0)
    c = center_net.CenterNetDefaultTrainTransform(32, 32, 2,
                                                  data_rng=np.random.RandomState(123))
    assert draw(c, shape) == first
    d = center_net.CenterNetDefaultTrainTransform(32, 32, 2, data_rng=np.random.RandomState(1))
    np.random.seed(0), random.seed(0)
    assert draw(d, shape).jitter != first.jitter


def test_a_pickled_preset_carries_its_generator_state():
    ours = center_net.CenterNetDefaultTrainTransform(32, 32, 2)
    draw(ours, (40, 50))
    copy = pickle.loads(pickle.dumps(ours))
    np.random.seed(1), random.seed(1)
    expected = draw(ours, (40, 50))
    np.random.seed(1), random.seed(1)
    assert draw(copy, (40, 50)) == expected


def test_draw_then_apply_is_a_call():
    rng = np.random.RandomState(13)
    ours = center_net.CenterNetDefaultTrainTransform(64, 48, 5)
    replay = center_net.CenterNetDefaultTrainTransform(64, 48, 5)
    for k in range(5):
        image, label = random_image(rng, 70, 90), random_label(rng, 90, 70)
        np.random.seed(k), random.seed(k)
        out = ours(image, label)
        np.random.seed(k), random.seed(k)
        again = apply(replay, image, label, draw(replay, image.shape))
        for a, b in zip(out, again):
            assert np.array_equal(a, b)


def test_threads_share_no_pixels():
    """Worker threads (``thread_pool=True`` loaders) each warp into their own buffers."""
    rng = np.random.RandomState(14)
    ours = center_net.CenterNetDefaultTrainTransform(96, 96, 5)
    jobs = []
    for k in range(16):
        image, label = random_image(rng, 80 + k, 100), random_label(rng, 100, 80 + k)
        jobs.append((image, label, draw(ours, image.shape)))
    expected = [apply(ours, *job) for job in jobs]
    results = [None] * len(jobs)

    def work(indices):
        for _ in range(5):
            for i in indices:
                results[i] = apply(ours, *jobs[i])

    threads = [threading.Thread(target=work, args=(range(j, len(jobs), 2),)) for j in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        for a, b in zip(got, want):
            assert np.array_equal(a, b)


def poison_scratch(names, value):
    """Fill this thread's kept buffers ``names`` (4 MB each) with the byte ``value``."""
    for name in names:
        with scratch.empty(name, (4 << 20,), np.uint8) as buf:
            buf.fill(value)


def test_kept_buffers_never_leak_into_results():
    """Whatever this thread's kept buffers hold (0xFF bytes are NaN in float32), samples
    come out the same, and a result is never a buffer the next sample overwrites."""
    rng = np.random.RandomState(15)
    names = ('center_net.warped', 'center_net.values', 'affine_chw')
    samples = [(random_image(rng, 70, 90), random_label(rng, 90, 70)) for _ in range(2)]
    val = center_net.CenterNetDefaultValTransform(64, 48)
    for normalize in (True, False):
        ours = center_net.CenterNetDefaultTrainTransform(64, 48, 5, normalize=normalize)
        params = [draw(ours, image.shape) for image, _ in samples]
        want = [apply(ours, *sample, p) for sample, p in zip(samples, params)]
        want_val = [val(*sample) for sample in samples]
        for value in (0xFF, 0x00, 0x7F):
            poison_scratch(names, value)
            first = apply(ours, *samples[0], params[0])
            poison_scratch(names, value)
            second = apply(ours, *samples[1], params[1])
            for got, expected in ((first, want[0]), (second, want[1])):
                for a, b in zip(got, expected):
                    assert np.array_equal(a, b)
            poison_scratch(names, value)
            first_val = val(*samples[0])
            second_val = val(*samples[1])
            for got, expected in ((first_val, want_val[0]), (second_val, want_val[1])):
                for a, b in zip(got, expected):
                    assert np.array_equal(a, b)


def test_bad_inputs_are_refused():
    ours = center_net.CenterNetDefaultTrainTransform(32, 32, 2)
    with pytest.raises(TypeError, match='real numbers'):
        ours(np.zeros((8, 8, 3), bool), np.zeros((0, 5)))
    with pytest.raises(ValueError, match='5 or more'):
        ours(np.zeros((8, 8, 3), np.uint8), np.zeros((1, 4)))
    with pytest.raises(TypeError, match='num_class'):
        center_net.CenterNetDefaultTrainTransform(32, 32, 2.0)
    with pytest.raises(ValueError, match='scale_factor'):
        center_net.CenterNetDefaultTrainTransform(32, 32, 2, scale_factor=0)
    with pytest.raises(ValueError, match='at least 1x1'):
        center_net.CenterNetDefaultTrainTransform(32, 16, 2, scale_factor=17)
    with pytest.raises(TypeError, match='scale_factor'):
        center_net.CenterNetDefaultTrainTransform(32, 32, 2, scale_factor='4')


# ---------------------------------------------------------------------------------------
# the validation preset


@pytest.mark.parametrize('width,height', [(64, 64), (96, 64), (48, 80)])
def test_val_preset_is_gluoncvs_to_the_bit(width, height):
    rng = np.random.RandomState(width + height)
    theirs = gcv_center_net.CenterNetDefaultValTransform(width, height)
    ours = center_net.CenterNetDefaultValTransform(width, height, mean=(0.5, 0.4, 0.3),
                                                   std=(0.2, 0.3, 0.25))
    theirs_custom = gcv_center_net.CenterNetDefaultValTransform(
        width, height, mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.25))
    default = center_net.CenterNetDefaultValTransform(width, height)
    for k in range(20):
        h, w = rng.randint(1, 200, 2)
        image, label = random_image(rng, h, w), random_label(rng, w, h)
        if k % 3 == 0:
            label = label[:, :4]
        for mine, gluon in ((ours, theirs_custom), (default, theirs)):
            got = mine(image, label)
            expected = [as_numpy(v) for v in gluon(mx.nd.array(image, dtype='uint8'),
                                                   label.copy())]
            for a, b in zip(got, expected):
                assert a.dtype == b.dtype == np.float32 and np.array_equal(a, b)


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 2000), st.integers(1, 2000), st.integers(1, 300), st.integers(1, 300))
def test_post_transform_is_gluoncvs(orig_w, orig_h, out_w, out_h):
    ours = center_net.get_post_transform(orig_w, orig_h, out_w, out_h)
    theirs = gcv_center_net.get_post_transform(orig_w, orig_h, out_w, out_h)
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


@settings(max_examples=examples(30), deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(0, 2 ** 31 - 1))
def test_the_grey_mean_is_the_mean_of_opencvs_grey_image(height, width, seed):
    import cv2

    image = np.random.RandomState(seed).randint(0, 256, (height, width, 3)).astype(np.uint8)
    values = image.astype(np.float32) / 255
    for pixels_in in (image, values):
        grey = cv2.cvtColor(np.float32(pixels_in), cv2.COLOR_BGR2GRAY)  # float32 per pixel
        want = grey.astype(np.float64).mean()
        assert abs(jitter.gray_mean(pixels_in) - want) <= 1e-6 * max(want, 1e-3)
    # uint8 values are exact in float32: the same mean either way
    assert jitter.gray_mean(image) == jitter.gray_mean(image.astype(np.float32))
    # a uint8 image's channels are summed exactly, as OpenCV sums them: the same bits,
    # contiguous (compiled) or not
    sums = [cv2.sumElems(plane)[0] for plane in cv2.split(image)]
    opencvs = float(np.dot(jitter.GRAY_WEIGHTS.astype(np.float64), sums)) / (height * width)
    assert jitter.gray_mean(image) == jitter.gray_mean(image[::-1, ::-1]) == opencvs


def test_the_grey_mean_of_a_large_uint8_image_is_exact():
    """Sums past what 16 bits or a float32 hold, in every channel."""
    image = np.empty((1001, 999, 3), np.uint8)
    image[...] = (255, 254, 1)
    image[500, 17] = (0, 3, 200)
    sums = np.array([255 * 1001 * 999 - 255, 254 * 1001 * 999 - 251, 1001 * 999 + 199])
    want = float(np.dot(jitter.GRAY_WEIGHTS.astype(np.float64), sums)) / (1001 * 999)
    assert jitter.gray_mean(image) == want
