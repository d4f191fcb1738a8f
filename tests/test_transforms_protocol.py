"""Every train preset is a :class:`~gluonbatch.transforms.presets.Preset`: its call is ``draw``
then ``apply`` on the global generators, so ``apply(sample, draw(...), g)`` with ``g`` seeded
as the globals were gives the call's outputs to the bit and leaves ``g`` where the call
leaves the globals (R-CNN's RPN sampling, drawn in ``apply``, included).
"""
import copy
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.transforms.draws import SSDDraw
from gluonbatch.transforms.presets import Generators, Preset, global_generators
from gluonbatch.transforms.presets.center_net import CenterNetDefaultTrainTransform
from gluonbatch.transforms.presets.rcnn import (FasterRCNNDefaultTrainTransform,
                                                MaskRCNNDefaultTrainTransform, RCNNDraw)
from gluonbatch.transforms.presets.ssd import SSDAugmentation, SSDDefaultTrainTransform
from gluonbatch.transforms.presets.yolo import YOLO3DefaultTrainTransform

from helpers import examples

RCNN = {'short': (40, 64), 'max_size': 100}
NAMES = ['ssd', 'ssd_hwc', 'yolo_mixup', 'faster_rcnn', 'faster_rcnn_net', 'mask_rcnn',
         'center_net']


def make_presets(zoo_net):
    """Each train preset of the test, by name (:data:`NAMES`)."""
    return {
        'ssd': SSDDefaultTrainTransform(64, 48),
        'ssd_hwc': SSDDefaultTrainTransform(48, 64, normalize=False),
        'yolo_mixup': YOLO3DefaultTrainTransform(64, 96, mixup=True),
        'faster_rcnn': FasterRCNNDefaultTrainTransform(**RCNN),
        'faster_rcnn_net': FasterRCNNDefaultTrainTransform(
            net=zoo_net('faster_rcnn_resnet50_v1b_voc', anchors_only=True), **RCNN),
        'mask_rcnn': MaskRCNNDefaultTrainTransform(**RCNN),
        'center_net': CenterNetDefaultTrainTransform(64, 64, 5),
    }


@pytest.fixture(scope='module')
def presets(zoo_net):
    return make_presets(zoo_net)


def sample_for(name, rng, height, width, count):
    """``(image, label[, segm])`` with ``count`` boxes inside the image."""
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    low = rng.uniform(0, 0.6, (count, 2)) * (width, height)
    size = rng.uniform(0.1, 0.4, (count, 2)) * (width, height)
    label = np.concatenate([low, low + size, rng.integers(0, 5, (count, 1))], axis=1)
    if name == 'yolo_mixup':
        label = np.concatenate([label, rng.uniform(0.2, 1, (count, 1))], axis=1)
    if name == 'mask_rcnn':
        segm = [[np.array([[x0, y0], [x1, y0], [x1, y1]])] for x0, y0, x1, y1 in label[:, :4]]
        return image, label, segm
    return image, label


def states(generators):
    """Comparable states of a :class:`Generators`."""
    kind, keys, pos, has_gauss, gauss = generators.numpy.get_state()
    return generators.python.getstate(), (kind, keys.tobytes(), pos, has_gauss, gauss)


def assert_same(got, want):
    assert type(got) is type(want) and len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, list):  # per-level RPN targets
            assert_same(a, b)
        else:
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


def test_every_train_preset_is_a_preset(presets):
    for name, preset in presets.items():
        assert isinstance(preset, Preset), name
    assert isinstance(SSDAugmentation(32, 32), Preset)
    assert not isinstance(object(), Preset)


@pytest.mark.parametrize('name', NAMES)
@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), height=st.integers(24, 90),
       width=st.integers(24, 90), count=st.integers(1, 4))
def test_apply_of_draw_is_the_call(presets, name, seed, height, width, count):
    preset = presets[name]
    twin = copy.deepcopy(preset)  # CenterNet's own generator moves on with each draw
    sample = sample_for(name, np.random.default_rng(seed), height, width, count)
    before = copy.deepcopy(sample)
    random.seed(seed)
    np.random.seed(seed)
    try:
        want = preset(*sample)
    except ValueError:  # an image too small for what was drawn: draw raises alike
        generators = Generators.seeded(seed)
        with pytest.raises(ValueError):
            twin.draw(sample[0].shape, sample[1], generators)
        return
    after = states(global_generators())
    generators = Generators.seeded(seed)
    drawn = twin.draw(sample[0].shape, sample[1], generators)
    got = twin.apply(sample, drawn, generators)
    assert_same(got, want)
    assert states(generators) == after
    for field, original in zip(sample[:2], before[:2]):
        np.testing.assert_array_equal(field, original)  # inputs untouched


def test_draw_checks_its_arguments():
    preset = SSDDefaultTrainTransform(32, 32)
    label = np.array([[1., 1., 10., 10., 0.]])
    generators = Generators.seeded(0)
    with pytest.raises(TypeError, match='generators must be a .*Generators.*got NoneType'):
        preset.draw((40, 40, 3), label, None)
    with pytest.raises(TypeError, match='got numpy.RandomState'):
        preset.draw((40, 40, 3), label, np.random.RandomState(0))
    with pytest.raises(TypeError, match='image_shape must be a tuple of ints'):
        preset.draw(np.zeros((40, 40, 3)), label, generators)
    with pytest.raises(ValueError, match=r'image_shape .* got \(40,\)'):
        preset.draw((40,), label, generators)
    with pytest.raises(ValueError, match='label must have shape'):
        preset.draw((40, 40, 3), label[:, :4], generators)


def test_generators_take_only_the_generators_gluoncv_draws_from():
    with pytest.raises(TypeError, match='numpy must be a numpy.random.RandomState.*Generator'):
        Generators(np.random.default_rng(0), random.Random(0))
    with pytest.raises(TypeError, match='python must be a random.Random.*RandomState'):
        Generators(np.random.RandomState(0), np.random.RandomState(0))
    assert global_generators().numpy.uniform == np.random.uniform


@pytest.mark.parametrize('preset, fields, other', [
    (SSDDefaultTrainTransform(32, 32), 2, RCNNDraw(32, 32, 32, False)),
    (FasterRCNNDefaultTrainTransform(**RCNN), 2, None),
    (MaskRCNNDefaultTrainTransform(**RCNN), 3, None),
    (CenterNetDefaultTrainTransform(32, 32, 5), 2, None)], ids=lambda v: type(v).__name__)
def test_apply_checks_its_arguments(preset, fields, other):
    sample = sample_for('mask_rcnn' if fields == 3 else '', np.random.default_rng(0), 60, 60,
                        2)
    generators = Generators.seeded(1)
    drawn = preset.draw(sample[0].shape, sample[1], generators)
    with pytest.raises(TypeError, match=r'sample must be a tuple \(image, label'):
        preset.apply(sample[0], drawn, generators)
    with pytest.raises(ValueError, match='sample must be .*: %d fields, got %d'
                       % (fields, fields + 1)):
        preset.apply(sample + (None,), drawn, generators)
    wrong = other if other is not None else SSDDraw(None, None, None, 0, False, False)
    with pytest.raises(TypeError, match='draw must be the %s that %s.draw returns'
                       % (type(drawn).__name__, type(preset).__name__)):
        preset.apply(sample, wrong, generators)
    with pytest.raises(TypeError, match='generators must be'):
        preset.apply(sample, drawn, (np.random, random))
    with pytest.raises(TypeError, match='image'):
        preset.apply(('pixels',) + sample[1:], drawn, generators)
