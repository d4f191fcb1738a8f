"""Deferred images: the train presets' ``deferred=True`` hands the last pass over the image
to the batchify function, which runs it straight into the batch.

The batches must be those of ``deferred=False`` to the bit, wherever the batch is made
(workers 0, 1, 2), whichever gluonbatch batchify function writes them; anything else reads
a deferred image as the array it stands for; it is never changed by being written.
"""
import random

import gluoncv.data.batchify as gcv_batchify
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from gluonbatch import batchify
from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.transforms import pixels
from gluonbatch.transforms.deferred import DeferredImage
from gluonbatch.transforms.presets import center_net, ssd, yolo

from helpers import examples


def preset(kind, deferred, normalize=True):
    """A train preset without targets, of small size."""
    if kind == 'ssd':
        return ssd.SSDDefaultTrainTransform(96, 64, normalize=normalize, deferred=deferred)
    if kind == 'yolo':
        return yolo.YOLO3DefaultTrainTransform(64, 96, normalize=normalize, deferred=deferred)
    return center_net.CenterNetDefaultTrainTransform(64, 64, 20, targets=False,
                                                     normalize=normalize, deferred=deferred)


def target_batchify(kind):
    """The batchify function computing ``kind``'s batch targets (no network needed)."""
    if kind == 'ssd':
        anchors = np.random.RandomState(0).uniform(4, 60, (1, 50, 4)).astype(np.float32)
        return batchify.SSDTrainBatchify(anchors)
    if kind == 'yolo':
        return batchify.Tuple(batchify.Stack(), batchify.Pad(pad_val=-1))
    return batchify.CenterNetTrainBatchify(20, 4)


def seeded_samples(kind, deferred, normalize=True, length=5):
    """Every sample of a small synthetic dataset through a seeded preset."""
    base = SyntheticDetection(length=length, seed=7)
    random.seed(3)
    np.random.seed(3)
    transform = preset(kind, deferred, normalize)
    return [transform(*base[i]) for i in range(length)]


class Seeded(mx.gluon.data.Dataset):
    """Seeds the generators with the index, so a sample does not depend on its worker."""

    def __init__(self, kind, deferred):
        self._base = SyntheticDetection(length=6, seed=7)
        self._kind, self._deferred = kind, deferred

    def __len__(self):
        return len(self._base)

    def __getitem__(self, idx):
        random.seed(idx)
        np.random.seed(idx)
        return preset(self._kind, self._deferred)(*self._base[idx])


@pytest.mark.parametrize('normalize', [True, False])
@pytest.mark.parametrize('kind', ['ssd', 'yolo', 'center_net'])
def test_a_deferred_image_is_the_image_of_the_plain_preset(kind, normalize):
    plain = seeded_samples(kind, False, normalize)
    deferred = seeded_samples(kind, True, normalize)
    for (want, want_boxes), (got, got_boxes) in zip(plain, deferred):
        assert isinstance(got, DeferredImage) and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)
        np.testing.assert_array_equal(np.asarray(got), want)  # and again: nothing consumed
        np.testing.assert_array_equal(got_boxes, want_boxes)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('kind', ['ssd', 'yolo', 'center_net'])
def test_the_batches_of_deferred_images_are_the_plain_batches(kind, num_workers):
    def batches(deferred):
        loader = mx.gluon.data.DataLoader(Seeded(kind, deferred), 3, shuffle=False,
                                          batchify_fn=target_batchify(kind),
                                          num_workers=num_workers)
        return [[field.asnumpy() for field in batch] for batch in loader]

    want, got = batches(False), batches(True)
    assert len(got) == len(want) == 2
    for got_batch, want_batch in zip(got, want):
        for got_field, want_field in zip(got_batch, want_batch):
            np.testing.assert_array_equal(got_field, want_field)


@pytest.mark.parametrize('kind', ['ssd', 'center_net'])
def test_gluoncv_and_the_other_batchify_functions_read_deferred_images_as_arrays(kind):
    plain = [sample[0] for sample in seeded_samples(kind, False)]
    deferred = [sample[0] for sample in seeded_samples(kind, True)]
    want = np.stack(plain)
    np.testing.assert_array_equal(gcv_batchify.Stack()(deferred).asnumpy(), want)
    np.testing.assert_array_equal(batchify.Stack(dtype='float16')(deferred).asnumpy(),
                                  want.astype(np.float16))
    # gluoncv's Pad takes NDArrays, numpy arrays and lists only: numpy.asarray first
    padded = gcv_batchify.Pad(axis=(1, 2))([np.asarray(image) for image in deferred])
    np.testing.assert_array_equal(padded.asnumpy(), want)
    appended = batchify.Append()(deferred)
    for got, image in zip(appended, plain):
        np.testing.assert_array_equal(got.asnumpy()[0], image)
    np.testing.assert_array_equal(mx.nd.array(deferred[0]).asnumpy(), plain[0])


def test_a_deferred_image_never_changes_its_pixels():
    pixels_in = np.random.RandomState(1).randint(0, 256, (5, 7, 3)).astype(np.uint8)
    before = pixels_in.copy()
    matrix = np.hstack([np.eye(3) * 0.5, np.ones((3, 1))])
    image = DeferredImage(pixels_in, matrix, flip_x=True, shift=(1, 2, 3))
    first, second = np.asarray(image), np.asarray(image)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(pixels_in, before)
    assert pixels_in.flags.writeable  # the caller's array is left as it was
    assert not image.pixels.flags.writeable
    np.testing.assert_array_equal(
        first, pixels.affine_chw(before.astype(np.float32), matrix, True, (1, 2, 3)))


@settings(max_examples=examples(40), deadline=None)
@given(hnp.arrays(st.sampled_from([np.uint8, np.float32]),
                  st.tuples(st.integers(1, 9), st.integers(1, 9), st.just(3)),
                  elements={'min_value': 0, 'max_value': 255}),
       hnp.arrays(np.float64, (3, 4), elements={'min_value': -2, 'max_value': 2}),
       st.booleans(), st.booleans(), st.integers(0, 3))
def test_a_deferred_image_written_into_a_padded_slot_is_the_affine_map(
        img, matrix, flip_x, chw, extra):
    image = DeferredImage(img, matrix, flip_x, chw=chw)
    affine = pixels.affine_chw if chw else pixels.affine_hwc
    want = affine(img.astype(np.float32), matrix, flip_x)
    wider = DeferredImage(np.zeros(img.shape[:1] + (img.shape[1] + extra, 3), img.dtype),
                          matrix, chw=chw)
    axis = 2 if chw else 1
    padded = batchify.Pad(axis=axis, pad_val=-7)([image, wider]).asnumpy()
    slot = padded[0]
    corner = slot[:, :, :img.shape[1]] if chw else slot[:, :img.shape[1]]
    np.testing.assert_array_equal(corner, want)
    rest = slot[:, :, img.shape[1]:] if chw else slot[:, img.shape[1]:]
    assert (rest == -7).all()
    np.testing.assert_array_equal(batchify.Stack()([image]).asnumpy()[0], want)


def test_a_deferred_image_refuses_what_it_cannot_map():
    image = np.zeros((2, 2, 3), np.uint8)
    matrix = np.zeros((3, 4))
    with pytest.raises(TypeError, match='pixels must be a uint8 or float32 numpy array, '
                                        'got a numpy.ndarray .* dtype float64'):
        DeferredImage(image.astype(np.float64), matrix)
    with pytest.raises(TypeError, match='pixels must be a uint8 or float32 numpy array, '
                                        'got a list'):
        DeferredImage(image.tolist(), matrix)
    with pytest.raises(ValueError, match=r'pixels must be HWC with 3 channels, got shape '
                                         r'\(2, 2, 4\)'):
        DeferredImage(np.zeros((2, 2, 4), np.uint8), matrix)
    with pytest.raises(ValueError, match=r'matrix must have shape \(3, 4\), got shape '
                                         r'\(3, 3\)'):
        DeferredImage(image, np.zeros((3, 3)))
    with pytest.raises(TypeError, match='matrix must be numbers, got a str'):
        DeferredImage(image, 'abc')
    with pytest.raises(ValueError, match=r'shift must have shape \(3,\), got shape \(2,\)'):
        DeferredImage(image, matrix, shift=(1, 2))
    with pytest.raises(TypeError, match='shift must be numbers'):
        DeferredImage(image, matrix, shift=('a', 'b', 'c'))


def test_a_deferred_image_is_its_own_whatever_happens_to_what_made_it():
    """Its pixels, matrix and shift are copies, read-only from outside, also once
    unpickled: changing the arrays it was made from changes nothing."""
    import pickle

    pixels_in = np.random.RandomState(4).randint(0, 256, (3, 5, 3)).astype(np.uint8)
    matrix, shift = np.hstack([np.eye(3), np.ones((3, 1))]), np.array([1., 2., 3.])
    image = DeferredImage(pixels_in, matrix, flip_x=True, shift=shift)
    want = np.asarray(image)
    pixels_in[...], matrix[...], shift[...] = 0, 0, 0
    np.testing.assert_array_equal(np.asarray(image), want)
    for copy in (image, pickle.loads(pickle.dumps(image))):
        np.testing.assert_array_equal(np.asarray(copy), want)
        for array in (copy.pixels, copy.matrix, copy.shift):
            with pytest.raises(ValueError, match='read-only'):
                array[...] = 0
    np.testing.assert_array_equal(np.asarray(image), want)


def test_batches_large_enough_for_the_copy_threads_write_every_image_alike():
    """Above a few MB a batch is written by several threads at once (each with its own
    scratch arrays): distinct images, and one of them several times, in Stack and Pad."""
    rng = np.random.RandomState(5)
    matrix = np.hstack([np.eye(3) * 0.5, np.full((3, 1), 3.0)])
    distinct = [DeferredImage(rng.randint(0, 256, (300, 300, 3)).astype(np.uint8), matrix,
                              flip_x=bool(k % 2)) for k in range(6)]
    images = distinct + [distinct[0]] * 3  # 9 MB of float32: above the threaded size
    want = [np.asarray(image) for image in images]
    np.testing.assert_array_equal(batchify.Stack()(images).asnumpy(), np.stack(want))
    smaller = DeferredImage(np.zeros((290, 280, 3), np.uint8), matrix)
    padded = batchify.Pad(axis=(1, 2), pad_val=-1, round_to=32)(images + [smaller])
    padded = padded.asnumpy()
    assert padded.shape == (10, 3, 320, 320)
    for got, image in zip(padded, want + [np.asarray(smaller)]):
        height, width = image.shape[1:]
        np.testing.assert_array_equal(got[:, :height, :width], image)
        assert (got[:, height:] == -1).all() and (got[:, :, width:] == -1).all()
