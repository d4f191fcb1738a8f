"""Batchify functions: turn a list of samples into a mini-batch.

Drop-in for ``gluoncv.data.batchify``: ``Stack``, ``Pad``, ``Append`` and ``Tuple`` return
what gluoncv returns for every input gluoncv handles, and ``List``, ``Dict`` and
``NamedTuple`` combine fields the way GluonNLP users know. Every NDArray returned lives in
``cpu_shared(0)`` (with the default memory setting) and is written once, so DataLoader worker processes pass batches to the
main process by file descriptor without another copy.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.batchify import Tuple, Stack, Pad
>>> samples = [(np.zeros((2, 2)), [1, 2, 3]), (np.ones((2, 2)), [4])]
>>> images, labels = Tuple(Stack(), Pad(pad_val=-1))(samples)
>>> images.shape, images.context
((2, 2, 2), cpu_shared(0))
>>> labels.asnumpy()
array([[ 1,  2,  3],
       [ 4, -1, -1]])
"""
from collections.abc import Mapping, Sequence

import mxnet as mx
import numpy as np

from ._core.alloc import allocate
from ._core.assemble import apply_to_field, pad_shards, stack_arrays
from ._core.checks import (BatchifyUsageError, check_batch, check_callable, check_dtype,
                           check_int, describe)
from ._core.layout import check_axis_argument, check_pad_value, common_dtype, shard_bounds
from ._core.samples import as_host_arrays
from .rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify

__all__ = ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
           'ms_batchify_fn', 'dict_batchify_fn', 'FasterRCNNTrainBatchify',
           'MaskRCNNTrainBatchify']

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

    def __init__(self, dtype=None):
        self._dtype = _optional_dtype(dtype)

    def __call__(self, data):
        """Stack ``data``, a list of N samples of equal shape, into an (N, ...) NDArray."""
        arrays = as_host_arrays(data)
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
        Split the batch into this many shards on ``np.array_split`` boundaries (the first
        shards are one larger) and pad each shard to its own maximum; one per device.
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
    NDArray, or a list of NDArrays (one per shard) when ``num_shards > 1``; with
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
    >>> shards = Pad(num_shards=2)([[1], [2, 3], [4, 5, 6]])
    >>> [s.shape for s in shards]
    [(2, 2), (1, 3)]
    >>> Pad(axis=(1, 2), round_to=32)([np.ones((3, 40, 50), 'float32')]).shape
    (1, 3, 64, 64)
    """

    def __init__(self, axis=0, pad_val=0, num_shards=1, ret_length=False, dtype=None,
                 round_to=None):
        self._axis = check_axis_argument(axis)
        self._pad_val = pad_val
        self._num_shards = check_int(num_shards, 'num_shards', minimum=1)
        self._ret_length = bool(ret_length)
        self._dtype = _optional_dtype(dtype)
        self._round_to = check_int(round_to, 'round_to', minimum=1, allow_none=True)
        # Fail at construction for what can be known then.
        check_pad_value(pad_val, self._dtype or np.dtype(np.float64))

    def __call__(self, data):
        """Pad and stack ``data``, a list of N samples, per shard."""
        arrays = as_host_arrays(data)
        padded, lengths = self.pad_shards(arrays, shard_bounds(len(arrays), self._num_shards))
        if self._num_shards == 1:
            padded, lengths = padded[0], lengths[0] if lengths else None
        return (padded, lengths) if self._ret_length else padded

    def pad_shards(self, arrays, bounds):
        """Pad host arrays shard by shard; the building block of composite batchifiers.

        Parameters
        ----------
        arrays : list of numpy.ndarray
            The samples, as returned by ``as_host_arrays``.
        bounds : list of (start, stop)
            The shards, as returned by ``shard_bounds``.

        Returns
        -------
        (list of NDArray, list of NDArray)
            One padded array per shard, and one int32 valid-length array per shard when
            ``ret_length`` is set (else an empty list).
        """
        return pad_shards(arrays, bounds, self._axis, self._pad_val, self._dtype,
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

    def __init__(self, expand=True, batch_axis=0):
        self._expand = bool(expand)
        self._batch_axis = check_int(batch_axis, 'batch_axis')

    def __call__(self, data):
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


class Tuple:
    r"""Apply one batchify function per field of samples that are tuples (or lists).

    ``Tuple(A, B)``, ``Tuple([A, B])`` and ``Tuple((A, B))`` are the same. Returns a tuple.

    Examples
    --------
    >>> from gluonbatch.batchify import Tuple, Pad, Stack
    >>> data, label = Tuple(Pad(), Stack())([([1, 2, 3, 4], 0), ([5, 7], 1)])
    >>> data.asnumpy()
    array([[1, 2, 3, 4],
           [5, 7, 0, 0]])
    >>> label.asnumpy()
    array([0., 1.], dtype=float32)
    """

    def __init__(self, fn, *args):
        if isinstance(fn, (list, tuple)):
            if args:
                raise BatchifyUsageError('Tuple takes Tuple(A, B, C), Tuple([A, B, C]) or '
                                         'Tuple((A, B, C)); got a sequence followed by %d '
                                         'more argument(s)' % len(args))
            fns = tuple(fn)
        else:
            fns = (fn,) + args
        if not fns:
            raise BatchifyUsageError('Tuple needs at least one batchify function')
        for index, ele_fn in enumerate(fns):
            check_callable(ele_fn, str(index))
        self._fn = fns

    def __call__(self, data):
        """Return a tuple: field i of every sample batchified by the i-th function."""
        check_batch(data)
        width = len(self._fn)
        for index, sample in enumerate(data):
            if isinstance(sample, (str, bytes, Mapping)) or not isinstance(sample, Sequence):
                raise BatchifyUsageError('sample %d is a %s; Tuple expects a tuple or list of %d '
                                         'fields' % (index, describe(sample), width))
            if len(sample) != width:
                raise BatchifyUsageError('sample %d has %d fields; this Tuple has %d batchify '
                                         'functions' % (index, len(sample), width))
        return tuple(apply_to_field(fn, [sample[i] for sample in data], i)
                     for i, fn in enumerate(self._fn))

    def __repr__(self):
        return 'Tuple(%s)' % ', '.join(repr(fn) for fn in self._fn)


class List:
    r"""Return the samples as a plain list, unbatched.

    For fields that are not arrays (captions, metadata, variable-size objects). The list is
    new; its items are the sample objects themselves, not copies.

    Examples
    --------
    >>> from gluonbatch.batchify import List
    >>> List()(['a cat', 'two dogs'])
    ['a cat', 'two dogs']
    """

    def __call__(self, data):
        """Return ``list(data)``."""
        check_batch(data)
        return list(data)

    def __repr__(self):
        return 'List()'


class Dict:
    r"""Batchify samples that are dicts, one function per key; returns a dict.

    Every sample must have exactly the keys of ``fn_dict``.

    Examples
    --------
    >>> from gluonbatch.batchify import Dict, Pad, Stack
    >>> batch = Dict({'image': Stack(), 'boxes': Pad(pad_val=-1)})(
    ...     [{'image': [0, 0], 'boxes': [1, 2]}, {'image': [1, 1], 'boxes': [3]}])
    >>> batch['boxes'].asnumpy()
    array([[ 1,  2],
           [ 3, -1]])
    """

    def __init__(self, fn_dict):
        if not isinstance(fn_dict, Mapping):
            raise BatchifyUsageError('Dict takes a dict of batchify functions, got %s'
                                     % describe(fn_dict))
        for key, fn in fn_dict.items():
            check_callable(fn, repr(key))
        self._fn_dict = dict(fn_dict)

    def __call__(self, data):
        """Return a dict: for each key, that key of every sample batchified by its function."""
        check_batch(data)
        keys = set(self._fn_dict)
        for index, sample in enumerate(data):
            if not isinstance(sample, Mapping):
                raise BatchifyUsageError('sample %d is a %s; Dict expects a dict with keys %s'
                                         % (index, describe(sample), sorted(map(str, keys))))
            if set(sample) != keys:
                raise BatchifyUsageError(
                    'sample %d has keys %s; expected %s (missing %s, extra %s)'
                    % (index, sorted(map(str, sample)), sorted(map(str, keys)),
                       sorted(map(str, keys - set(sample))), sorted(map(str, set(sample) - keys))))
        return {key: apply_to_field(fn, [sample[key] for sample in data], repr(key))
                for key, fn in self._fn_dict.items()}

    def __repr__(self):
        return 'Dict(%r)' % (self._fn_dict,)


class NamedTuple:
    r"""Batchify samples of a namedtuple type, one function per field; returns that type.

    Parameters
    ----------
    container : namedtuple type
    fn_info : list, tuple or dict
        One batchify function per field, in field order, or a dict from field name.

    Examples
    --------
    >>> from collections import namedtuple
    >>> from gluonbatch.batchify import NamedTuple, Stack, Pad
    >>> Sample = namedtuple('Sample', ['image', 'label'])
    >>> batchify = NamedTuple(Sample, {'image': Stack(), 'label': Pad()})
    >>> batch = batchify([Sample([0., 1.], [3]), Sample([2., 3.], [4, 5])])
    >>> type(batch).__name__, batch.label.asnumpy().tolist()
    ('Sample', [[3, 0], [4, 5]])
    """

    def __init__(self, container, fn_info):
        fields = getattr(container, '_fields', None)
        if not (isinstance(container, type) and issubclass(container, tuple) and fields):
            raise BatchifyUsageError('NamedTuple needs a namedtuple type, got %r' % (container,))
        if isinstance(fn_info, Mapping):
            if set(fn_info) != set(fields):
                raise BatchifyUsageError('the functions are for fields %s but %s has fields %s'
                                         % (sorted(map(str, fn_info)), container.__name__,
                                            list(fields)))
            fns = tuple(fn_info[name] for name in fields)
        elif isinstance(fn_info, (list, tuple)):
            if len(fn_info) != len(fields):
                raise BatchifyUsageError('%d functions given but %s has %d fields %s'
                                         % (len(fn_info), container.__name__, len(fields),
                                            list(fields)))
            fns = tuple(fn_info)
        else:
            raise BatchifyUsageError('fn_info must be a list, tuple or dict of batchify '
                                     'functions, got %s' % describe(fn_info))
        for name, fn in zip(fields, fns):
            check_callable(fn, name)
        self._container = container
        self._fns = fns

    def __call__(self, data):
        """Return a ``container`` whose fields are the batchified fields of ``data``."""
        check_batch(data)
        for index, sample in enumerate(data):
            if not isinstance(sample, self._container):
                raise BatchifyUsageError('sample %d is a %s; expected %s'
                                         % (index, describe(sample), self._container.__name__))
        fields = self._container._fields
        return self._container(*(apply_to_field(fn, [sample[i] for sample in data], fields[i])
                                 for i, fn in enumerate(self._fns)))

    def __repr__(self):
        return 'NamedTuple(%s, %r)' % (self._container.__name__, self._fns)


def ms_batchify_fn(data):
    """Multi-size batchify: NDArrays and strings as lists (not stacks), tuples per field.

    For evaluation at several image sizes (gluoncv's segmentation ``ms_batchify_fn``).
    NDArrays come back as fresh ``cpu_shared`` copies with their dtype; a tuple sample gives
    a list with one such list per field.

    >>> import mxnet as mx
    >>> batch = ms_batchify_fn([(mx.nd.ones((3, 4)), 'a'), (mx.nd.ones((3, 6)), 'b')])
    >>> [a.shape for a in batch[0]], batch[1]
    ([(3, 4), (3, 6)], ['a', 'b'])
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, str):
        return list(data)
    if isinstance(first, mx.nd.NDArray):
        return _APPEND_AS_IS(data)
    if isinstance(first, tuple):
        return [ms_batchify_fn(list(field)) for field in zip(*data)]
    raise TypeError('ms_batchify_fn takes NDArrays, strings or tuples of them; sample 0 is a '
                    '%s' % describe(first))


def dict_batchify_fn(data):
    """Stack NDArrays, recursing into dicts: a dict of stacked batches (dtype kept).

    >>> import mxnet as mx
    >>> batch = dict_batchify_fn([{'depth': mx.nd.ones((2, 2)), 'meta': {'k': mx.nd.ones(1)}},
    ...                           {'depth': mx.nd.zeros((2, 2)), 'meta': {'k': mx.nd.ones(1)}}])
    >>> batch['depth'].shape, batch['meta']['k'].shape
    ((2, 2, 2), (2, 1))
    """
    check_batch(data)
    first = data[0]
    if isinstance(first, mx.nd.NDArray):
        return _STACK_AS_IS(data)
    if isinstance(first, dict):
        return Dict({key: dict_batchify_fn for key in first})(data)
    raise TypeError('dict_batchify_fn takes NDArrays or dicts of them; sample 0 is a %s'
                    % describe(first))


_APPEND_AS_IS = Append(expand=False)
_STACK_AS_IS = Stack()
