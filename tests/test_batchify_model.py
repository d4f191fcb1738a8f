"""gluonbatch against a plain numpy model, for every input, including where gluoncv crashes.

The model is deliberately naive (fill everything, then copy), so it checks the
write-once code path against an independent computation.
"""
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gluonbatch.batchify import Pad, Stack
from helpers import SHARED, examples

DTYPES = ['float32', 'float64', 'float16', 'uint8', 'int8', 'int32', 'int64', 'bool']


def model_pad(samples, axis, pad_val, num_shards, round_to=None, dtype=None):
    """What Pad must return, as numpy: a list of (padded, lengths) per device slice."""
    arrays = [np.asarray(s) for s in samples]
    ndim = arrays[0].ndim
    axes = [axis] if isinstance(axis, int) else list(axis)
    axes = [a % ndim for a in axes]
    dtype = dtype or np.result_type(*arrays)
    num_shards = min(num_shards, len(arrays))
    result = []
    for piece in np.array_split(np.arange(len(arrays)), num_shards):
        members = [arrays[i] for i in piece]
        shape = list(members[0].shape)
        for ax in axes:
            longest = max(m.shape[ax] for m in members)
            shape[ax] = longest if round_to is None else -(-longest // round_to) * round_to
        out = np.full([len(members)] + shape, pad_val, dtype=dtype)
        for row, member in zip(out, members):
            row[tuple(slice(0, d) for d in member.shape)] = member
        lengths = np.array([[m.shape[ax] for ax in axes] for m in members], np.int32)
        result.append((out, lengths[:, 0] if isinstance(axis, int) else lengths))
    return result


@st.composite
def pad_cases(draw):
    ndim = draw(st.integers(1, 3))
    num = draw(st.integers(1, 9))
    if draw(st.booleans()):
        axis = draw(st.integers(-ndim, ndim - 1))
    else:
        axis = tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim,
                                   unique=True)))
    axes = [axis % ndim] if isinstance(axis, int) else list(axis)
    common = [draw(st.integers(0, 4)) for _ in range(ndim)]
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    samples = []
    for _ in range(num):
        shape = [draw(st.integers(0, 5)) if ax in axes else common[ax] for ax in range(ndim)]
        values = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape) % 7
        samples.append(values.astype(dtype))
    pad_val = True if dtype.kind == 'b' else draw(st.sampled_from([0, 1, 5]))
    num_shards = draw(st.integers(1, 10))
    round_to = draw(st.sampled_from([None, 1, 4]))
    kind = draw(st.sampled_from(['numpy', 'ndarray', 'list']))
    return samples, axis, pad_val, num_shards, round_to, kind


def to_kind(arrays, kind):
    if kind == 'ndarray':
        return [mx.nd.array(a, dtype=a.dtype) for a in arrays]
    if kind == 'list':
        return [a.tolist() for a in arrays]
    return arrays


@settings(max_examples=examples(150), deadline=None)
@given(pad_cases())
def test_pad_matches_numpy_model_for_any_slice_count(case):
    samples, axis, pad_val, num_shards, round_to, kind = case
    # nested lists cannot spell a zero-length inner axis
    assume(kind != 'list' or all(0 not in s.shape[:-1] for s in samples))
    inputs = to_kind(samples, kind)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        padded, lengths = Pad(axis=axis, pad_val=pad_val, num_shards=num_shards,
                              ret_length=True, round_to=round_to)(inputs)
    expected = model_pad([np.asarray(i) for i in inputs] if kind == 'list' else samples,
                         axis, pad_val, num_shards, round_to)
    if num_shards == 1:
        padded, lengths = [padded], [lengths]
    assert isinstance(padded, list) and len(padded) == len(expected)
    for ours, our_lengths, (want, want_lengths) in zip(padded, lengths, expected):
        assert ours.context == SHARED and our_lengths.context == SHARED
        assert ours.dtype == want.dtype
        np.testing.assert_array_equal(ours.asnumpy(), want)
        assert our_lengths.dtype == np.int32
        np.testing.assert_array_equal(our_lengths.asnumpy(), want_lengths)


@pytest.mark.parametrize('num, slices, sizes', [(7, 3, [3, 2, 2]), (5, 4, [2, 1, 1, 1]),
                                                (10, 4, [3, 3, 2, 2]), (3, 2, [2, 1])])
def test_uneven_slices_follow_array_split(num, slices, sizes):
    samples = [np.full((i + 1, 2), i, np.float32) for i in range(num)]
    padded = Pad(pad_val=-1, num_shards=slices)(samples)
    assert [p.shape[0] for p in padded] == sizes
    # each slice is padded to its own longest member
    bounds = np.cumsum([0] + sizes)
    assert [p.shape[1] for p in padded] == [int(b) for b in bounds[1:]]
    np.testing.assert_array_equal(np.concatenate([p.asnumpy()[:, 0, 0] for p in padded]),
                                  np.arange(num))


def test_more_slices_than_samples_returns_one_slice_per_sample_with_warning():
    with pytest.warns(UserWarning, match='num_shards=4 is larger than the batch of 2'):
        padded, lengths = Pad(num_shards=4, ret_length=True)([[1, 2], [3]])
    assert isinstance(padded, list) and len(padded) == 2
    assert [p.asnumpy().tolist() for p in padded] == [[[1, 2]], [[3]]]
    assert [l.asnumpy().tolist() for l in lengths] == [[2], [1]]
    with pytest.warns(UserWarning):
        single = Pad(num_shards=8)([[5]])
    assert isinstance(single, list) and single[0].asnumpy().tolist() == [[5]]


def test_mixed_dtypes_are_promoted_not_truncated():
    out = Pad()([[1, 2], [1.5]])
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out.asnumpy(), [[1, 2], [1.5, 0]])
    mixed = Pad()([mx.nd.array([1], dtype='float16'), mx.nd.array([2.5, 3], dtype='float32')])
    assert mixed.dtype == np.float32
    np.testing.assert_array_equal(mixed.asnumpy(), [[1, 0], [2.5, 3]])


def test_negative_axis_pads_from_the_end():
    out, lengths = Pad(axis=-1, ret_length=True)([np.ones((2, 3)), np.ones((2, 1))])
    assert out.shape == (2, 2, 3)
    np.testing.assert_array_equal(lengths.asnumpy(), [3, 1])


def test_round_to_rounds_each_padded_axis_and_keeps_true_lengths():
    images = [np.ones((3, 500, 700), np.float32), np.ones((3, 520, 690), np.float32)]
    out, lengths = Pad(axis=(1, 2), round_to=32, ret_length=True)(images)
    assert out.shape == (2, 3, 544, 704)
    np.testing.assert_array_equal(lengths.asnumpy(), [[500, 700], [520, 690]])
    assert out.asnumpy()[0, :, 500:].sum() == 0 and out.asnumpy()[1, :, :, 690:].sum() == 0


def test_dtype_argument_forces_output_dtype():
    assert Pad(dtype='float16')([[1, 2], [3]]).dtype == np.float16
    assert Stack(dtype='int32')([np.ones(2), np.ones(2)]).dtype == np.int32
    np.testing.assert_array_equal(Stack(dtype='uint8')([[1.0, 255.0]]).asnumpy(), [[1, 255]])


def test_bool_samples_pad_and_stack():
    out = Pad()([[True, False], [True]])
    assert out.dtype == np.bool_
    np.testing.assert_array_equal(out.asnumpy(), [[True, False], [True, False]])


@settings(max_examples=examples(60), deadline=None)
@given(st.integers(1, 6), st.lists(st.integers(0, 4), min_size=0, max_size=3),
       st.sampled_from(DTYPES), st.sampled_from(['numpy', 'ndarray', 'list']))
def test_stack_matches_numpy_model(num, shape, dtype, kind):
    assume(kind != 'list' or 0 not in shape[:-1])
    samples = [(np.arange(int(np.prod(shape))).reshape(shape) + i).astype(dtype)
               for i in range(num)]
    out = Stack()(to_kind(samples, kind))
    # NDArrays keep their dtype; everything else becomes float32, as in gluoncv.
    want_dtype = np.dtype(dtype) if kind == 'ndarray' else np.dtype(np.float32)
    assert out.context == SHARED and out.dtype == want_dtype
    np.testing.assert_array_equal(out.asnumpy(), np.stack(samples).astype(want_dtype))


@pytest.mark.parametrize('lengths', [(0, 2), (2, 0), (0, 0, 3)])
def test_zero_length_samples_are_padded_whole(lengths):
    samples = [np.ones((n, 6), np.float32) for n in lengths]
    out, valid = Pad(pad_val=-1, ret_length=True)(samples)
    np.testing.assert_array_equal(out.asnumpy(), model_pad(samples, 0, -1, 1)[0][0])
    np.testing.assert_array_equal(valid.asnumpy(), lengths)
