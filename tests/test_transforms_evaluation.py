"""The presets' test-time functions against gluoncv's: ``load_test`` and ``transform_test``
of ``ssd``, ``yolo``, ``rcnn`` and ``center_net``, on JPEG files written here (landscape,
portrait, one smaller than ``short``, one whose longer side passes ``max_size``).

Tensors and resized images equal gluoncv's to the bit (both resize with MXNet's bicubic
OpenCV call; ``to_tensor`` and ``normalize`` run in float32 as MXNet's do), with the same
containers: one pair for one image or a list of one, two lists otherwise. The presets'
modules have every public name of gluoncv's, but the DALI pipeline listed among the
deliberate differences.
"""
import inspect
import os
import pathlib
import re
import types

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data.transforms import presets as gcv_presets
from mxnet import npx

from gluonbatch.transforms import evaluation, presets
from helpers import jpeg_bytes

MODULES = ['ssd', 'yolo', 'rcnn', 'center_net']
#: gluoncv names the presets do not provide (see README's deliberate differences)
NOT_PROVIDED = {'ssd': {'SSDDALIPipeline'}}
#: (height, width): landscape, portrait, smaller than every short, longer than max_size
SIZES = [(375, 500), (500, 333), (40, 52), (300, 1400)]
#: arguments beyond the defaults, per module (SSD's and CenterNet's short has none)
ARGS = {'ssd': dict(short=300), 'yolo': dict(), 'rcnn': dict(),
        'center_net': dict(short=512)}
ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def jpegs(tmp_path_factory):
    folder = tmp_path_factory.mktemp('jpegs')
    paths = []
    for seed, (height, width) in enumerate(SIZES):
        path = folder / ('image%d.jpg' % seed)
        path.write_bytes(jpeg_bytes(seed, height, width))
        paths.append(str(path))
    return paths


def _public_names(module):
    """The public names a module defines itself (not what it imports)."""
    return {name for name, value in vars(module).items()
            if not name.startswith('_') and not isinstance(value, types.ModuleType)
            and getattr(value, '__module__', module.__name__) == module.__name__}


def assert_same_pair(ours, theirs, array_type=mx.nd.NDArray):
    """One ``(tensor, original)`` pair equal to gluoncv's, to the bit."""
    tensor, original = ours
    assert type(tensor) is array_type
    assert tensor.context == mx.cpu(0) and tensor.dtype == np.float32
    assert tensor.shape == theirs[0].shape
    np.testing.assert_array_equal(tensor.asnumpy(), theirs[0].asnumpy())
    assert type(original) is np.ndarray and original.dtype == np.uint8
    np.testing.assert_array_equal(original, theirs[1])


def assert_same_result(ours, theirs, array_type=mx.nd.NDArray):
    """gluoncv's container (a pair, or two lists) with equal contents."""
    assert type(ours) is type(theirs) and len(ours) == len(theirs) == 2
    if isinstance(theirs[0], list):
        assert type(ours[0]) is list and type(ours[1]) is list
        assert len(ours[0]) == len(theirs[0]) == len(ours[1])
        for pair, their_pair in zip(zip(*ours), zip(*theirs)):
            assert_same_pair(pair, their_pair, array_type)
    else:
        assert_same_pair(ours, theirs, array_type)


def test_the_modules_are_attributes_of_presets():
    for name in MODULES:
        module = getattr(presets, name)
        assert callable(module.load_test) and callable(module.transform_test)
        assert {'load_test', 'transform_test'} <= set(module.__all__)


@pytest.mark.parametrize('name', MODULES)
def test_every_public_name_of_gluoncv_is_here(name):
    theirs = _public_names(getattr(gcv_presets, name))
    assert {'load_test', 'transform_test'} <= theirs
    missing = {n for n in theirs if not hasattr(getattr(presets, name), n)}
    assert missing == NOT_PROVIDED.get(name, set())
    assert all(re.search(r'`presets\.%s\.%s`' % (name, n), _differences()) for n in missing)


def _differences():
    """README's section of deliberate differences from gluoncv (the docs' table)."""
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    section = readme.split('## Deliberate differences from gluoncv 0.10.5', 1)[1]
    return section.split('\n## ', 1)[0]


def test_gluoncvs_other_presets_modules_are_listed_as_not_provided():
    theirs = {name for name, value in vars(gcv_presets).items()
              if isinstance(value, types.ModuleType)}
    assert set(MODULES) <= theirs
    others = theirs - set(MODULES)
    assert others and not any(hasattr(presets, name) for name in others)
    assert all(re.search(r'`presets\.%s[`.]' % name, _differences()) for name in others)


@pytest.mark.parametrize('name', MODULES)
@pytest.mark.parametrize('function', ['load_test', 'transform_test'])
def test_signatures_are_gluoncvs(name, function):
    ours = inspect.signature(getattr(getattr(presets, name), function)).parameters
    theirs = inspect.signature(getattr(getattr(gcv_presets, name), function)).parameters
    assert [(p.name, p.default, p.kind) for p in ours.values()] == \
        [(p.name, p.default, p.kind) for p in theirs.values()]


@pytest.mark.parametrize('name', MODULES)
def test_load_test_equals_gluoncvs(name, jpegs):
    ours, theirs = getattr(presets, name), getattr(gcv_presets, name)
    kwargs = ARGS[name]
    for path in jpegs:  # one filename: one pair
        assert_same_result(ours.load_test(path, **kwargs), theirs.load_test(path, **kwargs))
    # several: two lists; a list of one: one pair, as gluoncv
    for paths in (jpegs, jpegs[:1], jpegs[1:3]):
        assert_same_result(ours.load_test(paths, **kwargs),
                           theirs.load_test(paths, **kwargs))
    assert ours.load_test([], **kwargs) == theirs.load_test([], **kwargs) == ([], [])
    # a path object is one filename too
    assert_same_result(ours.load_test(pathlib.Path(jpegs[0]), **kwargs),
                       theirs.load_test(jpegs[0], **kwargs))


@pytest.mark.parametrize('name', MODULES)
def test_transform_test_equals_gluoncvs_for_ndarrays_and_numpy(name, jpegs):
    ours, theirs = getattr(presets, name), getattr(gcv_presets, name)
    kwargs = ARGS[name]
    images = [mx.image.imread(path) for path in jpegs]
    expected = theirs.transform_test(images, **kwargs)
    assert_same_result(ours.transform_test(images, **kwargs), expected)
    assert_same_result(ours.transform_test(tuple(images), **kwargs), expected)
    arrays = [image.asnumpy() for image in images]
    before = [array.copy() for array in arrays]
    assert_same_result(ours.transform_test(arrays, **kwargs), expected)
    for image, array in zip(images[:2], arrays):
        single = theirs.transform_test(image, **kwargs)
        assert_same_result(ours.transform_test(image, **kwargs), single)
        tensor, original = ours.transform_test(array, **kwargs)
        assert_same_result((tensor, original), single)
        assert not np.shares_memory(original, array)
    for array, copy in zip(arrays, before):  # inputs are never written
        np.testing.assert_array_equal(array, copy)


@pytest.mark.parametrize('dtype', ['float32', 'float64'])
def test_float_images_equal_gluoncvs(dtype, jpegs):
    # above 255 and fractional: to_tensor's division and the uint8 cast of the original
    image = (mx.image.imread(jpegs[0]).astype('float64') * 1.13 + 0.4).astype(dtype)
    for name in ('rcnn', 'ssd'):
        ours, theirs = getattr(presets, name), getattr(gcv_presets, name)
        assert_same_result(ours.transform_test(image, **ARGS[name]),
                           theirs.transform_test(image, **ARGS[name]))
        assert_same_result(ours.transform_test(image.asnumpy(), **ARGS[name]),
                           theirs.transform_test(image, **ARGS[name]))


@pytest.mark.parametrize('dtype', ['float16', 'int8', 'int16', 'uint16', 'int32', 'int64'])
@pytest.mark.parametrize('kind', ['numpy', 'ndarray'])
def test_other_dtypes_are_read_as_float32(dtype, kind):
    # gluoncv fails on these or returns wrong values; gluonbatch's one rule for every preset
    values = np.random.RandomState(3).randint(0, 120, (23, 31, 3))
    image = values.astype(dtype)
    if kind == 'ndarray' and dtype not in ('int16', 'uint16'):  # no such NDArray dtype
        image = mx.nd.array(values, dtype=dtype)
    expected_tensor, expected_original = presets.yolo.transform_test(
        values.astype('float32'), short=40, max_size=90)
    tensor, original = presets.yolo.transform_test(image, short=40, max_size=90)
    np.testing.assert_array_equal(tensor.asnumpy(), expected_tensor.asnumpy())
    np.testing.assert_array_equal(original, expected_original)


@pytest.mark.parametrize('stride', [1, 32])
def test_yolo_stride_and_arguments_equal_gluoncvs(stride, jpegs):
    kwargs = dict(short=320, max_size=700, stride=stride, mean=(0.5, 0.4, 0.3),
                  std=(0.2, 0.25, 0.3))
    result = presets.yolo.load_test(jpegs, **kwargs)
    assert_same_result(result, gcv_presets.yolo.load_test(jpegs, **kwargs))
    assert all(t.shape[2] % stride == 0 and t.shape[3] % stride == 0 for t in result[0])
    assert max(max(t.shape[2:]) for t in result[0]) <= 700


def test_numpy_mode_gives_mx_np_tensors_of_gluoncvs_values(jpegs):
    expected = {name: getattr(gcv_presets, name).load_test(jpegs, **ARGS[name])
                for name in MODULES}
    single = gcv_presets.rcnn.load_test(jpegs[0])
    array = mx.image.imread(jpegs[0]).asnumpy()
    npx.set_np()
    try:
        for name in MODULES:
            module = getattr(presets, name)
            assert_same_result(module.load_test(jpegs, **ARGS[name]), expected[name],
                               array_type=mx.np.ndarray)
        assert_same_result(presets.rcnn.load_test(jpegs[0]), single, mx.np.ndarray)
        # numpy-mode images, as mx.image.imread decodes them there, and numpy arrays
        decoded = [mx.image.imread(path) for path in jpegs]
        assert type(decoded[0]) is mx.np.ndarray
        assert_same_result(presets.rcnn.transform_test(decoded), expected['rcnn'],
                           mx.np.ndarray)
        assert_same_result(presets.rcnn.transform_test(decoded[0]), single, mx.np.ndarray)
        assert_same_result(presets.rcnn.transform_test(array), single, mx.np.ndarray)
        assert mx.util.is_np_array()  # the mode is left as it was
    finally:
        npx.reset_np()
    assert not mx.util.is_np_array()
    assert_same_result(presets.rcnn.transform_test(array), single)


def test_bad_inputs_raise_saying_what_was_expected(jpegs, tmp_path):
    image = np.zeros((20, 30, 3), np.uint8)
    with pytest.raises(TypeError, match='image 1 must be an mx.nd.NDArray'):
        presets.ssd.transform_test([image, [[1, 2, 3]]], short=40)
    with pytest.raises(TypeError, match='imgs must be an image'):
        presets.ssd.transform_test(jpegs[0], short=40)
    with pytest.raises(TypeError, match='image 0 must hold real numbers'):
        presets.ssd.transform_test(image.astype(bool), short=40)
    with pytest.raises(TypeError, match='image 1 must hold real numbers'):
        presets.ssd.transform_test([image, mx.nd.array(image).astype('bool')], short=40)
    with pytest.raises(ValueError, match='HWC with 3 channels'):
        presets.ssd.transform_test(image[:, :, 0], short=40)
    with pytest.raises(ValueError, match='HWC with 3 channels'):
        presets.rcnn.transform_test(np.zeros((20, 30, 4), np.uint8))
    with pytest.raises(ValueError, match='short must be positive'):
        presets.ssd.transform_test(image, short=0)
    with pytest.raises(TypeError, match='max_size must be a number'):
        presets.ssd.transform_test(image, short=10, max_size='1024')
    with pytest.raises(ValueError, match='stride'):
        presets.yolo.transform_test(image, stride=0)
    with pytest.raises(ValueError, match='nothing is left'):
        presets.rcnn.transform_test(np.zeros((1, 3000, 3), np.uint8))
    with pytest.raises(FileNotFoundError, match='does not exist'):
        presets.rcnn.load_test(os.path.join(str(tmp_path), 'missing.jpg'))
    not_an_image = tmp_path / 'notes.jpg'
    not_an_image.write_text('not an image')
    with pytest.raises(ValueError, match='could not be decoded'):
        presets.rcnn.load_test([jpegs[0], str(not_an_image)])
    with pytest.raises(TypeError, match='filename 0 must be a str'):
        presets.rcnn.load_test([b'image.jpg'])
    with pytest.raises(TypeError, match='filenames must be'):
        presets.rcnn.load_test(3)


def test_resize_size_is_gluoncvs_for_every_stride():
    from gluoncv.data.transforms.image import resize_short_within
    cases = [(375, 500, 416, 1024, 1), (375, 500, 416, 1024, 32), (300, 1400, 600, 1000, 1),
             (300, 1400, 320, 700, 32), (33, 33, 512, 1024, 1), (500, 333, 600, 1000, 16),
             (1, 3000, 600, 1000, 1)]
    for height, width, short, max_size, mult_base in cases:
        image = mx.nd.zeros((height, width, 3), dtype='uint8')
        size = evaluation.resize_short_within_size(height, width, short, max_size, mult_base)
        try:
            shape = resize_short_within(image, short, max_size, mult_base=mult_base).shape
        except mx.base.MXNetError:  # nothing left: ours says so (see above)
            assert min(size) < 1
        else:
            assert size == (shape[1], shape[0])
