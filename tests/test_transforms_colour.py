"""The presets' colour pass into CHW planes (``pixels.affine_chw``): where it runs compiled,
bit for bit ``cv2.transform``, mirrored and split into planes, as OpenCV computes it."""
import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import pixels


def opencv_chw(img, m, flip_x):
    """The definition: ``cv2.transform`` of the float32 image, mirrored, CHW."""
    mapped = cv2.transform(np.ascontiguousarray(img, np.float32), m)
    return np.ascontiguousarray((mapped[:, ::-1] if flip_x else mapped).transpose(2, 0, 1))


def bits(array):
    return np.ascontiguousarray(array).view(np.uint32)


def test_the_colour_pass_runs_compiled_on_this_machine():
    """The machines the tests run on have FMA instructions; elsewhere the pass is
    OpenCV's, which the other tests check just as well."""
    assert pixels.COMPILED_COLOUR


@settings(deadline=None, max_examples=300)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(1, 50),
                                                          st.integers(1, 50)),
       flip_x=st.booleans(), dtype=st.sampled_from([np.float32, np.uint8]),
       shifted=st.booleans())
def test_the_colour_pass_is_cv2_transforms_to_the_bit(seed, size, flip_x, dtype, shifted):
    """Every run length (OpenCV's vector loop and its last pixels round differently), rows
    of one pixel and more, mirrored and not, uint8 and float32 images, with a shift."""
    rng = np.random.default_rng(seed)
    img = rng.uniform(-50, 300, size + (3,)).astype(dtype)
    m = rng.standard_normal((3, 4)) * (1, 1, 1, 40)
    shift = rng.uniform(-100, 100, 3) if shifted else None
    folded = m.copy()
    if shift is not None:
        folded[:, 3] += m[:, :3] @ shift
    got = pixels.affine_chw(img, m, flip_x, shift)
    np.testing.assert_array_equal(bits(got), bits(opencv_chw(img, folded, flip_x)))


@pytest.mark.parametrize('flip_x', [False, True])
def test_the_colour_pass_writes_a_batch_slot_and_nothing_else(flip_x):
    """Into a slot of a batch (the planes of one sample), the neighbours untouched; into
    planes whose rows are apart, the same values; from an image read backwards (not
    contiguous: OpenCV's path), the same values too."""
    rng = np.random.default_rng(1)
    img = rng.integers(0, 256, (300, 300, 3), dtype=np.uint8)
    m = rng.standard_normal((3, 4))
    batch = np.full((3, 3, 300, 300), 7.0, np.float32)
    pixels.affine_chw(img, m, flip_x, out=batch[1])
    np.testing.assert_array_equal(bits(batch[1]), bits(opencv_chw(img, m, flip_x)))
    assert (batch[0] == 7).all() and (batch[2] == 7).all()
    padded = np.zeros((3, 300, 320), np.float32)[:, :, :300]
    pixels.affine_chw(img, m, flip_x, out=padded)
    np.testing.assert_array_equal(bits(padded), bits(batch[1]))
    backwards = np.ascontiguousarray(img[:, ::-1])[:, ::-1]
    np.testing.assert_array_equal(bits(pixels.affine_chw(backwards, m, flip_x)),
                                  bits(batch[1]))


def test_the_colour_pass_leaves_its_input_as_it_was():
    rng = np.random.default_rng(2)
    img = rng.uniform(0, 255, (20, 30, 3)).astype(np.float32)
    before = img.copy()
    pixels.affine_chw(img, rng.standard_normal((3, 4)), True)
    np.testing.assert_array_equal(img, before)
