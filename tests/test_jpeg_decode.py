"""The fast JPEG path gives MXNet's pixels, and leaves what it cannot match to MXNet."""
import io

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

from gluonbatch._core import jpeg
from gluonbatch.shards.decode import decode_image

from helpers import examples

pytestmark = pytest.mark.skipif(jpeg.simplejpeg is None, reason='simplejpeg is not installed')


def encoded(pixels, mode='RGB', **options):
    picture = Image.fromarray(pixels).convert(mode)
    out = io.BytesIO()
    picture.save(out, 'JPEG', **options)
    return out.getvalue()


def picture(rng, height, width):
    """Smooth colours with noise: chroma that subsampling and upsampling change."""
    coarse = Image.fromarray(rng.integers(0, 256, (5, 5, 3), dtype=np.uint8))
    smooth = np.asarray(coarse.resize((width, height), Image.BILINEAR))
    return (smooth // 2 + rng.integers(0, 64, (height, width, 3), dtype=np.uint8)).astype(
        np.uint8)


def assert_mxnet_pixels(data, fast=True):
    reference = mx.image.imdecode(data)
    assert (jpeg.decode_rgb(data) is not None) == fast
    ours = jpeg.imdecode(data)
    assert type(ours) is type(reference)
    assert ours.shape == reference.shape and ours.dtype == reference.dtype
    np.testing.assert_array_equal(ours.asnumpy(), reference.asnumpy())


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2 ** 32 - 1), height=st.integers(1, 97), width=st.integers(1, 97),
       subsampling=st.sampled_from([0, 1, 2]), progressive=st.booleans(),
       quality=st.integers(5, 100), gray=st.booleans(), optimize=st.booleans(),
       restart=st.sampled_from([0, 1, 3]), orientation=st.sampled_from([None, 1, 3, 6, 8]))
def test_the_fast_path_gives_mxnets_pixels(seed, height, width, subsampling, progressive,
                                           quality, gray, optimize, restart, orientation):
    rng = np.random.default_rng(seed)
    options = dict(quality=quality, progressive=progressive, optimize=optimize)
    if not gray:
        options['subsampling'] = subsampling
    if restart:
        options['restart_marker_blocks'] = restart
    if orientation is not None:  # neither decoder turns the picture
        exif = Image.Exif()
        exif[0x0112] = orientation
        options['exif'] = exif.tobytes()
    assert_mxnet_pixels(encoded(picture(rng, height, width), 'L' if gray else 'RGB',
                                **options))


def test_a_voc_size_picture_in_every_subsampling():
    rng = np.random.default_rng(0)
    pixels = picture(rng, 375, 500)
    for subsampling in (0, 1, 2):
        assert_mxnet_pixels(encoded(pixels, subsampling=subsampling, quality=90))


def test_cmyk_and_other_formats_are_left_to_mxnet():
    rng = np.random.default_rng(1)
    assert_mxnet_pixels(encoded(picture(rng, 12, 17), 'CMYK'), fast=False)
    png = io.BytesIO()
    Image.fromarray(picture(rng, 6, 7)).save(png, 'PNG')
    assert_mxnet_pixels(png.getvalue(), fast=False)


@pytest.mark.parametrize('keep', [0.5, 0.95])
def test_a_truncated_jpeg_is_left_to_mxnet(keep):
    """libjpeg-turbo through simplejpeg refuses what MXNet decodes with a warning (the
    missing rows grey): the result is MXNet's."""
    data = encoded(picture(np.random.default_rng(2), 64, 80))
    assert_mxnet_pixels(data[:int(len(data) * keep)], fast=False)


def test_numpy_mode_gives_an_mx_np_array():
    data = encoded(picture(np.random.default_rng(3), 9, 11))
    mx.npx.set_np()
    try:
        image = decode_image('jpg', data)
        assert isinstance(image, mx.np.ndarray)
        np.testing.assert_array_equal(image.asnumpy(), mx.image.imdecode(data).asnumpy())
    finally:
        mx.npx.reset_np()


def test_a_jpeg_is_decoded_without_mxnet(monkeypatch):
    """The fast path does not fall back: with MXNet's decoder gone, a JPEG of every
    subsampling still decodes, to the pixels MXNet gave."""
    rng = np.random.default_rng(5)
    files = [encoded(picture(rng, 37, 53), subsampling=subsampling)
             for subsampling in (0, 1, 2)]
    want = [mx.image.imdecode(data).asnumpy() for data in files]

    def refuse(*args, **kwargs):
        raise AssertionError('MXNet decoded a JPEG the fast path decodes')

    monkeypatch.setattr(mx.image, 'imdecode', refuse)
    for data, pixels in zip(files, want):
        np.testing.assert_array_equal(jpeg.imdecode(data).asnumpy(), pixels)


def test_each_image_is_its_own_memory():
    """Each decode writes into a new NDArray of its own: two decodes never share pixels."""
    data = encoded(picture(np.random.default_rng(4), 8, 8))
    first, second = jpeg.imdecode(data), jpeg.imdecode(data)
    before = second.asnumpy().copy()
    first[:] = 0
    np.testing.assert_array_equal(second.asnumpy(), before)
    assert first.context == second.context == mx.cpu(0)
