"""NormalizedStack: every image as MXNet's ``to_tensor`` then ``normalize`` make it, bit for
bit, written CHW into one float32 batch in shared memory.

The reference is MXNet itself, image by image. Images are drawn of every size from 1 to 64
pixels a side, uint8 and float32 (negative, above 255, fractional, infinite and NaN
values), numpy (contiguous or not) and NDArray; ``mean``/``std`` as one number or three.
Then the errors, and the batch in DataLoader workers and in numpy mode.
"""
import pickle
import re

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxnet import npx

from gluonbatch.batchify import NormalizedStack, Pad, Stack, Tuple
from gluonbatch.devices import split_to_devices
from helpers import SHARED, assert_unchanged, examples, overwrite_all, snapshot


def reference(images, mean, std):
    """MXNet's to_tensor and normalize of each image, stacked."""
    return np.stack([mx.nd.image.normalize(
        mx.nd.image.to_tensor(mx.nd.array(as_numpy(x), dtype=as_numpy(x).dtype)),
        mean=mean, std=std).asnumpy() for x in images])


def as_numpy(value):
    return value.asnumpy() if isinstance(value, mx.nd.NDArray) else value


def pixels(rng, kind, dtype, shape):
    """An HWC image of ``dtype`` whose values are of ``kind``."""
    if dtype == np.uint8:
        return rng.randint(0, 256, shape).astype(np.uint8)
    if kind == 'pixels':  # whole numbers in the pixel range, as decoded images are
        return rng.randint(0, 256, shape).astype(np.float32)
    values = rng.uniform(-600, 900, shape).astype(np.float32)  # negative, > 255, fractions
    if kind == 'special':
        specials = np.array([0, -0.0, 255, 1e-30, -1e30, 3e38, np.inf, -np.inf, np.nan],
                            np.float32)
        mask = rng.rand(*shape) < 0.3
        values[mask] = rng.choice(specials, int(mask.sum()))
    return values


def with_container(image, container):
    """``image`` as a numpy array, a non-contiguous numpy view of the same values
    (columns in reverse order of a reversed copy), or an NDArray."""
    if container == 'ndarray':
        return mx.nd.array(image, dtype=image.dtype)
    if container == 'view':
        return image[:, ::-1].copy()[:, ::-1]
    return image


channel_values = st.one_of(
    st.floats(-3, 3, width=32),
    st.tuples(st.floats(-3, 3), st.floats(-3, 3), st.floats(-3, 3)))
nonzero = st.one_of(st.floats(0.01, 4), st.floats(-4, -0.01))
channel_stds = st.one_of(nonzero, st.tuples(nonzero, nonzero, nonzero))


@settings(max_examples=examples(150), deadline=None)
@given(height=st.integers(1, 64), width=st.integers(1, 64), count=st.integers(1, 4),
       dtype=st.sampled_from([np.uint8, np.float32]),
       kind=st.sampled_from(['pixels', 'any', 'special']),
       containers=st.lists(st.sampled_from(['numpy', 'view', 'ndarray']), min_size=4,
                           max_size=4),
       mean=channel_values, std=channel_stds, seed=st.integers(0, 2 ** 16))
def test_bit_equal_to_to_tensor_then_normalize(height, width, count, dtype, kind, containers,
                                               mean, std, seed):
    rng = np.random.RandomState(seed)
    images = [pixels(rng, kind, dtype, (height, width, 3)) for _ in range(count)]
    images = [with_container(x, container) for x, container in zip(images, containers)]
    before = snapshot(images)
    batch = NormalizedStack(mean, std)(images)
    assert type(batch) is mx.nd.NDArray and batch.context == SHARED
    assert batch.shape == (count, 3, height, width) and batch.dtype == np.float32
    got, want = batch.asnumpy(), reference(images, mean, std)
    assert got.dtype == want.dtype == np.float32
    assert np.array_equal(got, want, equal_nan=True)
    assert_unchanged(before, snapshot(images))


def test_defaults_are_gluoncv_presets_normalization():
    image = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3) * 14
    np.testing.assert_array_equal(
        NormalizedStack()([image]).asnumpy(),
        reference([image], (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)))


def test_every_default_normalization_is_the_one_imagenet_statistics():
    """The batchifiers' and the presets' defaults are the same objects, from one home."""
    import inspect
    from gluonbatch.batchify import SSDTrainBatchify, images
    from gluonbatch.transforms.presets import center_net, rcnn, ssd
    assert images.IMAGENET_MEAN == (0.485, 0.456, 0.406)
    assert images.IMAGENET_STD == (0.229, 0.224, 0.225)
    for module in (center_net, rcnn, ssd):
        assert module.MEAN is images.IMAGENET_MEAN and module.STD is images.IMAGENET_STD
    for function in (NormalizedStack, SSDTrainBatchify, ssd.SSDDefaultTrainTransform,
                     rcnn.FasterRCNNDefaultTrainTransform,
                     center_net.CenterNetDefaultTrainTransform):
        parameters = inspect.signature(function).parameters
        assert parameters['mean'].default is images.IMAGENET_MEAN, function
        assert parameters['std'].default is images.IMAGENET_STD, function


def test_batch_is_neither_aliased_nor_alias_of_its_inputs():
    """A batch of one cpu_shared NDArray too: the batch is always a new array."""
    rng = np.random.RandomState(1)
    for images in ([mx.nd.array(pixels(rng, 'any', np.float32, (5, 7, 3)), ctx=SHARED)],
                   [pixels(rng, 'any', np.float32, (5, 7, 3)),
                    mx.nd.array(rng.randint(0, 256, (5, 7, 3)), dtype='uint8', ctx=SHARED)]):
        before = snapshot(images)
        batch = NormalizedStack()(images)
        want = batch.asnumpy()
        overwrite_all(batch)
        assert_unchanged(before, snapshot(images))
        batch = NormalizedStack()(images)
        for image in images:
            image[:] = 1
        np.testing.assert_array_equal(batch.asnumpy(), want)


def test_rows_split_over_devices_and_pickling():
    stack = NormalizedStack(0.25, (1.0, 2.0, 4.0))
    images = [np.full((3, 2, 3), i * 40, np.uint8) for i in range(3)]
    batch = stack(images)
    assert stack.device_layout == 'rows'
    parts = split_to_devices(batch, [mx.cpu(0), mx.cpu(1)], layout=stack)
    assert [part.context for part in parts] == [mx.cpu(0), mx.cpu(1)]
    np.testing.assert_array_equal(parts[0].asnumpy(), batch.asnumpy()[:2])
    np.testing.assert_array_equal(parts[1].asnumpy(), batch.asnumpy()[2:])
    copy = pickle.loads(pickle.dumps(stack))
    np.testing.assert_array_equal(copy(images).asnumpy(), batch.asnumpy())


# ---------------------------------------------------------------------------------------
# errors


@pytest.mark.parametrize('dtype', ['float64', 'int32', 'float16', 'int64', 'bool'])
def test_other_dtypes_are_refused(dtype):
    good = np.zeros((4, 4, 3), np.uint8)
    for bad in (np.zeros((4, 4, 3), dtype), mx.nd.zeros((4, 4, 3), dtype=dtype)
                if dtype != 'bool' else np.zeros((4, 4, 3), dtype)):
        with pytest.raises(TypeError, match=r'sample 1 .*%s.*uint8 or float32' % dtype):
            NormalizedStack()([good, bad])
    with pytest.raises(TypeError, match='sample 1'):
        NormalizedStack()([good, [[[1, 2, 3]]]])


@pytest.mark.parametrize('shape', [(4, 4), (4, 4, 4), (4, 4, 1), (3, 4, 4), (1, 4, 4, 3)])
def test_images_not_hwc_rgb_are_refused(shape):
    good = np.zeros((4, 4, 3), np.float32)
    with pytest.raises(ValueError, match=r'sample 2 has shape %s' % re.escape(str(tuple(shape)))):
        NormalizedStack()([good, good, np.zeros(shape, np.float32)])


def test_images_of_different_sizes_are_refused():
    images = [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4, 3), np.uint8),
              np.zeros((4, 5, 3), np.uint8)]
    with pytest.raises(ValueError, match=r'sample 2 has shape \(4, 5, 3\); expected '
                                         r'\(4, 4, 3\)'):
        NormalizedStack()(images)


@pytest.mark.parametrize('std', [0, 0.0, (1, 0, 1), (0,)])
def test_zero_std_is_refused(std):
    with pytest.raises(ValueError, match='std'):
        NormalizedStack(std=std)


@pytest.mark.parametrize('kwargs, error', [
    ({'mean': (0.1, 0.2)}, ValueError), ({'std': (1, 2, 3, 4)}, ValueError),
    ({'std': float('nan')}, ValueError), ({'mean': float('inf')}, ValueError),
    ({'mean': 'a'}, TypeError), ({'std': None}, TypeError)])
def test_bad_parameters_are_refused(kwargs, error):
    name = next(iter(kwargs))
    with pytest.raises(error, match=name):
        NormalizedStack(**kwargs)


def test_empty_batch_fails_as_stack_does():
    with pytest.raises(Exception) as stack_error:
        Stack()([])
    with pytest.raises(type(stack_error.value)) as ours:
        NormalizedStack()([])
    assert str(ours.value) == str(stack_error.value)


# ---------------------------------------------------------------------------------------
# where it runs


class Images(mx.gluon.data.Dataset):
    """Sample i: a 48x40 uint8 image of value-noise seeded by i, and i % 4 + 1 label rows
    (batches of 4 of differing labels)."""

    def __len__(self):
        return 12

    def __getitem__(self, idx):
        rng = np.random.RandomState(idx)
        image = rng.randint(0, 256, (48, 40, 3)).astype(np.uint8)
        return image, np.full((idx % 4 + 1 + (idx // 4) * 3, 5), idx, np.float32)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_loader_batches_equal_direct_calls(num_workers):
    """Two epochs, so that worker processes write into recycled memory."""
    dataset = Images()
    batchify = Tuple(NormalizedStack(), Pad(pad_val=-1))
    want = [[field.asnumpy() for field in batchify([dataset[i] for i in range(s, s + 4)])]
            for s in range(0, len(dataset), 4)]
    loader = mx.gluon.data.DataLoader(dataset, batch_size=4, batchify_fn=batchify,
                                      num_workers=num_workers)
    for _ in range(2):
        seen = 0
        for images, labels in loader:
            assert images.context == SHARED and images.shape == (4, 3, 48, 40)
            np.testing.assert_array_equal(images.asnumpy(), want[seen][0])
            np.testing.assert_array_equal(labels.asnumpy(), want[seen][1])
            seen += 1
            del images, labels
        assert seen == len(want)


def test_numpy_mode_gives_the_same_values():
    rng = np.random.RandomState(2)
    images = [pixels(rng, 'any', np.float32, (6, 5, 3)), rng.randint(0, 256, (6, 5, 3))
              .astype(np.uint8)]
    want = NormalizedStack(0.5, 0.25)(images).asnumpy()
    npx.set_np()
    try:
        for given_images in (images, [mx.np.array(x, dtype=x.dtype) for x in images]):
            batch = NormalizedStack(0.5, 0.25)(given_images)
            assert type(batch) is mx.np.ndarray and batch.context == SHARED
            np.testing.assert_array_equal(batch.asnumpy(), want)
    finally:
        npx.reset_np()
    assert type(NormalizedStack(0.5, 0.25)(images)) is mx.nd.NDArray
