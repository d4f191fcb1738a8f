"""OpenCV pixel kernels of the presets: each is one pass over the pixels it must touch.

The SSD-family pipeline resizes the crop of its expanded canvas
(:mod:`gluonbatch.transforms.crops`, which never builds the canvas), then applies the
whole colour chain as one 3x4 matrix (see :mod:`gluonbatch.transforms.color`) while
flipping and writing CHW into the output (:func:`affine_chw`, :func:`affine_hwc`).

``cv2.transform`` applies the matrix. OpenCV's build runs its vector loop with fused
multiply-adds (each channel ``m0 * x0 + (m1 * x1 + (m2 * x2 + m3))``, rounded once per
step) and its last few pixels otherwise. Where the processor has the FMA instructions,
:func:`affine_chw` computes the loop's pixels compiled (``_colour.c``), straight into the
CHW planes, mirrored there, and leaves the last pixels to ``cv2.transform``: one pass, the
same bits. A matrix ``cv2.transform`` takes for a diagonal one it applies channel by
channel, one fused multiply-add each, to every pixel: so does the compiled pass. It is
checked against OpenCV's path at import (every run length up to 40 pixels, mirrored and
not, full and diagonal matrices), and a machine where it differs keeps OpenCV's path; so
do an output that shares memory with the image, and OpenCV's settings changed since the
import (:func:`opencv_state`). The other presets resize (:func:`resize`) and normalize
(:class:`Normalizer`) here too. The HWC image between the colour map and the CHW split
lives in the thread's kept arrays (``scratch.empty``): fresh pages would cost more than
the pass.

Examples
--------
>>> import numpy as np
>>> img = np.full((1, 2, 3), 255, np.uint8)
>>> Normalizer((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))(img)[:, 0, 0]
array([1., 1., 1.], dtype=float32)
"""
import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
from numpy.typing import ArrayLike

from .._core import compiled, scratch
from .._core.checks import described
from . import color

__all__ = ['INTERPOLATIONS', 'NEAREST', 'BILINEAR', 'AREA', 'LANCZOS', 'COMPILED_COLOUR',
           'opencv_state', 'CHECKED_STATE', 'val_interp', 'resize', 'check_pixels',
           'shift_into', 'written', 'affine_chw', 'affine_hwc', 'normalize_lut', 'lut_chw',
           'Normalizer']

#: gluoncv's interpolation codes, which OpenCV takes as they are.
INTERPOLATIONS = {0: cv2.INTER_NEAREST, 1: cv2.INTER_LINEAR, 2: cv2.INTER_CUBIC,
                  3: cv2.INTER_AREA, 4: cv2.INTER_LANCZOS4}
#: The nearest-neighbour code.
NEAREST = 0
#: The bilinear code (MXNet's ``imresize`` default, the R-CNN presets' resize).
BILINEAR = 1
#: The area code (OpenCV averages where both sides shrink, and interpolates otherwise).
AREA = 3
#: The Lanczos code (8 taps a side).
LANCZOS = 4
#: OpenCV's float32 depth (its type stubs leave the constant out).
_FLOAT32: int = cv2.CV_32F  # type: ignore[attr-defined]

_colour = compiled.load('gluonbatch.transforms._colour')


def opencv_state() -> tuple[bool, bool]:
    """OpenCV's settings that choose which of its code paths run: ``cv2.useOptimized()``
    and ``cv2.ipp.useIPP()``. gluonbatch's compiled passes repeat the paths of the settings
    they were checked in at import (:data:`CHECKED_STATE`) and run only while those hold.

    >>> opencv_state() == CHECKED_STATE
    True
    """
    return bool(cv2.useOptimized()), bool(cv2.ipp.useIPP())


#: OpenCV's settings (:func:`opencv_state`) when this module was imported.
CHECKED_STATE = opencv_state()


def val_interp(in_size: Sequence[int], out_size: Sequence[int]) -> int:
    """MXNet's ``interp=9`` choice: cubic to enlarge both sides, area to shrink both,
    linear otherwise; sizes are ``(width, height)``.

    >>> val_interp((100, 50), (200, 100)), val_interp((100, 50), (50, 25))
    (2, 3)
    >>> val_interp((100, 50), (200, 25))
    1
    """
    (ow, oh), (nw, nh) = in_size, out_size
    if nh > oh and nw > ow:
        return 2
    if nh < oh and nw < ow:
        return AREA
    return BILINEAR


def resize(img: np.ndarray, size: Sequence[int], interp: int) -> np.ndarray:
    """``img`` (HWC, uint8 or float32) resized to ``size = (width, height)`` with the
    interpolation code ``interp`` (0-4, :data:`INTERPOLATIONS`), as MXNet's ``imresize``
    does it: OpenCV's ``cv2.resize``, a new C-contiguous array (any strides in: OpenCV's
    binding copies what it cannot read as it is).

    >>> img = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    >>> resize(img[:, ::-1], (4, 1), BILINEAR)[..., 0]
    array([[6, 5, 4, 3]], dtype=uint8)
    """
    return cv2.resize(img, tuple(size), interpolation=INTERPOLATIONS[interp])


def _shifted(m, shift):
    """``m(x + shift)`` as one matrix."""
    if shift is None:
        return m
    out = np.array(m, np.float64)
    out[:, 3] += out[:, :3] @ np.asarray(shift, np.float64)
    return out


def check_pixels(img: Any, name: str = 'img') -> None:
    """Raise unless ``img`` is what the colour maps take: a uint8 or float32 numpy array
    (else ``TypeError``), HWC with 3 channels (else ``ValueError``).

    >>> check_pixels(np.zeros((2, 2, 4), np.uint8))
    Traceback (most recent call last):
    ...
    ValueError: img must be HWC with 3 channels, got shape (2, 2, 4)
    """
    if not (isinstance(img, np.ndarray) and img.dtype in (np.uint8, np.float32)):
        raise TypeError('%s must be a uint8 or float32 numpy array, got %s'
                        % (name, described(img)))
    if img.ndim != 3 or img.shape[2] != 3:
        raise ValueError('%s must be HWC with 3 channels, got shape %s' % (name, img.shape))


@contextlib.contextmanager
def _float32_values(img):
    """A context giving ``img`` (HWC, 3 channels, uint8 or float32) as C-contiguous float32
    values for ``cv2.transform``, which keeps the input's depth (uint8 would saturate): the
    image itself when it is that already, else a copy in the thread's kept array."""
    check_pixels(img)
    if img.dtype == np.float32 and img.flags.c_contiguous:
        yield img
        return
    with scratch.empty('affine.values', img.shape, np.float32) as values:
        np.copyto(values, img)
        yield values


def affine_chw(img: np.ndarray, m: ArrayLike, flip_x: bool = False,
               shift: ArrayLike | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The 3x4 colour map ``m`` applied to ``img + shift``, written CHW.

    Parameters
    ----------
    img : numpy.ndarray
        HWC uint8 or float32, 3 channels; not written to.
    m : array-like
        3x4: ``m[:, :3] @ pixel + m[:, 3]`` per pixel.
    flip_x : bool
        Mirror left-right.
    shift : array-like of 3, optional
        Added to every pixel before ``m`` (see
        :func:`~gluonbatch.transforms.crops.fill_shift`).
    out : numpy.ndarray, optional
        ``(3, H, W)`` float32 to write into; a new C-contiguous array if ``None``.

    Returns
    -------
    numpy.ndarray
        ``out``.

    Examples
    --------
    >>> img = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    >>> plus_one = np.hstack([np.eye(3), np.ones((3, 1))])
    >>> affine_chw(img, plus_one, flip_x=True)[0]
    array([[4., 1.]], dtype=float32)
    """
    h, w = img.shape[:2]
    if out is None:
        out = np.empty((3, h, w), np.float32)
    m = np.asarray(_shifted(m, shift), np.float64)
    if (COMPILED_COLOUR and m.shape == (3, 4) and img.flags.c_contiguous
            and out.dtype == np.float32 and out.shape == (3, h, w) and out.strides[2] == 4
            and not np.may_share_memory(img, out)
            and opencv_state() == CHECKED_STATE):
        check_pixels(img)
        _compiled_chw(img, m, flip_x, out)
        return out
    # one cv2.transform pass, then a split into the planes: faster than any per-plane
    # arithmetic; the HWC result goes to a kept array, fresh pages cost more than the pass
    with _float32_values(img) as values, \
            scratch.empty('affine_chw', img.shape, np.float32) as mapped:
        result = cv2.transform(values, m, dst=mapped)
        if flip_x:
            # mirrored after the map, so the input stays untouched; OpenCV may round a
            # run's last pixels otherwise, so mirroring first could differ in the last bit
            cv2.flip(result, 1, dst=result)
        planes = [out[0], out[1], out[2]]
        for plane, split in zip(planes, cv2.split(result, planes)):
            written(plane, split)
    return out


def _diagonal(m):
    """Whether ``cv2.transform`` takes the 3x4 ``m`` for a diagonal map: no entry off its
    diagonal, as a float32, above ``FLT_EPSILON`` (nan is not above: OpenCV's test); it
    then scales each channel, ignoring them."""
    rows = m[:, :3].astype(np.float32).tolist()
    return all(not abs(rows[i][j]) > _FLT_EPSILON for i in range(3) for j in range(3) if i != j)


_FLT_EPSILON = float(np.finfo(np.float32).eps)


def _compiled_chw(img, m, flip_x, out):
    """:func:`affine_chw` of the C-contiguous ``img`` with the matrix ``m``: the vector
    loop's pixels compiled, the rest by ``cv2.transform``, run alone (a run of 3 to 6
    pixels is all last step); every pixel compiled for a map ``cv2.transform`` takes for
    diagonal, which it applies alike to all."""
    h, w = img.shape[:2]
    count = h * w
    diagonal = _diagonal(m)
    # the vector loop of OpenCV's x86-64 build: 4 pixels a step, 3 to 6 left to the last
    loop = count if diagonal else max(0, (count - 3) // 4 * 4)
    _colour.colour_chw(img, tuple(float(v) for v in m.ravel()), diagonal, flip_x, out, loop)
    if loop < count:
        rest = img.reshape(count, 3)[loop:].astype(np.float32).reshape(1, count - loop, 3)
        mapped = cv2.transform(rest, m).reshape(-1, 3)
        rows, cols = np.divmod(np.arange(loop, count), w)
        out[:, rows, w - 1 - cols if flip_x else cols] = mapped.T


def _colour_matches():
    """Whether the compiled colour pass gives OpenCV's bits here, mirrored and not, float32
    and uint8: full matrices on every run length up to 40 pixels (OpenCV's vector loop and
    its last pixels), diagonal ones (off-diagonal entries 0 or within ``FLT_EPSILON``,
    every pixel alike) up to 8, and rows of several."""
    if _colour is None or not _colour.available():
        return False
    rng = np.random.default_rng(0)
    off_diagonal = np.eye(3, 4) == 0
    off_diagonal[:, 3] = False
    probes = ([((1, w), None) for w in range(1, 41)]
              + [((1, w), kind) for w in range(1, 9) for kind in (0.0, 1e-8)]
              + [(shape, kind) for shape in ((5, 7), (3, 13), (37, 41))
                 for kind in (None, 0.0, 1e-8)])
    try:
        for ((h, w), kind), flip_x, dtype in itertools.product(probes, (False, True),
                                                                (np.float32, np.uint8)):
            img = rng.uniform(0, 255, (h, w, 3)).astype(dtype)
            m = rng.standard_normal((3, 4)) * (1, 1, 1, 50)
            if kind is not None:  # diagonal, or taken for it
                m[off_diagonal] = kind
            with _float32_values(img) as values:
                want = cv2.transform(values, m)
            want = np.ascontiguousarray((want[:, ::-1] if flip_x else want).transpose(2, 0, 1))
            got = np.empty((3, h, w), np.float32)
            _compiled_chw(img, m, flip_x, got)
            if not np.array_equal(got.view(np.uint32), want.view(np.uint32)):
                return False
    except Exception:  # an OpenCV build that refuses a probe: keep OpenCV's path
        return False
    return True


def affine_hwc(img: np.ndarray, m: ArrayLike, flip_x: bool = False,
               shift: ArrayLike | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """The 3x4 colour map ``m`` applied to ``img + shift``, written HWC.

    Parameters are those of :func:`affine_chw`, except that ``out`` is ``(H, W, 3)``.

    Returns
    -------
    numpy.ndarray
        ``out``, or a new C-contiguous float32 array if it is ``None``.

    Examples
    --------
    >>> img = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    >>> plus_one = np.hstack([np.eye(3), np.ones((3, 1))])
    >>> affine_hwc(img, plus_one, shift=(1, 0, 0))[0, 0]
    array([2., 2., 3.], dtype=float32)
    """
    m = _shifted(m, shift)
    # OpenCV maps the rows of a strided ``out`` one by one, and a row's last pixels round
    # otherwise than in one run: map into contiguous memory only, for the same bits
    direct = out is None or out.flags.c_contiguous
    with _float32_values(img) as values:
        if not flip_x and direct:
            return written(out, cv2.transform(values, m, dst=out))
        with scratch.empty('affine_hwc', values.shape, np.float32) as mapped:
            cv2.transform(values, m, dst=mapped)
            if not flip_x:
                return written(out, mapped)
            return written(out, cv2.flip(mapped, 1, dst=out if direct else None))


def shift_into(target: np.ndarray, block: np.ndarray,
               shift: Sequence[float] | None) -> None:
    """``block - shift`` (HWC, uint8 or float32) into the float32 ``target`` in one pass,
    as a crop of :mod:`~gluonbatch.transforms.crops` stores its image: numpy's conversion
    where nothing is subtracted (``shift`` ``None`` or zeros); else OpenCV's, in float32 as
    numpy's, which writes the strided target rows in place at twice numpy's speed.

    >>> target = np.empty((1, 1, 3), np.float32)
    >>> shift_into(target, np.full((1, 1, 3), 10, np.uint8), (1.0, 2.0, 3.0))
    >>> target[0, 0]
    array([9., 8., 7.], dtype=float32)
    """
    if shift is None or not np.any(shift):
        np.copyto(target, block, casting='unsafe')
        return
    scalar = tuple(float(v) for v in np.asarray(shift, np.float32)) + (0.0,)
    written(target, cv2.subtract(block, scalar, dst=target, dtype=_FLOAT32))


def written(out: np.ndarray | None, result: np.ndarray) -> np.ndarray:
    """``out`` holding ``result``, which an OpenCV call given ``dst=out`` returned: OpenCV
    writes into ``out`` where it fits (then ``result`` is ``out``) and returns a new array
    otherwise, copied in here. ``result`` itself if ``out`` is ``None``.

    >>> out = np.zeros((1, 2), np.float32)
    >>> written(out, cv2.add(np.ones((1, 2), np.float32), 1.0, dst=out)) is out
    True
    """
    if out is None or result is out:
        return result
    np.copyto(out, result)
    return out


def normalize_lut(mean: ArrayLike, std: ArrayLike) -> np.ndarray:
    """Per channel, the float32 value MXNet's ``to_tensor`` then ``normalize(mean, std)``
    give each uint8 value: ``(v / 255 - mean) / std``, in float32 as MXNet computes it.
    Shape ``(3, 256)``.

    >>> normalize_lut((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))[:, [0, 255]]
    array([[-1.,  1.],
           [-1.,  1.],
           [-1.,  1.]], dtype=float32)
    """
    values = np.arange(256, dtype=np.float32) / np.float32(255)
    mean = np.asarray(mean, np.float32).reshape(3, 1)
    std = np.asarray(std, np.float32).reshape(3, 1)
    return np.ascontiguousarray((values[np.newaxis, :] - mean) / std, dtype=np.float32)


def lut_chw(img: np.ndarray, lut: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """A uint8 HWC image through the per-channel ``lut`` ``(3, 256)`` into float32 CHW
    ``out`` (new if ``None``): bit for bit what the table says."""
    h, w = img.shape[:2]
    if out is None:
        out = np.empty((3, h, w), np.float32)
    for k, plane in enumerate(cv2.split(img)):
        target = out[k]
        written(target, cv2.LUT(plane, lut[k], dst=target))
    return out


class Normalizer:
    """MXNet's ``to_tensor`` then ``normalize(mean, std)`` of an HWC image, written CHW
    float32: ``(x / 255 - mean) / std`` per channel, nothing clipped.

    A uint8 image goes through the per-channel table :func:`normalize_lut` (bit for bit
    MXNet's float32 arithmetic, and the fastest pass); a float32 one, whose values no
    table can hold, through the same map as a 3x4 matrix (:func:`affine_chw`), within
    float32 rounding of MXNet's.

    Parameters
    ----------
    mean, std : sequence of 3 floats
        ``normalize``'s parameters.

    Examples
    --------
    >>> half = Normalizer((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
    >>> half(np.full((1, 2, 3), 255, np.uint8))[:, 0, 0]
    array([1., 1., 1.], dtype=float32)
    >>> half(np.full((1, 2, 3), -255.0, np.float32))[:, 0, 0]
    array([-3., -3., -3.], dtype=float32)
    """

    def __init__(self, mean: ArrayLike, std: ArrayLike) -> None:
        self.lut = normalize_lut(mean, std)
        self.matrix = color.normalize(mean, std)

    def __call__(self, img: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """``img`` (HWC, uint8 or float32; not written to) normalized into ``out``
        (``(3, H, W)`` float32, new if ``None``)."""
        if img.dtype == np.uint8:
            return lut_chw(img, self.lut, out)
        return affine_chw(img, self.matrix, out=out)


#: Whether :func:`affine_chw` runs compiled here: built, the processor has FMA
#: instructions, and the results were OpenCV's at import.
COMPILED_COLOUR = _colour_matches()
