"""The checks every preset applies to the ``(image, label)`` a dataset hands it.

An image is an ``mx.nd.NDArray`` or a numpy array, HWC with 3 channels, ``uint8`` (what
gluoncv's detection datasets decode to). A label is a numpy array of shape ``(N, K)``, one
row per box ``(xmin, ymin, xmax, ymax, class, ...)``; ``N`` may be 0. Its dtype is kept,
because gluoncv's box arithmetic follows it (float64 VOC/COCO labels, float32 ones).
A wrong type raises ``TypeError``, a bad shape or value ``ValueError``, naming what was
seen and what was expected. Neither input is ever written to.

Examples
--------
>>> import numpy as np
>>> image = image_array(np.zeros((4, 6, 3), 'uint8'))
>>> image.shape, image.dtype
((4, 6, 3), dtype('uint8'))
>>> label_array(np.array([[1., 1., 3., 3., 0.]])).shape
(1, 5)
>>> image_array(np.zeros((4, 6), 'uint8'))
Traceback (most recent call last):
...
ValueError: image must be HWC with 3 channels, got numpy.ndarray of shape (4, 6) and dtype uint8
"""
import mxnet as mx
import numpy as np

from .._core.checks import describe

__all__ = ['as_numpy', 'image_array', 'label_array']


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


def image_array(src, name='image'):
    """``src`` as a numpy HWC uint8 array (an NDArray is read once; numpy is not copied).

    Parameters
    ----------
    src : mx.nd.NDArray, mx.np.ndarray or numpy.ndarray
        The decoded image, HWC, 3 channels, uint8.
    name : str
        What to call it in an error.

    Returns
    -------
    numpy.ndarray
        The pixels; callers never write to it.

    Examples
    --------
    >>> import mxnet as mx
    >>> image_array(mx.nd.zeros((2, 3, 3), dtype='uint8')).shape
    (2, 3, 3)
    >>> image_array(np.zeros((2, 3, 3), 'float32'))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: image must have dtype uint8 (HWC, 3 channels), got numpy.ndarray of ...
    """
    pixels = as_numpy(src, name)
    if pixels.dtype != np.uint8:
        raise TypeError('%s must have dtype uint8 (HWC, 3 channels), got %s'
                        % (name, describe(src)))
    if pixels.ndim != 3 or pixels.shape[2] != 3 or pixels.shape[0] < 1 or pixels.shape[1] < 1:
        raise ValueError('%s must be HWC with 3 channels, got %s' % (name, describe(src)))
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
