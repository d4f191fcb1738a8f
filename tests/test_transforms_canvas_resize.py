"""OpenCV's nearest, area and Lanczos resizes computed from the uint8 image
(``gluonbatch.transforms.canvas_resize``): bit for bit OpenCV's resize of the float32 crop
they replace, wherever they apply, and left to OpenCV wherever OpenCV computes otherwise."""
import cv2
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import canvas_resize, crops, pixels

INTERPS = {pixels.NEAREST: cv2.INTER_NEAREST, pixels.AREA: cv2.INTER_AREA,
           pixels.LANCZOS: cv2.INTER_LANCZOS4}


def bits(array):
    """The float32 array's bits: equal bits, not merely equal values (-0.0 is not 0.0)."""
    return np.ascontiguousarray(array).view(np.uint32)


def float_crop(src, offset, size, shift):
    """The float32 crop the compiled code replaces, built by numpy: ``src - shift`` (the
    crops' conversion, ``pixels.shift_into``, of a forward copy) at ``offset``, zeros
    elsewhere."""
    width, height = size
    crop = np.zeros((height, width, 3), np.float32)
    overlap = crops.crop_overlap((0, 0, width, height), offset, src.shape)
    if overlap is not None:
        rows, cols, src_rows, src_cols = overlap
        pixels.shift_into(crop[rows, cols], np.ascontiguousarray(src[src_rows, src_cols]),
                          shift)
    return crop


def opencv(src, offset, size, scale, interp, shift):
    """OpenCV's resize of the float32 canvas crop, as ``resize_crop`` makes it without the
    compiled resizes."""
    return cv2.resize(float_crop(src, offset, size, shift), None, fx=scale[0], fy=scale[1],
                      interpolation=INTERPS[interp])


def compiled(src, offset, size, scale, interp, shift):
    values = canvas_resize.byte_values(shift)
    return canvas_resize.resize(src, offset, size, scale, interp, values)


def assert_opencvs_bits(rng, src, size, scale, interp, place, shifted):
    """The compiled resize of the image placed at ``place`` (fractions of the part) equals
    OpenCV's resize of the float32 crop, to the bit, where it applies."""
    assume(canvas_resize.applies(src, size, scale, interp))
    offset = (int(place[0] * size[0]), int(place[1] * size[1]))
    shift = rng.uniform(-300, 300, 3) if shifted else None
    got = compiled(src, offset, size, scale, interp, shift)
    want = opencv(src, offset, size, scale, interp, shift)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(bits(got), bits(want))


def image(rng, reverse_rows, reverse_cols):
    src = rng.integers(0, 256, (int(rng.integers(1, 70)), int(rng.integers(1, 70)), 3),
                       dtype=np.uint8)
    return src[::-1 if reverse_rows else 1, ::-1 if reverse_cols else 1]


@settings(deadline=None, max_examples=300)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(2, 160),
                                                          st.integers(2, 160)),
       outputs=st.tuples(st.integers(1, 159), st.integers(1, 159)),
       place=st.tuples(st.floats(-1.2, 1.2), st.floats(-1.2, 1.2)),
       reverse=st.tuples(st.booleans(), st.booleans()), shifted=st.booleans())
def test_the_area_resize_is_opencvs_resize_of_the_float32_crop_to_the_bit(
        seed, size, outputs, place, reverse, shifted):
    """Every placement of the image (in the part, across its edges, outside it), reversed
    views (the mirrored parts), shifted values, and scales that are no whole numbers."""
    rng = np.random.default_rng(seed)
    src = image(rng, *reverse)
    scale = tuple(min(o, s - 1) / s * (1 - 1e-9 * (k + 1)) for k, (o, s)
                  in enumerate(zip(outputs, size)))
    assert_opencvs_bits(rng, src, size, scale, pixels.AREA, place, shifted)


@pytest.mark.parametrize('interp', [pixels.NEAREST, pixels.LANCZOS])
@settings(deadline=None, max_examples=300)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(1, 120),
                                                          st.integers(1, 120)),
       scale=st.tuples(st.floats(0.05, 5.0), st.floats(0.05, 5.0)),
       place=st.tuples(st.floats(-1.2, 1.2), st.floats(-1.2, 1.2)),
       reverse=st.tuples(st.booleans(), st.booleans()), shifted=st.booleans())
def test_nearest_and_lanczos_are_opencvs_resizes_of_the_float32_crop_to_the_bit(
        interp, seed, size, scale, place, reverse, shifted):
    """Growing and shrinking, rows of every length (OpenCV's vector loop and its scalar
    tail sum Lanczos's rows in different orders), outputs whose taps reach past the part's
    ends, rows and columns of fill, reversed views and shifted values."""
    rng = np.random.default_rng(seed)
    assert_opencvs_bits(rng, image(rng, *reverse), size, scale, interp, place, shifted)


@pytest.mark.parametrize('interp', canvas_resize.COMPILED)
@settings(deadline=None, max_examples=100)
@given(seed=st.integers(0, 2 ** 32 - 1), crop=st.tuples(
           st.integers(0, 300), st.integers(0, 300), st.integers(20, 700), st.integers(20, 700)),
       offset=st.tuples(st.integers(0, 400), st.integers(0, 400)),
       size=st.tuples(st.integers(8, 300), st.integers(8, 300)), shifted=st.booleans())
def test_a_uint8_image_resizes_as_its_float32_copy_through_opencv(interp, seed, crop, offset,
                                                                  size, shifted):
    """``resize_crop`` end to end (parts from either end, bands of rows, placement): a
    uint8 image, whose parts the compiled resizes read, gives the same bits as its float32
    copy, which goes through OpenCV's float32 crop and resize."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, (int(rng.integers(20, 200)), int(rng.integers(20, 200)), 3),
                       dtype=np.uint8)
    shift = rng.uniform(-100, 100, 3) if shifted else None
    got = crops.resize_crop(src, crop, offset, size, interp, shift)
    want = crops.resize_crop(src.astype(np.float32), crop, offset, size, interp, shift)
    np.testing.assert_array_equal(bits(got), bits(want))


def test_the_byte_values_are_what_the_crop_stores():
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    shift = rng.uniform(-100, 100, 3)
    values = canvas_resize.byte_values(shift)
    stored = float_crop(src, (0, 0), (50, 40), shift)
    np.testing.assert_array_equal(bits(values[np.arange(3), src]), bits(stored))
    np.testing.assert_array_equal(canvas_resize.byte_values(None),
                                  np.tile(np.arange(256.0), (3, 1)))


@settings(deadline=None, max_examples=300)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(1, 90),
                                                          st.integers(1, 90)),
       place=st.tuples(st.floats(-1.2, 1.2), st.floats(-1.2, 1.2)),
       reverse=st.tuples(st.booleans(), st.booleans()),
       shift=st.sampled_from(['none', 'zeros', 'uniform', 'table', 'signed zero', 'nan']))
def test_a_part_holds_the_float32_crops_values_to_the_bit(seed, size, place, reverse, shift):
    """``part`` (the crop the resizes left to OpenCV read, and ``canvas_crop``'s of a uint8
    image) for every placement, reversed views, and values with and without a shift (the
    bytes minus a shift take a vector loop of their own), and values that are no bytes
    minus a shift, looked up in their table: any floats, the bytes with byte 0 as -0, or a
    channel of NaN."""
    rng = np.random.default_rng(seed)
    src = image(rng, *reverse)
    offset = (int(place[0] * size[0]), int(place[1] * size[1]))
    if shift in ('table', 'signed zero', 'nan'):
        values = canvas_resize.byte_values(None)
        if shift == 'table':
            values = rng.uniform(-300, 300, values.shape).astype(np.float32)
        if shift == 'nan':
            values[1] = np.nan
        else:
            values[:, 0] = -0.0
        shown = float_crop(np.ones_like(src), offset, size, None) == 1
        looked_up = values[np.arange(3), float_crop(src, offset, size, None).astype(int)]
        want = np.where(shown, looked_up, np.float32(0))
        got = np.full_like(want, np.nan)
        canvas_resize.part(src, offset, values, got)
        np.testing.assert_array_equal(bits(got), bits(want))
        return
    shift = {'none': None, 'zeros': np.zeros(3),
             'uniform': rng.uniform(-300, 300, 3)}[shift]
    want = float_crop(src, offset, size, shift)
    got = np.full_like(want, np.nan)
    canvas_resize.part(src, offset, canvas_resize.byte_values(shift), got)
    np.testing.assert_array_equal(bits(got), bits(want))
    crop = (3, 2) + tuple(size)  # the same part, as a crop of a canvas further out
    with crops.canvas_crop(src, crop, (offset[0] + 3, offset[1] + 2), shift) as from_crop:
        np.testing.assert_array_equal(bits(from_crop), bits(want))


def test_a_lanczos_sample_within_a_millionth_of_a_pixel_is_that_pixel():
    """OpenCV takes a sample less than 1e-6 from a pixel (row 13 of 4 rows resized by
    3.857143736193509 lies 7e-7 before row 3) for the pixel itself: so do the compiled
    resizes, across and down."""
    rng = np.random.default_rng(0)
    src = rng.integers(0, 256, (59, 44, 3), dtype=np.uint8)
    near = 3.857143736193509
    for size, scale in (((1, 4), (1.0, near)), ((4, 1), (near, 1.0)), ((20, 4), (0.7, near))):
        got = compiled(src, (0, 0), size, scale, pixels.LANCZOS, None)
        np.testing.assert_array_equal(bits(got), bits(opencv(src, (0, 0), size, scale,
                                                             pixels.LANCZOS, None)))
    column = compiled(src, (0, 0), (1, 4), (1.0, near), pixels.LANCZOS, None)
    np.testing.assert_array_equal(column[13, 0], src[3, 0].astype(np.float32))


def test_a_part_needs_a_uint8_image_and_float32_values():
    src = np.zeros((4, 5, 3), np.uint8)
    out = np.empty((3, 3, 3), np.float32)
    values = canvas_resize.byte_values(None)
    assert canvas_resize.builds_part(src, (3, 3))
    for other in (src.astype(np.float32), src[..., :1]):
        assert not canvas_resize.builds_part(other, (3, 3))
        with pytest.raises(ValueError, match='uint8 HWC image with 3 channels'):
            canvas_resize.part(other, (0, 0), values, out)
    assert not canvas_resize.builds_part(src, (canvas_resize.LARGEST + 1, 3))
    with pytest.raises(TypeError, match="'f' items"):
        canvas_resize.part(src, (0, 0), values.astype(np.float64), out)
    with pytest.raises(TypeError, match="'f' items"):
        canvas_resize.part(src, (0, 0), values, out.astype(np.float64))
    with pytest.raises(TypeError):
        canvas_resize.part(src, (0.5, 0), values, out)


def test_opencvs_other_paths_stay_opencvs():
    """Area with whole-number scales (OpenCV's exact-multiple path), a side that grows (it
    interpolates) or keeps its size; outputs the size of their source (copied); float32
    images; linear and cubic (which OpenCV's build hands to IPP): not compiled."""
    src = np.zeros((30, 40, 3), np.uint8)
    area, lanczos = pixels.AREA, pixels.LANCZOS
    assert canvas_resize.applies(src, (400, 300), (0.29, 0.31), area)
    assert not canvas_resize.applies(src, (400, 300), (0.25, 0.31), area)  # 4 pixels a cell
    assert not canvas_resize.applies(src, (400, 300), (0.29, 0.5), area)
    assert not canvas_resize.applies(src, (400, 300), (1.5, 0.31), area)   # grows
    assert not canvas_resize.applies(src, (400, 300), (0.999, 0.31), area)  # 399.6: 400
    assert not canvas_resize.applies(src, (1, 300), (0.9, 0.31), area)     # nothing to shrink
    assert canvas_resize.applies(src, (400, 300), (1.5, 0.999), lanczos)
    assert not canvas_resize.applies(src, (400, 300), (0.999, 1.001), lanczos)  # a copy
    assert canvas_resize.applies(src, (400, 300), (2.0, 0.25), pixels.NEAREST)
    for interp in canvas_resize.COMPILED:
        assert not canvas_resize.applies(src.astype(np.float32), (400, 300), (0.29, 0.31),
                                         interp)
    for interp in (pixels.BILINEAR, 2):
        assert not canvas_resize.applies(src, (400, 300), (0.29, 0.31), interp)
    assert not canvas_resize.applies(src[..., :1], (400, 300), (0.29, 0.31), area)
    assert not canvas_resize.applies(src, (canvas_resize.LARGEST + 1, 3), (1e-9, 0.5), lanczos)
    values = canvas_resize.byte_values(None)
    for interp, scale in ((1, (0.29, 0.31)), (area, (3.0, 3.0)), (lanczos, (1e-17, 0.5))):
        with pytest.raises(ValueError, match='only where applies'):
            canvas_resize.resize(src, (0, 0), (2 ** 62, 300), scale, interp, values)
    with pytest.raises(TypeError):
        canvas_resize.resize(src, (0.5, 0), (400, 300), (0.29, 0.31), area, values)
    with pytest.raises(TypeError):
        canvas_resize.resize(src, (0, 0), (400, 300), (0.29, 0.31), area,
                             values.astype(np.float64))


def test_one_channel_images_and_changed_opencv_settings_keep_opencvs_path():
    """A uint8 image of one channel resizes as before (OpenCV's path), and while OpenCV's
    optimized code is switched off nothing is compiled."""
    rng = np.random.default_rng(8)
    gray = rng.integers(0, 256, (30, 40, 1), dtype=np.uint8)
    got = crops.resize_crop(gray, (0, 0, 60, 50), (5, 5), (21, 17), pixels.AREA)
    want = crops.resize_crop(gray.astype(np.float32), (0, 0, 60, 50), (5, 5), (21, 17),
                             pixels.AREA)
    np.testing.assert_array_equal(bits(got), bits(want))
    src = np.zeros((30, 40, 3), np.uint8)
    cv2.setUseOptimized(False)
    try:
        assert not canvas_resize.applies(src, (400, 300), (0.29, 0.31), pixels.AREA)
    finally:
        cv2.setUseOptimized(True)
    assert canvas_resize.applies(src, (400, 300), (0.29, 0.31), pixels.AREA)


@pytest.mark.parametrize('interp', canvas_resize.COMPILED)
def test_a_voc_image_expanded_twice_resizes_as_opencvs(interp):
    """The SSD preset's typical crop: a 500x375 image in a crop twice its size, into
    300x300, its image reversed as a part resized from the crop's end is."""
    rng = np.random.default_rng(7)
    src = rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)[::-1, ::-1]
    size, scale = (1003, 751), (300 / 1003, 300 / 751)
    shift = (123.7, -4.5, 60.0)
    got = compiled(src, (211, 77), size, scale, interp, shift)
    np.testing.assert_array_equal(bits(got), bits(opencv(src, (211, 77), size, scale, interp,
                                                         shift)))


@pytest.mark.parametrize('interp', canvas_resize.COMPILED)
@settings(deadline=None, max_examples=60)
@given(seed=st.integers(0, 2 ** 32 - 1), size=st.tuples(st.integers(2, 90),
                                                         st.integers(2, 90)),
       factors=st.tuples(st.floats(0.1, 0.95), st.floats(0.1, 0.95),
                         st.floats(0.1, 3.0), st.floats(0.1, 3.0)),
       margins=st.tuples(*[st.integers(0, 9)] * 4))
def test_a_resize_into_part_of_a_larger_image_writes_that_part_alone(interp, seed, size,
                                                                      factors, margins):
    """Written into ``big[top:bottom, left:right]`` (rows apart in memory), the resize
    holds the bits of a new array's, and every other value of ``big`` is untouched."""
    rng = np.random.default_rng(seed)
    src = image(rng, False, False)
    scale = factors[:2] if interp == pixels.AREA else factors[2:]  # area: both shrink
    assume(canvas_resize.applies(src, size, scale, interp))
    offset = (int(rng.integers(-5, 5)), int(rng.integers(-5, 5)))
    values = canvas_resize.byte_values(None)
    want = canvas_resize.resize(src, offset, size, scale, interp, values)
    top, bottom, left, right = margins
    big = np.full((top + want.shape[0] + bottom, left + want.shape[1] + right, 3), np.nan,
                  np.float32)
    target = big[top:top + want.shape[0], left:left + want.shape[1]]
    got = canvas_resize.resize(src, offset, size, scale, interp, values, out=target)
    assert got is target
    np.testing.assert_array_equal(bits(target), bits(want))
    outside = np.ones(big.shape[:2], bool)
    outside[top:top + want.shape[0], left:left + want.shape[1]] = False
    assert np.isnan(big[outside]).all()


@pytest.mark.parametrize('bad', ['shape', 'dtype', 'reversed rows', 'every other column'])
def test_an_out_of_another_shape_or_layout_is_a_value_error(bad):
    src = np.full((8, 8, 3), 5, np.uint8)
    big = np.zeros((8, 8, 3), np.float32)
    out = {'shape': big[:3, :4], 'dtype': np.zeros((4, 4, 3), np.float64),
           'reversed rows': big[3::-1, :4], 'every other column': big[:4, ::2]}[bad]
    with pytest.raises((ValueError, TypeError)):
        canvas_resize.resize(src, (0, 0), (8, 8), (0.5, 0.5), pixels.NEAREST,
                             canvas_resize.byte_values(None), out=out)
    assert not big.any()
