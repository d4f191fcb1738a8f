"""Images that are not uint8: every preset takes any integer or float dtype, reads it as
float32 values and gives gluoncv's sample, seeded alike (same draws, same boxes and
targets, images within float32 rounding and the two OpenCV versions' float resize).

gluoncv's SSD and YOLOv3 train presets take every such dtype (they start with
``astype('float32')``); its validation, R-CNN and CenterNet presets handle uint8, float32
and float64 and fail on float16 or the other integer dtypes (or, for int8 and int64, resize
them to wrong values). For those the reference is gluoncv's sample of the same values in
float32. Booleans, complex numbers and objects are refused with a ``TypeError``.
"""
import random
import warnings

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data.transforms import presets as gcv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import pixels
from gluonbatch.transforms.presets import center_net, rcnn, ssd, yolo
from helpers import examples
from test_transforms_equivalence import run_seeded

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: dtypes gluoncv's every preset handles; its SSD and YOLOv3 train presets handle all
GLUONCV_DTYPES = ('uint8', 'float32', 'float64')
DTYPES = ('float32', 'float64', 'float16', 'int8', 'int16', 'uint16', 'int32', 'int64')
#: of those, what an NDArray can hold
NDARRAY_DTYPES = ('float32', 'float64', 'float16', 'int8', 'int32', 'int64')
#: value ranges of float images: pixels, pre-normalized data, values past both ends
RANGES = {'pixels': (0, 255), 'normalized': (-2.2, 2.7), 'wide': (-300, 600),
          'noise': (-300, 600)}
#: max |difference| of normalized images, as documented: float resizes by MXNet's OpenCV
#: and by cv2 (7e-4 the most measured, on noise images up to 700 pixels wide)
ATOL = 1e-3


def _centernet_train():
    return center_net.CenterNetDefaultTrainTransform(64, 48, num_class=20,
                                                     data_rng=np.random.RandomState(123))


#: name: (ours, gluoncv's, image tolerance, gluoncv takes every dtype, boxes must be > 0)
PRESETS = {
    'ssd_train': (lambda: ssd.SSDDefaultTrainTransform(64, 48),
                  lambda: gcv.ssd.SSDDefaultTrainTransform(64, 48), ATOL, True, False),
    'yolo_train': (lambda: yolo.YOLO3DefaultTrainTransform(48, 64),
                   lambda: gcv.yolo.YOLO3DefaultTrainTransform(48, 64), ATOL, True, False),
    'ssd_val': (lambda: ssd.SSDDefaultValTransform(64, 48),
                lambda: gcv.ssd.SSDDefaultValTransform(64, 48), ATOL, False, False),
    'yolo_val': (lambda: yolo.YOLO3DefaultValTransform(80, 40),
                 lambda: gcv.yolo.YOLO3DefaultValTransform(80, 40), ATOL, False, False),
    'faster_rcnn_train': (lambda: rcnn.FasterRCNNDefaultTrainTransform((30, 70), 100),
                          lambda: gcv.rcnn.FasterRCNNDefaultTrainTransform((30, 70), 100),
                          ATOL, False, False),
    'faster_rcnn_val': (lambda: rcnn.FasterRCNNDefaultValTransform(50, 90),
                        lambda: gcv.rcnn.FasterRCNNDefaultValTransform(50, 90), ATOL, False,
                        False),
    'center_net_train': (_centernet_train,
                         lambda: gcv.center_net.CenterNetDefaultTrainTransform(64, 48, 20),
                         ATOL, False, True),
    'center_net_val': (lambda: center_net.CenterNetDefaultValTransform(48, 64),
                       lambda: gcv.center_net.CenterNetDefaultValTransform(48, 64), ATOL,
                       False, False),
}


def image_of(rng, height, width, dtype, values):
    """An HWC image of ``dtype``: a gradient plus noise over the range ``values`` names
    (integer dtypes: what they hold of it)."""
    low, high = RANGES[values]
    if np.dtype(dtype).kind in 'iu':
        info = np.iinfo(dtype)
        low, high = max(info.min, -300), min(info.max, 600)
    if values == 'noise':  # every pixel independent: the hardest case for a resize
        unit = rng.uniform(0, 1, (height, width, 3))
    else:
        unit = 0.4 * rng.uniform(0, 1, (height, width, 3)) + np.linspace(0, 0.6, width)[
            None, :, None]
    return (low + (high - low) * unit).astype(dtype)


def label_of(rng, height, width, count, positive=False):
    """``count`` boxes (float64), some past the image's edges; with ``positive`` each has
    a width and height of at least 2 inside the image (CenterNet's need)."""
    x = np.sort(rng.uniform(-0.1 * width, 1.1 * width, (count, 2)), axis=1)
    y = np.sort(rng.uniform(-0.1 * height, 1.1 * height, (count, 2)), axis=1)
    if positive:
        x = np.sort(rng.uniform(0, width - 1, (count, 2)), axis=1) + [[0, 2]]
        y = np.sort(rng.uniform(0, height - 1, (count, 2)), axis=1) + [[0, 2]]
    return np.stack([x[:, 0], y[:, 0], x[:, 1], y[:, 1], rng.randint(0, 20, count)], axis=1)


@st.composite
def float_samples(draw, positive=False):
    """``(image, label, seed)``: an image of any accepted dtype but uint8, numpy or NDArray."""
    rng = np.random.RandomState(draw(st.integers(0, 2 ** 31 - 1)))
    height, width = draw(st.integers(12, 90)), draw(st.integers(12, 90))
    dtype = draw(st.sampled_from(DTYPES))
    image = image_of(rng, height, width, dtype, draw(st.sampled_from(sorted(RANGES))))
    label = label_of(rng, height, width, draw(st.integers(0 if not positive else 1, 6)),
                     positive)
    return image, label, draw(st.booleans()), draw(st.integers(0, 2 ** 31 - 1))


def reference_input(image, any_dtype):
    """What gluoncv's preset gets: the image as an NDArray of its dtype, or of its values in
    float32 where gluoncv's preset cannot handle the dtype (or an NDArray cannot hold it)."""
    if str(image.dtype) not in (NDARRAY_DTYPES if any_dtype else GLUONCV_DTYPES):
        image = image.astype(np.float32)
    return mx.nd.array(image, dtype=image.dtype)


def assert_matches_gluoncv(name, image, label, seed, as_ndarray=False):
    """Our preset ``name`` on ``image`` (as an NDArray if ``as_ndarray``) and gluoncv's on
    its reference input, seeded with ``seed``: the same generator states; both fail, or
    the same fields, images within the preset's tolerance and boxes and targets equal up
    to float32 rounding."""
    ours, theirs, atol, any_dtype, _ = PRESETS[name]
    before = image.copy()
    as_ndarray = as_ndarray and str(image.dtype) in NDARRAY_DTYPES
    src = mx.nd.array(image, dtype=image.dtype) if as_ndarray else image
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        ours_preset, theirs_preset = ours(), theirs()
        our_out, our_py, our_np = run_seeded(ours_preset, src, label, seed)
        their_out, their_py, their_np = run_seeded(
            theirs_preset, reference_input(image, any_dtype), label, seed)
    np.testing.assert_array_equal(image, before)
    assert our_py == their_py
    assert all(np.array_equal(a, b) for a, b in zip(our_np, their_np))
    if isinstance(their_out, Exception) or isinstance(our_out, Exception):
        assert isinstance(our_out, Exception) and isinstance(their_out, Exception), (
            our_out, their_out)
        return
    if name == 'center_net_train':  # the colour jitter's own generator
        assert np.array_equal(ours_preset._data_rng.get_state()[1],  # (ours: given)
                              theirs_preset._data_rng.get_state()[1])
    assert [o.shape for o in our_out] == [t.shape for t in their_out]
    assert our_out[0].dtype == np.float32 and our_out[0].flags.c_contiguous
    assert not np.shares_memory(our_out[0], image)
    if our_out[0].size:
        np.testing.assert_allclose(our_out[0], their_out[0], rtol=0, atol=atol)
    for a, b in zip(our_out[1:], their_out[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


SETTINGS = settings(max_examples=examples(40), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_float_images_match_gluoncv(name):
    @SETTINGS
    @given(float_samples(positive=PRESETS[name][4]))
    def check(sample):
        image, label, as_ndarray, seed = sample
        assert_matches_gluoncv(name, image, label, seed, as_ndarray)
    check()


@pytest.mark.parametrize('name', sorted(PRESETS))
@pytest.mark.parametrize('dtype', ['float32', 'float64'])
@pytest.mark.parametrize('values', sorted(RANGES))
def test_float_images_of_each_range_match_gluoncv_over_seeds(name, dtype, values):
    """Seeds in a row on one image per dtype and range: pixels, pre-normalized data and
    values past 0 and 255 are neither clipped nor rounded, as in gluoncv."""
    rng = np.random.RandomState(7)
    image = image_of(rng, 57, 83, dtype, values)
    label = label_of(rng, 57, 83, 3, positive=PRESETS[name][4])
    for seed in range(6):
        assert_matches_gluoncv(name, image, label, seed, as_ndarray=seed % 2 == 1)


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_large_noise_images_match_gluoncv(name):
    """Images much larger than the output, every pixel independent: the resizes differ
    most there, and stay within the documented tolerance."""
    rng = np.random.RandomState(11)
    image = image_of(rng, 480, 640, 'float32', 'noise')
    label = label_of(rng, 480, 640, 3, positive=PRESETS[name][4])
    for seed in range(2):
        assert_matches_gluoncv(name, image, label, seed)


def test_pre_normalized_images_keep_their_range():
    """Nothing is clipped: the validation preset's output of a pre-normalized image is
    ``(x / 255 - mean) / std`` of its values, negative ones included."""
    image = np.full((20, 30, 3), -2.0, np.float32)
    image[:, 15:] = 2.0
    out, _ = ssd.SSDDefaultValTransform(30, 20)(image, np.zeros((0, 5)))
    expected = (np.array([-2.0, 2.0]) / 255 - MEAN[0]) / STD[0]
    np.testing.assert_allclose(out[0, 0, [0, -1]], expected, rtol=0, atol=1e-6)


def test_mask_rcnn_float_images_match_gluoncv():
    rng = np.random.RandomState(11)
    for seed in range(6):
        image = image_of(rng, 50, 70, ('float32', 'float64', 'int16')[seed % 3], 'wide')
        label = label_of(rng, 50, 70, 2, positive=True)
        segm = [[np.array([[b[0], b[1]], [b[2], b[1]], [b[2], b[3]]])] for b in label]
        reference = reference_input(image, any_dtype=False)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            outputs = []
            for transform, src in ((rcnn.MaskRCNNDefaultTrainTransform(40, 90), image),
                                   (gcv.rcnn.MaskRCNNDefaultTrainTransform(40, 90), reference)):
                random.seed(seed)
                np.random.seed(seed)
                out = transform(src, label.copy(), segm)
                outputs.append(([o.asnumpy() if hasattr(o, 'asnumpy') else o for o in out],
                                random.getstate(), np.random.get_state()[1].tobytes()))
            val = [rcnn.MaskRCNNDefaultValTransform(40, 90)(image, label, None),
                   gcv.rcnn.MaskRCNNDefaultValTransform(40, 90)(reference, label, None)]
        (ours, our_py, our_np), (theirs, their_py, their_np) = outputs
        assert our_py == their_py and our_np == their_np
        np.testing.assert_allclose(ours[0], theirs[0], rtol=0, atol=ATOL)
        np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-6, atol=1e-5)
        np.testing.assert_array_equal(ours[2], theirs[2])  # the masks
        np.testing.assert_allclose(val[0][0], val[1][0].asnumpy(), rtol=0, atol=ATOL)
        np.testing.assert_allclose(val[0][1], val[1][1].asnumpy(), rtol=1e-6)


@pytest.mark.parametrize('name', sorted(PRESETS))
def test_float32_numpy_and_ndarray_give_the_same_sample_and_stay_unmodified(name):
    ours = PRESETS[name][0]
    rng = np.random.RandomState(5)
    image = image_of(rng, 60, 80, 'float32', 'normalized')
    label = label_of(rng, 60, 80, 3, positive=True)
    image_before, label_before = image.copy(), label.copy()
    samples = []
    for src in (image, mx.nd.array(image), mx.np.array(image), np.asfortranarray(image)):
        random.seed(4)
        np.random.seed(4)
        samples.append(ours()(src, label))
    np.testing.assert_array_equal(image, image_before)
    np.testing.assert_array_equal(label, label_before)
    for sample in samples[1:]:
        for a, b in zip(sample, samples[0]):
            np.testing.assert_array_equal(a, b)
    for out in samples[0]:
        assert not np.shares_memory(out, image)


@pytest.mark.parametrize('name', sorted(PRESETS))
@pytest.mark.parametrize('bad', [np.zeros((8, 8, 3), bool), np.zeros((8, 8, 3), np.complex64),
                                 np.zeros((8, 8, 3), object), np.zeros((8, 8, 3), 'U1'),
                                 mx.nd.zeros((8, 8, 3), dtype='bool')],
                         ids=['bool', 'complex64', 'object', 'str', 'ndarray-bool'])
def test_images_that_hold_no_real_numbers_are_refused(name, bad):
    with pytest.raises(TypeError, match=r'image must hold real numbers .*got .*dtype '
                                        r'(bool|complex64|object|<U1)'):
        PRESETS[name][0]()(bad, np.array([[1., 1., 5., 5., 0.]]))


@pytest.mark.parametrize('preset, args', [
    (ssd.SSDDefaultTrainTransform, (96, 64)), (yolo.YOLO3DefaultTrainTransform, (64, 96)),
    (center_net.CenterNetDefaultTrainTransform, (64, 64, 20)),
    (rcnn.FasterRCNNDefaultTrainTransform, (64, 96)),
    (rcnn.MaskRCNNDefaultTrainTransform, (64, 96))])
def test_unnormalized_float_image_normalizes_to_the_normal_output(preset, args):
    """``normalize=False`` of a float image: float32 HWC in the pixel range (R-CNN: the
    resized, flipped values), which ``to_tensor`` then ``normalize`` turn into the normal
    output."""
    rng = np.random.RandomState(8)
    for seed in range(4):
        image = image_of(rng, 90, 120, 'float64', 'wide')
        label = label_of(rng, 90, 120, 2, positive=True)
        extra = ([[np.array([[b[0], b[1]], [b[2], b[1]], [b[2], b[3]]])] for b in label],) \
            if preset is rcnn.MaskRCNNDefaultTrainTransform else ()
        outputs = []
        for normalize in (False, True):
            random.seed(seed)
            np.random.seed(seed)
            outputs.append(preset(*args, normalize=normalize)(image, label, *extra))
        raw, normal = outputs
        assert raw[0].dtype == np.float32 and raw[0].ndim == 3 and raw[0].shape[2] == 3
        tensor = mx.nd.image.to_tensor(mx.nd.array(raw[0]))
        normalized = mx.nd.image.normalize(tensor, MEAN, STD).asnumpy()
        np.testing.assert_allclose(normalized, normal[0], rtol=0, atol=2e-5)
        for a, b in zip(raw[1:], normal[1:]):
            np.testing.assert_array_equal(a, b)


def test_normalizer_is_mxnet_to_tensor_then_normalize_for_uint8_and_float32():
    rng = np.random.RandomState(2)
    normalizer = pixels.Normalizer(MEAN, STD)
    for img in (rng.randint(0, 256, (5, 7, 3)).astype(np.uint8),
                rng.uniform(-400, 700, (5, 7, 3)).astype(np.float32)):
        want = mx.nd.image.normalize(mx.nd.image.to_tensor(mx.nd.array(img, dtype=img.dtype)),
                                     MEAN, STD).asnumpy()
        got = normalizer(img)
        assert got.dtype == np.float32 and got.shape == (3, 5, 7)
        if img.dtype == np.uint8:
            np.testing.assert_array_equal(got, want)  # the table: bit for bit
        else:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        out = np.full((3, 5, 7), np.nan, np.float32)
        assert normalizer(img, out=out) is out
        np.testing.assert_array_equal(out, got)
