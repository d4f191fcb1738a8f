"""The presets' colour pass into CHW planes (``pixels.affine_chw``): where it runs compiled,
bit for bit ``cv2.transform``, mirrored and split into planes, as OpenCV computes it."""
import platform

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import color, pixels


def has_fma():
    """Whether this is an x86-64 processor with FMA instructions (Linux's flags)."""
    try:
        with open('/proc/cpuinfo') as info:
            flags = info.read().split()
    except OSError:
        return False
    return platform.machine() == 'x86_64' and 'fma' in flags


def opencv_chw(img, m, flip_x):
    """The definition: ``cv2.transform`` of the float32 image, mirrored, CHW."""
    mapped = cv2.transform(np.ascontiguousarray(img, np.float32), m)
    return np.ascontiguousarray((mapped[:, ::-1] if flip_x else mapped).transpose(2, 0, 1))


def bits(array):
    return np.ascontiguousarray(array).view(np.uint32)


@pytest.mark.skipif(not has_fma(), reason='the compiled pass needs FMA instructions')
def test_the_colour_pass_runs_compiled_on_a_processor_with_fma():
    """Elsewhere the pass is OpenCV's, which the other tests check just as well."""
    assert pixels.COMPILED_COLOUR


@settings(deadline=None, max_examples=300)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(1, 50),
                                                          st.integers(1, 50)),
       flip_x=st.booleans(), dtype=st.sampled_from([np.float32, np.uint8]),
       shifted=st.booleans(), kind=st.sampled_from(['full', 'diagonal', 'near-diagonal']))
def test_the_colour_pass_is_cv2_transforms_to_the_bit(seed, size, flip_x, dtype, shifted,
                                                      kind):
    """Every run length (OpenCV's vector loop and its last pixels round differently), rows
    of one pixel and more, mirrored and not, uint8 and float32 images, with a shift; full
    matrices and those OpenCV applies channel by channel (off-diagonal entries 0 or within
    FLT_EPSILON, which it ignores)."""
    rng = np.random.default_rng(seed)
    img = rng.uniform(-50, 300, size + (3,)).astype(dtype)
    m = rng.standard_normal((3, 4)) * (1, 1, 1, 40)
    if kind != 'full':
        off = ~np.eye(3, 4, dtype=bool)
        off[:, 3] = False
        m[off] = 0.0 if kind == 'diagonal' else rng.uniform(-1e-7, 1e-7, 6)
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


@pytest.mark.parametrize('m', [
    np.hstack([np.diag([0.5, 2.0, 1.5]), np.ones((3, 1))]),        # diagonal
    color.saturation(1 - 2e-7),                                       # off-diagonal ~1e-7
    np.hstack([np.eye(3) + np.array([[0, 1e-9, 1e-9], [0, 0, 0], [0, 0, 0]]),
               np.zeros((3, 1))]),
    np.eye(3),                                                        # 3x3: no offsets
    [[1.0, 0.5, 0.0, 3.0], [0.0, 1.0, 0.25, -2.0], [0.125, 0.0, 1.0, 1.0]],  # a list
    [[0.5, np.nan, 0.0, 1.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.5, 0.0]],  # nan: ignored
], ids=['diagonal', 'near-diagonal', 'tiny-off-diagonal', '3x3', 'list', 'nan-off-diagonal'])
def test_matrices_opencv_treats_apart_give_its_bits(m):
    """``cv2.transform`` takes a matrix whose off-diagonal entries are within FLT_EPSILON
    of 0 (or nan) for a diagonal one, and scales channel by channel: such matrices, 3x3
    ones and lists give what it gives."""
    rng = np.random.default_rng(4)
    img = rng.uniform(0, 255, (60, 70, 3)).astype(np.float32)
    want = opencv_chw(img, np.asarray(m, np.float64), True)
    np.testing.assert_array_equal(bits(pixels.affine_chw(img, m, True)), bits(want))


def test_an_output_sharing_the_images_memory_gets_what_a_copy_would():
    rng = np.random.default_rng(5)
    memory = rng.uniform(0, 255, 3 * 40 * 50).astype(np.float32)
    img, out = memory.reshape(40, 50, 3), memory.reshape(3, 40, 50)
    m = rng.standard_normal((3, 4))
    want = opencv_chw(img.copy(), m, False)
    pixels.affine_chw(img, m, False, out=out)
    np.testing.assert_array_equal(bits(out), bits(want))


def test_opencvs_settings_changed_after_import_keep_its_path():
    """With OpenCV's optimized code switched off (another path in cv2.transform) the pass
    gives what OpenCV gives then."""
    rng = np.random.default_rng(6)
    img = rng.uniform(0, 255, (50, 50, 3)).astype(np.float32)
    m = rng.standard_normal((3, 4))
    cv2.setUseOptimized(False)
    try:
        assert pixels.opencv_state() != pixels.CHECKED_STATE
        want = opencv_chw(img, m, False)
        got = pixels.affine_chw(img, m, False)
    finally:
        cv2.setUseOptimized(True)
    np.testing.assert_array_equal(bits(got), bits(want))
    assert pixels.opencv_state() == pixels.CHECKED_STATE


def numpy_inverse(m):
    """The inverse as numpy's own calls compute it, the cofactors by ``np.cross``; None
    where the determinant is 0 or not finite (``invert`` refuses those)."""
    rows = m[:, :3]
    cofactors = np.cross(rows[[1, 2, 0]], rows[[2, 0, 1]])
    det = float(rows[0] @ cofactors[0])
    if det == 0 or not np.isfinite(det):
        return None
    linear = cofactors.T / det
    return np.concatenate([linear, (-linear @ m[:, 3])[:, None]], axis=1)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=12, max_size=12),
       st.tuples(*[st.sampled_from([1.0, 1e-300, 1e-150, 1e150, 1e200])] * 3))
def test_an_inverted_colour_map_has_numpys_bits(entries, row_scales):
    """The inverse (the fill's colour of every expanded image) is numpy's to the bit, with
    its cofactors in Python's floats: each product and difference rounded as numpy's
    ``cross`` rounds them. Rows of very different magnitudes give cofactors that overflow
    or vanish while the determinant stays finite; a map numpy cannot invert is refused."""
    m = np.array(entries).reshape(3, 4) * np.array(row_scales)[:, None]
    with np.errstate(all='ignore'):
        want = numpy_inverse(m)
    if want is None:
        with pytest.raises(ValueError, match='not invertible'):
            color.invert(m)
        return
    np.testing.assert_array_equal(color.invert(m).view(np.uint64), want.view(np.uint64))
