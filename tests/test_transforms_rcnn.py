"""gluonbatch's R-CNN presets and RPN targets against gluoncv 0.10.5's, seeded.

gluoncv's presets are the reference, run side by side on the same seeds: images, boxes,
RPN targets and masks must be equal bit for bit, and Python's and numpy's generators must be
in the same state after every sample (the RPN sampling's ``np.random.choice`` included).
The networks are gluoncv's model-zoo R-CNNs built without weights; only their anchor
generators are initialized (all the presets read, with the ``features`` graph).
"""
import copy
import pickle
import random
import warnings

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data.transforms.image import resize_short_within
from hypothesis import given, settings
from hypothesis import strategies as st
from gluoncv.data.transforms.presets import rcnn as gcv
from gluoncv.model_zoo.rcnn.rpn import rpn_target as gcv_rpn_target
from gluoncv.nn import coder as gcv_coder

from gluonbatch.transforms import polygons
from gluonbatch.transforms.presets import Generators, rcnn
from gluonbatch.targets import rpn
from gluonbatch.targets.iou import box_iou
from gluonbatch.targets.rpn_anchors import AnchorLayout, RPNAnchors

from helpers import examples

NETS = {'c4': ('faster_rcnn_resnet50_v1b_voc', False),
        'fpn': ('faster_rcnn_fpn_resnet50_v1b_coco', True),
        'mask': ('mask_rcnn_resnet18_v1b_coco', False),
        'mask_fpn': ('mask_rcnn_fpn_resnet18_v1b_coco', True)}


@pytest.fixture(scope='module')
def nets(zoo_net):
    return {key: zoo_net(name, anchors_only=True) for key, (name, _) in NETS.items()}


def quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return fn(*args, **kwargs)


def rng_states():
    return random.getstate(), np.random.get_state()


def assert_same_states(ours, theirs, where):
    assert ours[0] == theirs[0], 'Python random state differs %s' % where
    a, b = ours[1], theirs[1]
    assert a[0] == b[0] and np.array_equal(a[1], b[1]) and a[2:] == b[2:], \
        'numpy random state differs %s' % where


def assert_bits(ours, theirs, where, dtype=None):
    """Same shape and values bit for bit (values compared as float32 bits)."""
    theirs = theirs.asnumpy() if isinstance(theirs, mx.nd.NDArray) else np.asarray(theirs)
    assert isinstance(ours, np.ndarray), where
    assert ours.shape == theirs.shape, '%s: shape %s != %s' % (where, ours.shape, theirs.shape)
    assert ours.dtype == (dtype or np.float32), where
    theirs = theirs.astype(ours.dtype)
    assert np.array_equal(ours, theirs, equal_nan=True), \
        '%s: %d values differ' % (where, int((ours != theirs).sum()))
    assert np.array_equal(np.signbit(ours), np.signbit(theirs)), where + ': signs of zeros'


def random_label(rng, height, width, count=None, kind='normal'):
    """(N, 5) float64 boxes: mostly ordinary, some tiny, degenerate or crossing the border."""
    count = int(rng.integers(1, 8)) if count is None else count
    low = rng.uniform(-0.1, 0.9, (count, 2)) * (width, height)
    size = rng.uniform(0.02, 0.7, (count, 2)) * (width, height)
    if kind == 'degenerate':
        size[0] = 0
        size[-1] = rng.uniform(0, 2, 2)
    boxes = np.concatenate([low, low + size], axis=1)
    if kind == 'integer':
        boxes = np.round(boxes)
    classes = rng.integers(0, 20, (count, 1))
    return np.concatenate([boxes, classes], axis=1)


def random_image(rng, low=60, high=420):
    height, width = (int(v) for v in rng.integers(low, high, 2))
    return rng.integers(0, 256, (height, width, 3), dtype=np.uint8)


def random_segm(rng, label, dtype):
    """Per box one or two polygons inside it."""
    segm = []
    for x0, y0, x1, y1 in label[:, :4]:
        polys = []
        for _ in range(int(rng.integers(1, 3))):
            points = int(rng.integers(3, 7))
            xs = rng.uniform(x0, max(x1, x0 + 1), points)
            ys = rng.uniform(y0, max(y1, y0 + 1), points)
            polys.append(np.stack([xs, ys], axis=1).astype(dtype))
        segm.append(polys)
    return segm


def compare_outputs(ours, theirs, where):
    assert type(ours) is tuple and len(ours) == len(theirs), where
    for index, (mine, ref) in enumerate(zip(ours, theirs)):
        if isinstance(ref, list):  # per-level RPN targets
            assert isinstance(mine, list) and len(mine) == len(ref), where
            for level, (a, b) in enumerate(zip(mine, ref)):
                assert_bits(a, b, '%s output %d level %d' % (where, index, level))
                assert a.flags.c_contiguous
        else:
            assert_bits(mine, ref, '%s output %d' % (where, index))
            assert mine.flags.c_contiguous


# --- gluoncv takes its Python paths, the ones reproduced here --------------------------------

def test_gluoncv_uses_its_python_paths():
    assert gcv_rpn_target.cython_rpn_target is None
    assert gcv_coder.cython_bbox is None


# --- box_iou ---------------------------------------------------------------------------------

def _iou_case(rng, kind):
    n, m = int(rng.integers(1, 400)), int(rng.integers(1, 12))
    anchors = rng.uniform(-50, 600, (n, 4))
    anchors[:, 2:] = anchors[:, :2] + rng.uniform(0.5, 300, (n, 2))
    boxes = rng.uniform(-20, 600, (m, 4))
    boxes[:, 2:] = boxes[:, :2] + rng.uniform(-5, 300, (m, 2))
    if kind == 'integer':
        anchors, boxes = np.round(anchors * 2) / 2, np.round(boxes)
    elif kind == 'touching':
        boxes[:, :2] = anchors[rng.integers(0, n, m), 2:]
        boxes[:, 2:] = boxes[:, :2] + 10
    elif kind == 'odd':
        boxes[0] = [np.nan, 1, 5, 5]
        boxes[-1] = [0, 0, np.inf, 40]
        anchors[0] = [5, 5, 5, 9]         # zero-area anchor
        anchors[-1] = [9, 9, 3, 3]        # negative-size anchor
        if m > 2:
            boxes[1] = [-3e38, 0, 3e38, 3e38]
    return anchors.astype(np.float32), boxes.astype(np.float32)


@pytest.mark.parametrize('kind', ['float', 'integer', 'touching', 'odd'])
def test_box_iou_is_mxnets_bit_for_bit(kind):
    rng = np.random.default_rng(['float', 'integer', 'touching', 'odd'].index(kind))
    for case in range(60):
        anchors, boxes = _iou_case(rng, kind)
        theirs = mx.nd.contrib.box_iou(mx.nd.array(anchors), mx.nd.array(boxes),
                                       format='corner').asnumpy()
        with np.errstate(all='ignore'):
            ours = box_iou(anchors, boxes)
        assert_bits(ours, theirs, '%s case %d' % (kind, case))


def test_box_iou_in_float64_would_not_do():
    """The reason for float32: a float64 IoU differs in a good share of entries."""
    rng = np.random.default_rng(5)
    anchors, boxes = _iou_case(rng, 'float')
    ours = box_iou(anchors, boxes)
    a, b = anchors.astype(np.float64), boxes.astype(np.float64)
    width = np.clip(np.minimum(a[:, None, 2], b[:, 2]) - np.maximum(a[:, None, 0], b[:, 0]), 0,
                    None)
    height = np.clip(np.minimum(a[:, None, 3], b[:, 3]) - np.maximum(a[:, None, 1], b[:, 1]), 0,
                     None)
    inter = width * height
    area = lambda x: (x[..., 2] - x[..., 0]) * (x[..., 3] - x[..., 1])  # noqa: E731
    wide = (inter / (area(a)[:, None] + area(b) - inter)).astype(np.float32)
    assert (wide != ours).any()


# --- RPN targets against gluoncv's RPNTargetGenerator ---------------------------------------

def _gcv_generator(**kwargs):
    return gcv_rpn_target.RPNTargetGenerator(**kwargs)


@pytest.mark.parametrize('key', ['c4', 'fpn'])
def test_rpn_targets_match_gluoncv(nets, key):
    name, multi_stage = NETS[key]
    anchors = RPNAnchors(nets[key], ashape=128, multi_stage=multi_stage)
    settings = [{}, dict(num_sample=64, pos_ratio=0.25, stds=(0.1, 0.1, 0.2, 0.2)),
                dict(pos_iou_thresh=0.5, neg_iou_thresh=0.4, num_sample=512)]
    rng = np.random.default_rng(11)
    for case in range(90):
        setting = settings[case % len(settings)]
        ours, theirs = rpn.RPNTargetGenerator(**setting), _gcv_generator(**setting)
        height, width = (int(v) for v in rng.integers(8, 520, 2))
        if case % 15 == 0:
            height, width = (int(v) for v in rng.integers(8, 40, 2))  # (nearly) all outside
        kind = ['normal', 'integer', 'degenerate'][case % 3]
        boxes = random_label(rng, height, width, count=int(rng.integers(1, 25)),
                             kind=kind)[:, :4]
        layout = anchors.layout(height, width)
        seed = int(rng.integers(0, 2 ** 31))
        np.random.seed(seed)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            expected = theirs(mx.nd.array(boxes), mx.nd.array(layout.anchors()), width, height)
        after_theirs = np.random.get_state()
        np.random.seed(seed)
        got = ours(boxes, layout)
        assert_same_states((None, np.random.get_state()), (None, after_theirs),
                           'case %d' % case)
        for name, mine, ref in zip(('cls', 'box', 'mask'), got, expected):
            assert_bits(mine, ref, 'case %d %s' % (case, name))


def test_rpn_targets_ties_and_thresholds_in_float32():
    """Hand-made anchors where float32 decides: an IoU of exactly float32(0.7) (positive by
    the threshold, compared in float32), a box's best anchor and one IoU 1 ulp below it
    (positive through the sampler's epsilon), an anchor tied between two boxes (matched to
    the first)."""
    anchors = np.array([[0, 0, 10, 10],          # 0: IoU 0.7 with boxes 0 and 1
                        [0, 0, 10, 7.5],         # 1: box 0's best
                        [0, 2.5, 10, 10],        # 2: box 1's best
                        [50, 0, 58, 16],         # 3: box 2's best, IoU 0.5
                        [50, 0, 58, 16 + 2 ** -19],   # 4: IoU 0.5 - 2**-24
                        [80, 80, 90, 90]], np.float32)  # 5: negative
    boxes = np.array([[0, 0, 10, 7], [0, 3, 10, 10], [50, 0, 58, 8]], np.float32)
    ious = box_iou(anchors, boxes)
    assert ious[0, 0] == ious[0, 1] == np.float32(0.7)
    assert ious[3, 2] == 0.5 and ious[4, 2] == np.float32(0.5 - 2 ** -24)
    layout = AnchorLayout((100, 100), [anchors.reshape(1, -1, 4)])
    expected = _gcv_generator()(mx.nd.array(boxes), mx.nd.array(anchors), 100, 100)
    got = rpn.RPNTargetGenerator()(boxes, layout)
    for name, mine, ref in zip(('cls', 'box', 'mask'), got, expected):
        assert_bits(mine, ref, name)
    assert got[0].tolist() == [1, 1, 1, 1, 1, 0]
    assert got[1][0, 1] < 0   # anchor 0 encodes box 0 (centre above its own), not box 1 (below)


def test_rpn_targets_with_non_finite_boxes_match_gluoncv(nets):
    anchors = RPNAnchors(nets['c4'])
    layout = anchors.layout(200, 300)
    boxes = np.array([[10, 10, 120, 90], [np.nan, 5, 50, 60], [20, 30, np.inf, 150],
                      [40, 40, 40, 40]], np.float32)
    np.random.seed(3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        expected = _gcv_generator()(mx.nd.array(boxes), mx.nd.array(layout.anchors()), 300, 200)
    state = np.random.get_state()
    np.random.seed(3)
    with np.errstate(all='ignore'):
        got = rpn.RPNTargetGenerator()(boxes, layout)
    assert np.array_equal(np.random.get_state()[1], state[1])
    for name, mine, ref in zip(('cls', 'box', 'mask'), got, expected):
        assert_bits(mine, ref, name)


def test_rpn_targets_draw_from_an_injected_generator(nets):
    layout = RPNAnchors(nets['c4']).layout(300, 400)
    boxes = np.array([[10, 10, 380, 290], [50, 60, 90, 110]], np.float32)
    before = np.random.get_state()
    first = rpn.RPNTargetGenerator()(boxes, layout, np.random.RandomState(4))
    second = rpn.RPNTargetGenerator()(boxes, layout, np.random.RandomState(4))
    assert np.array_equal(np.random.get_state()[1], before[1])
    for a, b in zip(first, second):
        assert np.array_equal(a, b)
    assert (first[0] == 1).sum() <= 128 and (first[0] >= 0).sum() <= 256


def test_rpn_targets_need_a_box(nets):
    layout = RPNAnchors(nets['c4']).layout(100, 100)
    with pytest.raises(ValueError, match='at least one ground-truth box'):
        rpn.RPNTargetGenerator()(np.zeros((0, 4), np.float32), layout)
    with pytest.raises(ValueError, match=r'shape \(M, 4\)'):
        rpn.RPNTargetGenerator()(np.zeros((2, 5), np.float32), layout)
    with pytest.raises(ValueError, match='4 values'):
        rpn.RPNTargetGenerator(stds=(1, 1))


def test_anchor_layouts_are_cached_and_cut_like_gluoncv(nets):
    anchors = RPNAnchors(nets['fpn'], ashape=32, multi_stage=True)
    layout = anchors.layout(300, 200)
    anchors.cache_bytes = layout.nbytes + 1              # room for this layout alone
    assert anchors.layout(300, 200) is layout
    # feature maps of 75x50, 38x25, 19x13, 10x7, 5x4 cut by grids of 32, 16, 16, 16, 16
    assert layout.levels == ((32, 32, 3), (16, 16, 3), (16, 13, 3), (10, 7, 3), (5, 4, 3))
    assert layout.num_anchors == sum(h * w * a for h, w, a in layout.levels)
    small = anchors.layout(100, 100)
    assert anchors.layout(100, 100) is small
    assert anchors.layout(300, 200) is not layout        # evicted by the small one
    full = layout.anchors()
    picked = np.random.default_rng(0).integers(0, layout.num_anchors, 50)
    assert np.array_equal(layout.anchors(picked), full[picked])
    inside = ((full[:, 0] >= 0) & (full[:, 1] >= 0) & (full[:, 2] < 200) & (full[:, 3] < 300))
    assert np.array_equal(layout.inside, np.flatnonzero(inside))
    restored = pickle.loads(pickle.dumps(anchors))
    assert restored.layout(300, 200).levels == layout.levels


def test_anchors_leave_the_network_alone(nets):
    net = nets['c4']
    params = net.rpn.anchor_generator.collect_params()
    before = {name: (p.list_ctx(), p.data().asnumpy().copy()) for name, p in params.items()}
    RPNAnchors(net)
    for name, p in params.items():
        assert p.list_ctx() == before[name][0]
        assert np.array_equal(p.data().asnumpy(), before[name][1])


# --- Faster R-CNN train preset ----------------------------------------------------------------

FASTER_SETTINGS = [
    dict(short=(120, 300), max_size=400),
    dict(short=200, max_size=260, flip_p=1.0, box_norm=(0.1, 0.1, 0.2, 0.2)),
    dict(short=(100, 250), max_size=500, flip_p=0.0, num_sample=128, pos_ratio=0.25),
    dict(short=(150, 220), max_size=300, pos_iou_thresh=0.6, neg_iou_thresh=0.35,
         mean=(0.5, 0.4, 0.3), std=(0.2, 0.3, 0.25)),
]


def run_both(ours, theirs, samples, seed, call):
    """Each sample through both presets from the same seeds; states compared after each."""
    random.seed(seed)
    np.random.seed(seed)
    ours_out, theirs_out, theirs_states = [], [], []
    for sample in samples:
        theirs_out.append(quiet(call, theirs, sample, True))
        theirs_states.append(rng_states())
    random.seed(seed)
    np.random.seed(seed)
    for index, sample in enumerate(samples):
        ours_out.append(call(ours, sample, False))
        assert_same_states(rng_states(), theirs_states[index],
                           'after sample %d (seed %d)' % (index, seed))
    return ours_out, theirs_out


def faster_call(transform, sample, reference):
    image, label = sample
    return transform(mx.nd.array(image, dtype='uint8') if reference else image, label)


@pytest.mark.parametrize('key', ['c4', 'fpn', None])
@pytest.mark.parametrize('setting', range(len(FASTER_SETTINGS)))
def test_faster_train_matches_gluoncv(nets, key, setting):
    kwargs = dict(FASTER_SETTINGS[setting])
    if key is not None:
        kwargs.update(net=nets[key], multi_stage=NETS[key][1])
    if key == 'fpn' and setting == 1:
        kwargs['ashape'] = 32      # feature maps larger than the anchor grid: cut
    ours = rcnn.FasterRCNNDefaultTrainTransform(**kwargs)
    theirs = quiet(gcv.FasterRCNNDefaultTrainTransform, **kwargs)
    rng = np.random.default_rng(100 + setting)
    for seed in range(12 if key else 25):
        samples = []
        for index in range(3):
            image = random_image(rng)
            kind = ['normal', 'integer', 'degenerate'][(seed + index) % 3]
            samples.append((image, random_label(rng, *image.shape[:2], kind=kind)))
        inputs = copy.deepcopy(samples)
        got, expected = run_both(ours, theirs, samples, seed, faster_call)
        for index, (mine, ref) in enumerate(zip(got, expected)):
            compare_outputs(mine, ref, 'seed %d sample %d' % (seed, index))
        for (image, label), (image0, label0) in zip(samples, inputs):
            assert np.array_equal(image, image0) and np.array_equal(label, label0)


def test_faster_train_float32_labels_and_extra_columns(nets):
    kwargs = dict(short=(150, 250), max_size=350, net=nets['c4'])
    ours = rcnn.FasterRCNNDefaultTrainTransform(**kwargs)
    theirs = quiet(gcv.FasterRCNNDefaultTrainTransform, **kwargs)
    rng = np.random.default_rng(7)
    for seed in range(10):
        image = random_image(rng)
        label = random_label(rng, *image.shape[:2])
        label = np.concatenate([label, rng.uniform(0, 1, (len(label), 2))], 1).astype('float32')
        got, expected = run_both(ours, theirs, [(image, label)], seed, faster_call)
        compare_outputs(got[0], expected[0], 'seed %d' % seed)
        assert got[0][1].shape[1] == 7


def test_normalize_false_returns_the_resized_flipped_uint8_image(nets):
    ours = rcnn.FasterRCNNDefaultTrainTransform(short=(100, 200), max_size=300,
                                                net=nets['c4'], normalize=False)
    normalized = rcnn.FasterRCNNDefaultTrainTransform(short=(100, 200), max_size=300,
                                                      net=nets['c4'])
    rng = np.random.default_rng(3)
    for seed in range(10):
        image = random_image(rng)
        label = random_label(rng, *image.shape[:2])
        random.seed(seed)
        np.random.seed(seed)
        raw = ours(image, label)
        state = rng_states()
        random.seed(seed)
        np.random.seed(seed)
        full = normalized(image, label)
        assert_same_states(rng_states(), state, 'seed %d' % seed)
        img = raw[0]
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        assert img.flags.c_contiguous
        tensor = mx.nd.image.normalize(mx.nd.image.to_tensor(mx.nd.array(img, dtype='uint8')),
                                       mean=rcnn.MEAN, std=rcnn.STD).asnumpy()
        assert_bits(full[0], tensor, 'seed %d' % seed)
        for mine, ref in zip(raw[1:], full[1:]):
            if isinstance(ref, list):
                assert all(np.array_equal(a, b) for a, b in zip(mine, ref))
            else:
                assert np.array_equal(mine, ref)


def test_draw_then_apply_is_call(nets):
    transform = rcnn.FasterRCNNDefaultTrainTransform(short=(100, 200), max_size=300,
                                                     net=nets['fpn'], multi_stage=True)
    image = random_image(np.random.default_rng(1))
    label = random_label(np.random.default_rng(2), *image.shape[:2])
    params = transform.draw(image.shape, label, Generators.seeded(5))
    assert isinstance(params, rcnn.RCNNDraw)
    assert params == transform.draw(image.shape, label, Generators.seeded(5))
    first = transform.apply((image, label), params, Generators.seeded(9))
    second = transform.apply((image, label), params, Generators.seeded(9))
    compare_outputs(first, second, 'apply twice')
    assert first[0].shape == (3, params.height, params.width)


def test_pickled_transform_gives_the_same_samples(nets):
    transform = rcnn.FasterRCNNDefaultTrainTransform(short=(100, 200), max_size=300,
                                                     net=nets['fpn'], multi_stage=True)
    image = random_image(np.random.default_rng(4))
    label = random_label(np.random.default_rng(5), *image.shape[:2])
    transform(image, label)                     # a cached layout is not pickled
    restored = pickle.loads(pickle.dumps(transform))
    random.seed(1)
    np.random.seed(1)
    first = transform(image, label)
    random.seed(1)
    np.random.seed(1)
    second = restored(image, label)
    compare_outputs(first, second, 'pickled')


def test_empty_label_with_a_network_fails_after_the_same_draws(nets):
    kwargs = dict(short=(100, 200), max_size=300, net=nets['c4'])
    ours = rcnn.FasterRCNNDefaultTrainTransform(**kwargs)
    theirs = quiet(gcv.FasterRCNNDefaultTrainTransform, **kwargs)
    image = random_image(np.random.default_rng(0))
    empty = np.zeros((0, 5))
    random.seed(2)
    np.random.seed(2)
    with pytest.raises(mx.base.MXNetError):
        quiet(theirs, mx.nd.array(image, dtype='uint8'), empty)
    state = rng_states()
    random.seed(2)
    np.random.seed(2)
    with pytest.raises(ValueError, match='at least one ground-truth box'):
        ours(image, empty)
    assert_same_states(rng_states(), state, 'after the failure')
    # without a network an empty label is fine, as in gluoncv
    no_net = rcnn.FasterRCNNDefaultTrainTransform(short=100, max_size=300)
    img, boxes = no_net(image, empty)
    assert boxes.shape == (0, 5) and boxes.dtype == np.float32


def test_an_image_that_resizes_to_nothing_fails():
    transform = rcnn.FasterRCNNDefaultTrainTransform(short=10, max_size=20)
    with pytest.raises(ValueError, match='nothing is left'):
        transform(np.zeros((1, 60, 3), np.uint8), np.zeros((0, 5)))
    with pytest.raises(ValueError, match='nothing is left'):
        rcnn.FasterRCNNDefaultValTransform(short=10, max_size=20)(
            np.zeros((1, 60, 3), np.uint8), np.zeros((0, 5)))


@pytest.mark.parametrize('kwargs, error', [
    (dict(short='600'), TypeError), (dict(short=(600,)), TypeError),
    (dict(short=(300, 200)), ValueError), (dict(short=0), ValueError),
    (dict(max_size=None), TypeError), (dict(flip_p=1.5), ValueError),
    (dict(mean=(0.1, 0.2)), ValueError), (dict(std='x'), TypeError)])
def test_bad_arguments(kwargs, error):
    with pytest.raises(error):
        rcnn.FasterRCNNDefaultTrainTransform(**kwargs)


def test_unknown_keywords_fail_with_a_network_only(nets):
    rcnn.FasterRCNNDefaultTrainTransform(allowed_border=5, net=nets['c4'])
    rcnn.FasterRCNNDefaultTrainTransform(bogus=1)       # unused without a network, as gluoncv
    with pytest.raises(TypeError, match='bogus'):
        rcnn.FasterRCNNDefaultTrainTransform(bogus=1, net=nets['c4'])


def test_bad_inputs():
    transform = rcnn.FasterRCNNDefaultTrainTransform(short=50, max_size=100)
    with pytest.raises(TypeError):
        transform(np.zeros((10, 10, 3), bool), np.zeros((0, 5)))
    with pytest.raises(ValueError):
        transform(np.zeros((10, 10, 3), np.uint8), np.zeros((1, 3)))


# --- validation presets -----------------------------------------------------------------------

@pytest.mark.parametrize('short, max_size', [(600, 1000), (120, 200), (333, 333)])
def test_faster_val_matches_gluoncv(short, max_size):
    ours = rcnn.FasterRCNNDefaultValTransform(short, max_size)
    theirs = gcv.FasterRCNNDefaultValTransform(short, max_size)
    rng = np.random.default_rng(short)
    for case in range(8):
        image = random_image(rng, 30, 500)
        label = random_label(rng, *image.shape[:2])
        got = ours(image, label)
        expected = theirs(mx.nd.array(image, dtype='uint8'), label)
        compare_outputs(got, expected, 'case %d' % case)


def test_mask_val_matches_gluoncv():
    ours = rcnn.MaskRCNNDefaultValTransform(200, 300, mean=(0.4, 0.5, 0.6), std=0.25)
    theirs = gcv.MaskRCNNDefaultValTransform(200, 300, mean=(0.4, 0.5, 0.6),
                                             std=(0.25, 0.25, 0.25))
    rng = np.random.default_rng(9)
    for case in range(8):
        image = random_image(rng, 30, 500)
        label = random_label(rng, *image.shape[:2])
        got = ours(image, label, None)
        expected = theirs(mx.nd.array(image, dtype='uint8'), label, None)
        compare_outputs(got, expected, 'case %d' % case)


# --- Mask R-CNN train preset ------------------------------------------------------------------

def mask_call(transform, sample, reference):
    image, label, segm = sample
    return transform(mx.nd.array(image, dtype='uint8') if reference else image, label, segm)


@pytest.mark.parametrize('key', ['mask', 'mask_fpn', None])
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_mask_train_matches_gluoncv(nets, key, dtype):
    kwargs = dict(short=(120, 260), max_size=360)
    if key is not None:
        kwargs.update(net=nets[key], multi_stage=NETS[key][1], box_norm=(1, 1, 2, 2))
    ours = rcnn.MaskRCNNDefaultTrainTransform(**kwargs)
    theirs = quiet(gcv.MaskRCNNDefaultTrainTransform, **kwargs)
    rng = np.random.default_rng(len(dtype))
    for seed in range(8):
        samples = []
        for _ in range(3):
            image = random_image(rng)
            label = random_label(rng, *image.shape[:2])
            samples.append((image, label, random_segm(rng, label, dtype)))
        inputs = copy.deepcopy(samples)
        got, expected = run_both(ours, theirs, samples, seed, mask_call)
        for index, (mine, ref) in enumerate(zip(got, expected)):
            compare_outputs(mine, ref, 'seed %d sample %d' % (seed, index))
            assert mine[-1].shape[0] == len(samples[index][1])
        for sample, before in zip(samples, inputs):
            for polys, polys0 in zip(sample[2], before[2]):
                assert all(np.array_equal(p, q) for p, q in zip(polys, polys0))


def test_mask_train_checks_polygons():
    transform = rcnn.MaskRCNNDefaultTrainTransform(short=50, max_size=100)
    image, label = np.zeros((40, 40, 3), np.uint8), np.array([[1., 1., 9., 9., 0.]])
    with pytest.raises(ValueError, match='no object'):
        transform(image, label, [])
    with pytest.raises(ValueError, match='no polygon'):
        transform(image, label, [[]])
    with pytest.raises(TypeError, match='numpy'):
        transform(image, label, [[[1, 2, 3, 4, 5, 6]]])
    with pytest.raises(ValueError, match=r'\(K, 2\)'):
        transform(image, label, [[np.zeros((3, 3))]])


def test_polygon_helpers_follow_gluoncvs_dtype_rules():
    from gluoncv.data.transforms import mask as gcv_mask
    rng = np.random.default_rng(0)
    for dtype in ('float32', 'float64', 'int32'):
        polys = [(rng.uniform(0, 50, (5, 2))).astype(dtype) for _ in range(2)]
        for mine, ref in zip(polygons.resize(polys, (50, 40), (77, 31)),
                             gcv_mask.resize(polys, (50, 40), (77, 31))):
            assert mine.dtype == ref.dtype and np.array_equal(mine, ref)
        for flips in ((True, False), (False, True), (True, True)):
            for mine, ref in zip(polygons.flip(polys, (50, 40), *flips),
                                 gcv_mask.flip(polys, (50, 40), *flips)):
                assert mine.dtype == ref.dtype and np.array_equal(mine, ref)


@settings(max_examples=examples(80), deadline=None)
@given(st.integers(1, 900), st.integers(1, 900), st.integers(1, 1000), st.integers(1, 1400))
def test_resize_size_is_gluoncvs(height, width, short, max_size):
    size = rcnn.resize_short_within_size(height, width, short, max_size)
    image = mx.nd.zeros((height, width, 3), dtype='uint8')
    if min(size) == 0:  # nothing left of the image: gluoncv's resize refuses it too
        with pytest.raises(mx.base.MXNetError):
            resize_short_within(image, short, max_size).wait_to_read()
        return
    resized = resize_short_within(image, short, max_size)
    assert size == (resized.shape[1], resized.shape[0])
