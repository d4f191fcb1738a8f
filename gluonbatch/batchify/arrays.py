"""Array batchify functions: ``Stack``, ``Pad`` and ``Append``, gluoncv's drop-ins.

Each computes the batch's layout, allocates every output once and writes each sample
once into its slot (see :mod:`gluonbatch._core.assemble`).

Examples
--------
>>> from gluonbatch.batchify import Stack, Pad
>>> Stack()([[1, 2], [3, 4]]).shape, Pad()([[1, 2], [3]]).asnumpy().tolist()
((2, 2), [[1, 2], [3, 0]])
"""
from collections.abc import Sequence
from typing import Any, TypeAlias

import mxnet as mx
import numpy as np
from numpy.typing import DTypeLike

from .._core.alloc import allocate
from .._core.assemble import pad_slices, stack_arrays
from .._core.checks import check_dtype, check_int
from .._core.layout import check_axis_argument, check_pad_value, common_dtype, slice_bounds
from .._core.samples import as_host_arrays
from .._core.device_layout import PER_DEVICE, ROWS
from .._core.typing import DeviceLayout, LayoutKind, NDArray

__all__ = ['Stack', 'Pad', 'Append']

#: What ``Pad`` makes of a batch: one NDArray, or one per device slice.
Padded: TypeAlias = NDArray | list[NDArray]

_FLOAT32 = np.dtype(np.float32)


def _optional_dtype(dtype):
    return None if dtype is None else check_dtype(dtype)


class Stack:
    r"""Stack samples of one shape along a new first (batch) axis.

    Parameters
    ----------
    dtype : str or numpy.dtype, optional
        Output dtype. By default NDArray samples keep their dtype and everything else
        (numpy arrays, lists, numbers) becomes float32, as in gluoncv.

    Examples
    --------
    >>> from gluonbatch.batchify import Stack
    >>> Stack()([[1, 2, 3, 4], [4, 5, 6, 8], [8, 9, 1, 2]])
    <BLANKLINE>
    [[1. 2. 3. 4.]
     [4. 5. 6. 8.]
     [8. 9. 1. 2.]]
    <NDArray 3x4 @cpu_shared(0)>
    >>> import mxnet as mx
    >>> Stack()([mx.nd.array([1, 2], dtype='int32'), mx.nd.array([3, 4], dtype='int32')])
    <BLANKLINE>
    [[1 2]
     [3 4]]
    <NDArray 2x2 @cpu_shared(0)>
    >>> Stack(dtype='uint8')([np.full((2,), 7), np.full((2,), 9)]).dtype
    <class 'numpy.uint8'>
    """

    def __init__(self, dtype: DTypeLike | None = None) -> None:
        self._dtype = _optional_dtype(dtype)

    #: Every row is one sample: split on the device slices' boundaries (see
    #: ``split_to_devices``).
    device_layout: DeviceLayout = ROWS

    def __call__(self, data: Sequence[Any]) -> NDArray:
        """Stack ``data``, a list of N samples of equal shape, into an (N, ...) NDArray."""
        arrays = as_host_arrays(data, deferred=True)
        dtype = self._dtype
        if dtype is None:
            if all(isinstance(sample, mx.nd.NDArray) for sample in data):
                dtype = common_dtype(arrays)
            else:
                dtype = _FLOAT32
        return stack_arrays(arrays, dtype)

    def __repr__(self):
        return 'Stack(dtype=%s)' % (self._dtype,)


class Pad:
    r"""Pad samples to the largest length on the given axes, then stack them.

    Parameters
    ----------
    axis : int or tuple of int, default 0
        Sample axis (or axes) to pad; negative values count from the end. Every other axis
        must agree between samples.
    pad_val : number, default 0
        Value written into the padding. It must be representable in the output dtype.
    num_shards : int, default 1
        Split the batch into this many device slices on ``np.array_split`` boundaries (the
        first slices are one larger) and pad each slice to its own maximum; one per device.
    ret_length : bool, default False
        Also return the valid (unpadded) lengths as int32: shape (N,) for an int ``axis``,
        (N, len(axis)) for a tuple.
    dtype : str or numpy.dtype, optional
        Output dtype. By default the samples' dtypes promoted together (lists go through
        ``np.asarray``: int64 or float64); gluoncv uses the first sample's dtype.
    round_to : int, optional
        Round each padded length up to a multiple of this, e.g. 32 for stride-32 backbones.

    Returns
    -------
    NDArray, or a list of NDArrays (one per device slice) when ``num_shards > 1``; with
    ``ret_length`` a pair (padded, valid_lengths) in the same layout.

    Examples
    --------
    >>> from gluonbatch.batchify import Pad
    >>> Pad()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])
    <BLANKLINE>
    [[1 2 3 4]
     [4 5 6 0]
     [8 2 0 0]]
    <NDArray 3x4 @cpu_shared(0)>
    >>> padded, lengths = Pad(axis=1, pad_val=-1, ret_length=True)(
    ...     [np.array([[1, 2, 3, 4], [5, 6, 7, 8]]), np.array([[5, 8], [1, 2]])])
    >>> padded.asnumpy()
    array([[[ 1,  2,  3,  4],
            [ 5,  6,  7,  8]],
    <BLANKLINE>
           [[ 5,  8, -1, -1],
            [ 1,  2, -1, -1]]])
    >>> lengths.asnumpy()
    array([4, 2], dtype=int32)
    >>> slices = Pad(num_shards=2)([[1], [2, 3], [4, 5, 6]])
    >>> [s.shape for s in slices]
    [(2, 2), (1, 3)]
    >>> Pad(axis=(1, 2), round_to=32)([np.ones((3, 40, 50), 'float32')]).shape
    (1, 3, 64, 64)
    """

    def __init__(self, axis: int | Sequence[int] = 0, pad_val: float = 0, num_shards: int = 1,
                 ret_length: bool = False, dtype: DTypeLike | None = None,
                 round_to: int | None = None) -> None:
        self._axis = check_axis_argument(axis)
        self._pad_val = pad_val
        self._num_shards = check_int(num_shards, 'num_shards', minimum=1)
        self._ret_length = bool(ret_length)
        self._dtype = _optional_dtype(dtype)
        self._round_to = check_int(round_to, 'round_to', minimum=1, allow_none=True)
        # Fail at construction for what can be known then.
        check_pad_value(pad_val, self._dtype or np.dtype(np.float64))

    def __call__(self, data: Sequence[Any]) -> Padded | tuple[Padded, Padded]:
        """Pad and stack ``data``, a list of N samples, per device slice."""
        arrays = as_host_arrays(data, deferred=True)
        padded, lengths = self.pad_slices(arrays, slice_bounds(len(arrays), self._num_shards))
        if self._num_shards > 1:
            return (padded, lengths) if self._ret_length else padded
        return (padded[0], lengths[0]) if self._ret_length else padded[0]

    @property
    def device_layout(self) -> DeviceLayout:
        """``'per_device'`` with ``num_shards > 1``, else ``'rows'``; a pair with
        ``ret_length``."""
        kind: LayoutKind = PER_DEVICE if self._num_shards > 1 else ROWS
        return (kind, kind) if self._ret_length else kind

    def pad_slices(self, arrays: Sequence[np.ndarray], bounds: Sequence[tuple[int, int]]
                   ) -> tuple[list[NDArray], list[NDArray]]:
        """Pad host arrays device slice by slice; the building block of composite
        batchifiers.

        Parameters
        ----------
        arrays : list of numpy.ndarray
            The samples, as returned by ``as_host_arrays``.
        bounds : list of (start, stop)
            The device slices, as returned by ``slice_bounds``.

        Returns
        -------
        (list of NDArray, list of NDArray)
            One padded array per slice, and one int32 valid-length array per slice when
            ``ret_length`` is set (else an empty list).
        """
        return pad_slices(arrays, bounds, self._axis, self._pad_val, self._dtype,
                          self._round_to, self._ret_length)

    def __repr__(self):
        return ('Pad(axis=%r, pad_val=%r, num_shards=%d, ret_length=%r, dtype=%s, round_to=%r)'
                % (self._axis, self._pad_val, self._num_shards, self._ret_length, self._dtype,
                   self._round_to))


class Append:
    r"""Return the samples as a list of NDArrays, each optionally with a batch axis of size 1.

    Samples may have any shapes. NDArray samples keep their dtype; numpy arrays, lists and
    numbers become float32, as in gluoncv. Unlike gluoncv, every array returned is a fresh
    ``cpu_shared`` array (gluoncv's ``expand=True`` returns ``cpu(0)`` arrays, which worker
    processes must copy again).

    Parameters
    ----------
    expand : bool, default True
        Insert a new axis of length 1 at ``batch_axis``.
    batch_axis : int, default 0
        Where to insert it (negative counts from the end, as ``np.expand_dims``).

    Examples
    --------
    >>> from gluonbatch.batchify import Append
    >>> [a.shape for a in Append()([[1, 2, 3, 4], [4, 5, 6], [8, 2]])]
    [(1, 4), (1, 3), (1, 2)]
    >>> Append(expand=False)([np.arange(3)])
    [
    [0. 1. 2.]
    <NDArray 3 @cpu_shared(0)>]
    """

    def __init__(self, expand: bool = True, batch_axis: int = 0) -> None:
        self._expand = bool(expand)
        self._batch_axis = check_int(batch_axis, 'batch_axis')

    #: Every row is one sample: split on the device slices' boundaries (see
    #: ``split_to_devices``).
    device_layout: DeviceLayout = ROWS

    def __call__(self, data: Sequence[Any]) -> list[NDArray]:
        """Return a list with one NDArray per sample of ``data``."""
        arrays = as_host_arrays(data)
        layouts = []
        for index, (sample, array) in enumerate(zip(data, arrays)):
            shape = array.shape
            if self._expand:
                if not -array.ndim - 1 <= self._batch_axis <= array.ndim:
                    raise ValueError('sample %d has shape %s; batch_axis %d is out of range'
                                     % (index, shape, self._batch_axis))
                shape = np.expand_dims(np.empty(shape, np.bool_), self._batch_axis).shape
            dtype = check_dtype(array.dtype) if isinstance(sample, mx.nd.NDArray) else _FLOAT32
            layouts.append((shape, dtype))
        out = []
        for array, (shape, dtype) in zip(arrays, layouts):
            result, view = allocate(shape, dtype)
            view[...] = array.reshape(shape)
            out.append(result)
        return out

    def __repr__(self):
        return 'Append(expand=%r, batch_axis=%d)' % (self._expand, self._batch_axis)
