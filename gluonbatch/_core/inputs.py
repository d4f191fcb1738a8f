"""The checks every preset applies to the ``(image, label)`` a dataset hands it
(:func:`image_array`, :func:`label_array`), and to its per-channel ``mean`` / ``std``
arguments (:func:`channel_values`).

An image is HWC with 3 channels, of real numbers: ``uint8`` (what gluoncv's detection
datasets decode to) is kept for the presets' fast uint8 paths, any other integer or float
dtype is read as float32 values, as gluoncv's SSD and YOLOv3 presets read every image. A
label is ``(N, 5+)``, one row per box, its dtype kept because gluoncv's box arithmetic
follows it. A wrong type raises ``TypeError``, a bad shape or value ``ValueError``, naming
what was seen and what was expected. Neither input is ever written to.

Examples
--------
>>> import numpy as np
>>> image = image_array(np.zeros((4, 6, 3), 'uint8'))
>>> image.shape, image.dtype
((4, 6, 3), dtype('uint8'))
>>> image_array(np.zeros((4, 6, 3), 'float64')).dtype
dtype('float32')
>>> label_array(np.array([[1., 1., 3., 3., 0.]])).shape
(1, 5)
>>> image_array(np.zeros((4, 6), 'uint8'))
Traceback (most recent call last):
...
ValueError: image must be HWC with 3 channels, got numpy.ndarray of shape (4, 6) and dtype uint8
"""
import warnings

import mxnet as mx
import numpy as np

from .checks import describe
from .native import host_view

__all__ = ['as_numpy', 'check_image', 'image_array', 'label_array', 'channel_values']

#: The dtype kinds an image may have besides uint8: signed and unsigned integers, floats.
_IMAGE_KINDS = 'iuf'


def as_numpy(value, name):
    """``value`` as a numpy array: an ``mx.nd.NDArray`` or ``mx.np.ndarray`` is read (once),
    a numpy array passes as it is; anything else is a ``TypeError`` naming ``name``.

    >>> import mxnet as mx
    >>> as_numpy(mx.nd.ones((1, 4)), 'anchors').dtype
    dtype('float32')
    >>> as_numpy([1, 2], 'anchors')
    Traceback (most recent call last):
    ...
    TypeError: anchors must be an mx.nd.NDArray or a numpy array, got list
    """
    if isinstance(value, mx.nd.NDArray) or isinstance(value, mx.np.ndarray):
        return value.asnumpy()
    if not isinstance(value, np.ndarray):
        raise TypeError('%s must be an mx.nd.NDArray or a numpy array, got %s'
                        % (name, describe(value)))
    return value


def check_image(dtype, shape, src, name='image'):
    """Raise unless ``dtype`` and ``shape`` (of the image ``src``) are an image's: real
    numbers (uint8, another integer or a float dtype; ``TypeError`` otherwise), HWC with 3
    channels (``ValueError`` otherwise). The one rule for every image gluonbatch takes.

    >>> check_image(np.dtype('float16'), (2, 3, 3), None)
    >>> check_image(np.dtype('complex64'), (2, 3, 3), None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: image must hold real numbers (uint8, another integer or a float dtype; ...
    """
    dtype = np.dtype(dtype)
    if dtype != np.uint8 and dtype.kind not in _IMAGE_KINDS:
        raise TypeError('%s must hold real numbers (uint8, another integer or a float dtype; '
                        'HWC, 3 channels), got %s; convert it with astype(\'float32\') if '
                        'its values are pixels' % (name, describe(src)))
    if len(shape) != 3 or shape[2] != 3 or shape[0] < 1 or shape[1] < 1:
        raise ValueError('%s must be HWC with 3 channels, got %s' % (name, describe(src)))


def image_array(src, name='image'):
    """``src`` as a numpy HWC array the presets read: uint8 as it is, any other integer or
    floating dtype as float32 values.

    An NDArray is read once. A numpy uint8 or float32 array is not copied; another dtype
    is converted (float64 and large integers rounded to float32, what gluoncv's SSD and
    YOLOv3 presets do first with any image). Values are not clipped: a float image may hold
    any range (pre-normalized data, negative values) and keeps it.

    Parameters
    ----------
    src : mx.nd.NDArray, mx.np.ndarray or numpy.ndarray
        The decoded image, HWC, 3 channels; uint8, another integer dtype or a float dtype.
    name : str
        What to call it in an error.

    Returns
    -------
    numpy.ndarray
        The pixels, uint8 or float32; callers never write to it.

    Raises
    ------
    TypeError
        ``src`` is not an array, or holds booleans, complex numbers, objects or strings.
    ValueError
        ``src`` is not HWC with 3 channels.

    Examples
    --------
    >>> import mxnet as mx
    >>> image_array(mx.nd.zeros((2, 3, 3), dtype='uint8')).dtype
    dtype('uint8')
    >>> image_array(mx.nd.zeros((2, 3, 3), dtype='float16')).dtype
    dtype('float32')
    >>> image_array(np.zeros((2, 3, 3), 'bool'))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: image must hold real numbers (uint8, another integer or a float dtype; HWC, ...
    """
    # a read-only view of the image's memory, not asnumpy's copy (0.3-0.5 ms for 500x375):
    # presets read their input and never write it
    if isinstance(src, mx.np.ndarray):
        pixels = host_view(src.as_nd_ndarray())  # as_nd_ndarray: the same memory
    elif isinstance(src, mx.nd.NDArray):
        pixels = host_view(src)
    else:
        pixels = as_numpy(src, name)
    check_image(pixels.dtype, pixels.shape, src, name)
    if pixels.dtype != np.uint8:
        pixels = pixels.astype(np.float32, copy=False)
    return pixels


def label_array(label, min_columns=5, name='label'):
    """``label`` as a 2-D numpy array of at least ``min_columns`` columns, dtype kept.

    Parameters
    ----------
    label : numpy.ndarray or mx.nd.NDArray
        One row per box: ``xmin, ymin, xmax, ymax, class`` and optional extra columns
        (YOLOv3's mixup weight). Zero rows is allowed.
    min_columns : int
        How many columns the preset reads.
    name : str
        What to call it in an error.

    Returns
    -------
    numpy.ndarray
        The label itself (not a copy) if it is a numpy array; callers never write to it.

    Examples
    --------
    >>> label_array(np.zeros((0, 5))).shape
    (0, 5)
    >>> label_array(np.zeros((2, 4)))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: label must have shape (N, 5 or more): xmin, ymin, xmax, ymax, class per ...
    >>> label_array([[0, 0, 1, 1, 0]])
    Traceback (most recent call last):
    ...
    TypeError: label must be an mx.nd.NDArray or a numpy array, got list
    """
    label = as_numpy(label, name)
    if label.dtype.kind not in 'fiu':
        raise TypeError('%s must hold numbers, got %s' % (name, describe(label)))
    if label.ndim != 2 or label.shape[1] < min_columns:
        raise ValueError('%s must have shape (N, %d or more): xmin, ymin, xmax, ymax, class per '
                         'box; got %s' % (name, min_columns, describe(label)))
    return label


def channel_values(values, name, nonzero=False):
    """A preset's per-channel ``mean`` or ``std`` as a tuple of 3 floats.

    One number stands for all three channels (as MXNet's ``normalize`` takes it). The
    floats are the values themselves (a float32 value stays exact), so a preset computing
    with them in float32 or float64 gets what it got from the raw argument.

    Parameters
    ----------
    values : number, sequence, numpy array or NDArray
        1 or 3 real numbers (an array of any shape holding 1 or 3).
    name : str
        The argument's name, for errors.
    nonzero : bool
        Reject a 0 (a ``std`` divides).

    Returns
    -------
    tuple of 3 float

    Raises
    ------
    TypeError
        ``values`` is not numbers (a string, booleans, ``None``, ...).
    ValueError
        Not 1 or 3 of them, one is not finite, or (``nonzero``) one is 0.

    Examples
    --------
    >>> channel_values((0.485, 0.456, 0.406), 'mean')
    (0.485, 0.456, 0.406)
    >>> channel_values(np.float32(0.25), 'std')
    (0.25, 0.25, 0.25)
    >>> channel_values('x', 'std')
    Traceback (most recent call last):
    ...
    TypeError: std must be a number or 3 numbers (one per channel), got 'x' (str)
    >>> channel_values((0.1, 0.2), 'mean')
    Traceback (most recent call last):
    ...
    ValueError: mean must be a number or 3 numbers (one per channel), got 2 numbers: (0.1, 0.2)
    >>> channel_values((0.2, 0.0, 0.2), 'std', nonzero=True)
    Traceback (most recent call last):
    ...
    ValueError: std must not be 0 (it divides), got (0.2, 0.0, 0.2)
    """
    expected = '%s must be a number or 3 numbers (one per channel)' % name
    array = None
    # numpy would read '0.5' as a number: strings are refused before it sees them
    if isinstance(values, (mx.nd.NDArray, mx.np.ndarray)):
        array = values.asnumpy()
    elif not isinstance(values, (str, bytes)):
        with warnings.catch_warnings():  # (ragged sequences: numpy warns or raises)
            warnings.simplefilter('ignore')
            try:
                array = np.asarray(values)
            except (TypeError, ValueError):
                pass
    if array is None or array.dtype.kind not in 'fiu':
        raise TypeError('%s, got %r (%s)' % (expected, values, describe(values)))
    flat = array.reshape(-1).astype(np.float64)
    if flat.size not in (1, 3):
        raise ValueError('%s, got %d numbers: %r' % (expected, flat.size, values))
    if not np.isfinite(flat).all():
        raise ValueError('%s must hold finite numbers, got %r' % (name, values))
    if nonzero and not flat.all():
        raise ValueError('%s must not be 0 (it divides), got %r' % (name, values))
    return tuple(flat.tolist() * (3 if flat.size == 1 else 1))
