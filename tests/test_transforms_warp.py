"""CenterNet's warp of a uint8 image (``affine.warp_image``), compiled: the bytes of
``cv2.warpAffine(..., flags=cv2.INTER_LINEAR)`` for every map, size and placement, and
OpenCV's own path where the compiled one does not apply."""
import platform

import cv2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import affine

from helpers import examples


def opencv(src, matrix, size):
    return cv2.warpAffine(src, matrix, size, flags=cv2.INTER_LINEAR)


def a_map(rng, kind, shape):
    """A forward 2x3 map of one kind: scaled and moved (CenterNet's), mirrored, turned,
    sheared by float noise (``get_affine_transform``'s tiny off-diagonal terms), or
    singular."""
    height, width = shape[:2]
    if kind == 'scaled':
        scale = rng.uniform(0.2, 4)
        return np.array([[scale, 0, rng.uniform(-40, 40)], [0, scale, rng.uniform(-40, 40)]])
    if kind == 'mirrored':
        return np.array([[-rng.uniform(0.5, 2), 0, rng.uniform(0, 80)],
                         [0, rng.uniform(0.5, 2), rng.uniform(-20, 20)]])
    if kind == 'turned':
        return cv2.getRotationMatrix2D((rng.uniform(0, width), rng.uniform(0, height)),
                                       rng.uniform(-180, 180), rng.uniform(0.2, 4))
    if kind == 'noise':
        scale = rng.uniform(0.5, 2)
        return np.array([[scale, rng.choice([0.0, 1e-17, -3e-16]), rng.uniform(-9, 9)],
                         [rng.choice([0.0, -1.6e-17, 2e-15]), scale, rng.uniform(-9, 9)]])
    return np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 1.0]])  # singular: OpenCV inverts to 0


@settings(deadline=None, max_examples=examples(400))
@given(seed=st.integers(0, 2 ** 32 - 1),
       kind=st.sampled_from(['scaled', 'mirrored', 'turned', 'noise', 'singular']),
       shape=st.tuples(st.integers(1, 60), st.integers(1, 60)),
       size=st.tuples(st.integers(1, 70), st.integers(1, 70)), into=st.booleans())
def test_the_warp_of_a_uint8_image_is_opencvs_to_the_byte(seed, kind, shape, size, into):
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, shape + (3,), dtype=np.uint8)
    matrix = a_map(rng, kind, shape)
    out = np.full((size[1], size[0], 3), 7, np.uint8) if into else None
    got = affine.warp_image(src, matrix, size, out=out)
    assert got.dtype == np.uint8 and (out is None or got is out)
    np.testing.assert_array_equal(got, opencv(src, matrix, size))


@pytest.mark.parametrize('side', [380.2, 512.0, 640.5])
def test_centernets_warp_of_a_voc_image(side):
    rng = np.random.default_rng(11)
    src = rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)
    matrix = affine.get_affine_transform(np.array([251.3, 180.6], np.float32), side,
                                         (512, 512))
    np.testing.assert_array_equal(affine.warp_image(src, matrix, (512, 512)),
                                  opencv(src, matrix, (512, 512)))
    flipped = np.ascontiguousarray(src[:, ::-1])
    np.testing.assert_array_equal(affine.warp_image(src[:, ::-1], matrix, (512, 512)),
                                  opencv(flipped, matrix, (512, 512)))


def test_maps_near_the_ints_range_and_other_images_are_opencvs():
    rng = np.random.default_rng(12)
    src = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    for matrix in (np.array([[1e-9, 0, 0], [0, 1.0, 0]]),     # its inverse: 1e9 pixels a step
                   np.array([[np.nan, 0, 0], [0, 1.0, 0]]),
                   np.array([[1.0, 0, 1e7], [0, 1.0, 0]], np.float32)):
        np.testing.assert_array_equal(affine.warp_image(src, matrix, (25, 15)),
                                      opencv(src, matrix, (25, 15)))
    matrix = np.array([[1.3, 0, 2.0], [0, 0.7, 1.0]])
    for image in (src.astype(np.float32), src[..., :1].copy(), src[..., 0].copy()):
        np.testing.assert_array_equal(affine.warp_image(image, matrix, (25, 15)),
                                      opencv(image, matrix, (25, 15)))


@pytest.mark.parametrize('case', ['empty image', 'float16 map', 'side of 32767'])
def test_what_opencv_refuses_it_still_refuses(case):
    """The compiled warp takes nothing OpenCV would refuse: empty images, maps of other
    float types, sides of 2**15 - 1 (its remap's limit) raise OpenCV's error."""
    src, matrix, size = np.zeros((4, 5, 3), np.uint8), np.eye(2, 3), (4, 4)
    if case == 'empty image':
        src = np.zeros((0, 5, 3), np.uint8)
    elif case == 'float16 map':
        matrix = matrix.astype(np.float16)
    else:
        src = np.zeros((3, 2 ** 15 - 1, 3), np.uint8)
    with pytest.raises(cv2.error):
        opencv(src, matrix, size)
    with pytest.raises(cv2.error):
        affine.warp_image(src, matrix, size)


@pytest.mark.skipif(platform.machine() != 'x86_64', reason="checked on the pinned OpenCV's "
                    "x86-64 build")
def test_the_warp_runs_compiled_where_built():
    """The comparisons above hold for OpenCV's path too: this says the compiled one ran
    its checks and passed them."""
    assert affine.COMPILED_WARP
