"""Parity with gluoncv: run ``gluoncv.data.batchify`` and ``gluonbatch`` side by side.

The contract: with default arguments, gluonbatch's Stack / Pad / Append / Tuple return
exactly what gluoncv 0.10.5.post0 returns for every input gluoncv handles -- values, shapes,
dtypes, containers (tuple vs list, bare NDArray vs list of shards, the (padded, lengths)
pair), valid-length layout and dtype, and shard boundaries -- and every NDArray gluonbatch
returns lives in ``cpu_shared(0)``.

Deliberate differences are *not* tested here (they have their own tests): gluoncv's
``Append(expand=True)`` returns ``cpu(0)`` arrays (so only its values, shapes and dtypes are
compared), gluoncv crashes on uneven shard splits whose first shard size does not divide
correctly and on ``num_shards > batch size``, gluoncv uses the first sample's dtype where
gluonbatch promotes mixed dtypes, gluoncv mishandles negative pad axes, and gluoncv's Pad
rejects tuple samples. The generators below therefore only produce batches gluoncv handles:

* every sample of a batch has the same kind (nested list, numpy array, NDArray) and dtype;
* zero-length dimensions only where gluoncv copes with them (numpy samples; not for
  NDArray samples, not for lists passed to Pad, not for ``Append(expand=True)``);
* pad axes are a non-negative int or a tuple of at least two distinct non-negative axes
  (gluoncv crashes on a one-element tuple and on a list);
* ``num_shards`` such that gluoncv's ``i // first_shard_size`` indexing coincides with the
  ``np.array_split`` boundaries: ``N % num_shards in (0, num_shards - 1)``;
* pad values that gluoncv converts exactly: any float16/float32 value, integers within
  +-2**53, and for float64 only integers and short binary fractions (see ``pad_values``).
  gluonbatch writes every pad value exactly; the tests at the end of the file pin that.

Every comparison (``check_parity``) also checks that gluonbatch leaves its inputs unchanged
and returns fresh memory: overwriting its output must not change any input.
"""
import logging
import math

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import batchify as gcv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gluonbatch.batchify as gb
from helpers import (SHARED, assert_same_batch, assert_unchanged, examples, overwrite_all,
                     snapshot)

FLOAT_DTYPES = (np.float32, np.float64, np.float16)
INT_DTYPES = (np.uint8, np.int8, np.int32, np.int64)
DTYPES = tuple(np.dtype(t) for t in FLOAT_DTYPES + INT_DTYPES)
KINDS = ('list', 'numpy', 'ndarray')
MAX_BATCH = 8
MAX_DIM = 4

# Hypothesis budgets: the whole file runs in well under a minute on 2 cores.
FAST = settings(max_examples=examples(200), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
SLOW = settings(max_examples=examples(150), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(autouse=True)
def _quiet_gluoncv_shard_warning():
    # gluoncv logs a warning for every uneven (but valid) shard split.
    logger = logging.getLogger()
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


# --------------------------------------------------------------------------------------
# Comparison helpers
# --------------------------------------------------------------------------------------

def check_parity(samples, ours_fn, theirs_fn, compare_context=True):
    """Run both implementations on ``samples`` and check the whole contract.

    gluonbatch must not modify its inputs, must return exactly what gluoncv returns, and
    must not alias its inputs (overwriting its output leaves the inputs unchanged).
    Returns (a fresh gluonbatch result, the gluoncv result).
    """
    before = snapshot(samples)
    ours = ours_fn(samples)
    assert_unchanged(before, snapshot(samples), 'input after gluonbatch')
    theirs = theirs_fn(samples)
    assert_unchanged(before, snapshot(samples), 'input after gluoncv')
    assert_same_batch(ours, theirs, compare_context, arrays_only=True)
    overwrite_all(ours)
    assert_unchanged(before, snapshot(samples), 'input after writing to the output')
    # A second call is unaffected by writes to the first call's output (no reuse or caching);
    # it is returned for the explicit tests to inspect.
    again = ours_fn(samples)
    assert_same_batch(again, theirs, compare_context, arrays_only=True)
    return again, theirs


# --------------------------------------------------------------------------------------
# The documented examples of gluoncv's classes (gluoncv/data/batchify.py docstrings)
# --------------------------------------------------------------------------------------

def _values(array):
    return array.asnumpy().tolist()


def test_doc_stack_lists():
    a, b, c = [1, 2, 3, 4], [4, 5, 6, 8], [8, 9, 1, 2]
    ours, _ = check_parity([a, b, c], gb.Stack(), gcv.Stack())
    assert ours.dtype == np.float32
    assert _values(ours) == [[1, 2, 3, 4], [4, 5, 6, 8], [8, 9, 1, 2]]


def test_doc_stack_numpy():
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = np.array([[5, 6, 7, 8], [1, 2, 3, 4]])
    ours, _ = check_parity([a, b], gb.Stack(), gcv.Stack())
    assert ours.shape == (2, 2, 4) and ours.dtype == np.float32
    assert _values(ours) == [[[1, 2, 3, 4], [5, 6, 7, 8]], [[5, 6, 7, 8], [1, 2, 3, 4]]]


def test_doc_stack_ndarrays():
    a = mx.nd.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = mx.nd.array([[5, 6, 7, 8], [1, 2, 3, 4]])
    ours, _ = check_parity([a, b], gb.Stack(), gcv.Stack())
    assert ours.shape == (2, 2, 4) and ours.dtype == np.float32
    assert _values(ours) == [[[1, 2, 3, 4], [5, 6, 7, 8]], [[5, 6, 7, 8], [1, 2, 3, 4]]]


def test_doc_pad_lists():
    a, b, c = [1, 2, 3, 4], [4, 5, 6], [8, 2]
    ours, _ = check_parity([a, b, c], gb.Pad(), gcv.Pad())
    assert ours.dtype == np.int64
    assert _values(ours) == [[1, 2, 3, 4], [4, 5, 6, 0], [8, 2, 0, 0]]


def test_doc_pad_lists_ret_length():
    a, b, c = [1, 2, 3, 4], [4, 5, 6], [8, 2]
    (padded, lengths), _ = check_parity([a, b, c], gb.Pad(ret_length=True),
                                        gcv.Pad(ret_length=True))
    assert _values(padded) == [[1, 2, 3, 4], [4, 5, 6, 0], [8, 2, 0, 0]]
    assert lengths.dtype == np.int32 and _values(lengths) == [4, 3, 2]


def test_doc_pad_numpy_axis1():
    a = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = np.array([[5, 8], [1, 2]])
    ours, _ = check_parity([a, b], gb.Pad(axis=1, pad_val=-1), gcv.Pad(axis=1, pad_val=-1))
    assert ours.dtype == np.int64
    assert _values(ours) == [[[1, 2, 3, 4], [5, 6, 7, 8]], [[5, 8, -1, -1], [1, 2, -1, -1]]]


def test_doc_pad_ndarrays_axis1():
    a = mx.nd.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    b = mx.nd.array([[5, 8], [1, 2]])
    ours, _ = check_parity([a, b], gb.Pad(axis=1, pad_val=-1), gcv.Pad(axis=1, pad_val=-1))
    assert ours.dtype == np.float32
    assert _values(ours) == [[[1, 2, 3, 4], [5, 6, 7, 8]], [[5, 8, -1, -1], [1, 2, -1, -1]]]


def test_doc_append():
    # gluoncv's docstring shows cpu_shared(0), but gluoncv really returns cpu(0) arrays
    # for expand=True: a deliberate difference, so contexts are not compared.
    a, b, c = [1, 2, 3, 4], [4, 5, 6], [8, 2]
    ours, _ = check_parity([a, b, c], gb.Append(), gcv.Append(), compare_context=False)
    assert [x.shape for x in ours] == [(1, 4), (1, 3), (1, 2)]
    assert [x.dtype for x in ours] == [np.float32] * 3


@pytest.mark.parametrize('make', [
    lambda m: m.Tuple(m.Pad(), m.Stack()),
    lambda m: m.Tuple([m.Pad(), m.Stack()]),
    lambda m: m.Tuple((m.Pad(), m.Stack())),
], ids=['args', 'list', 'tuple'])
def test_doc_tuple_pad_stack(make):
    a, b = ([1, 2, 3, 4], 0), ([5, 7], 1)
    (data, label), _ = check_parity([a, b], make(gb), make(gcv))
    assert data.dtype == np.int64 and _values(data) == [[1, 2, 3, 4], [5, 7, 0, 0]]
    assert label.dtype == np.float32 and _values(label) == [0, 1]


def test_doc_tuple_pad_pad_stack():
    a = ([1, 2, 3, 4], [5, 6], 1)
    b = ([1, 2], [3, 4, 5, 6], 0)
    c = ([1], [2, 3, 4, 5, 6], 0)
    (first, second, label), _ = check_parity(
        [a, b, c], gb.Tuple(gb.Pad(), gb.Pad(), gb.Stack()),
        gcv.Tuple(gcv.Pad(), gcv.Pad(), gcv.Stack()))
    assert _values(first) == [[1, 2, 3, 4], [1, 2, 0, 0], [1, 0, 0, 0]]
    assert _values(second) == [[5, 6, 0, 0, 0], [3, 4, 5, 6, 0], [2, 3, 4, 5, 6]]
    assert _values(label) == [1, 0, 0]


# --------------------------------------------------------------------------------------
# A few explicit cases of the layout rules
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize('n, num_shards', [
    (6, 2), (6, 3), (6, 6), (5, 2), (8, 3), (7, 4), (3, 2), (4, 1), (1, 1)])
@pytest.mark.parametrize('ret_length', [False, True])
def test_pad_device_slices(n, num_shards, ret_length):
    samples = [list(range(1, 2 + (i * 5) % 7)) for i in range(n)]
    ours, theirs = check_parity(
        samples, gb.Pad(num_shards=num_shards, ret_length=ret_length, pad_val=-1),
        gcv.Pad(num_shards=num_shards, ret_length=ret_length, pad_val=-1))
    padded = ours[0] if ret_length else ours
    slices = [padded] if num_shards == 1 else padded
    assert sum(s.shape[0] for s in slices) == n
    assert [s.shape[0] for s in slices] == [len(p) for p in np.array_split(range(n), num_shards)]


@pytest.mark.parametrize('axis', [(1, 2), (2, 1), (0, 2), (0, 1, 2), (2, 0, 1)])
@pytest.mark.parametrize('num_shards', [1, 2])
def test_pad_tuple_axis_lengths(axis, num_shards):
    rng = np.random.RandomState(0)
    samples = []
    for i in range(4):
        shape = [3, 2, 4]
        for ax in axis:
            shape[ax] = 1 + (i + ax) % 3
        samples.append(rng.randint(0, 255, size=shape).astype('uint8'))
    ours, _ = check_parity(
        samples, gb.Pad(axis=axis, num_shards=num_shards, ret_length=True, pad_val=7),
        gcv.Pad(axis=axis, num_shards=num_shards, ret_length=True, pad_val=7))
    lengths = [ours[1]] if num_shards == 1 else ours[1]
    for part in lengths:
        assert part.dtype == np.int32 and part.shape[1:] == (len(axis),)
    got = np.concatenate([part.asnumpy() for part in lengths])
    assert got.tolist() == [[s.shape[ax] for ax in axis] for s in samples]


def test_pad_numpy_zero_length():
    samples = [np.zeros((0, 3), 'float32'), np.ones((2, 3), 'float32'), np.ones((0, 3), 'float32')]
    check_parity(samples, gb.Pad(ret_length=True, pad_val=5), gcv.Pad(ret_length=True, pad_val=5))


@pytest.mark.parametrize('kind', ['numpy', 'ndarray'])
@pytest.mark.parametrize('num_shards', [1, 2])
def test_pad_large_images(kind, num_shards):
    # Outputs of several MiB: gluonbatch copies these with several threads.
    rng = np.random.RandomState(num_shards)
    images = [rng.uniform(-1, 1, size=(3, 400 + 17 * i, 500 - 13 * i)).astype('float32')
              for i in range(6)]
    if kind == 'ndarray':
        images = [mx.nd.array(image) for image in images]
    ours, _ = check_parity(
        images, gb.Pad(axis=(1, 2), num_shards=num_shards, ret_length=True),
        gcv.Pad(axis=(1, 2), num_shards=num_shards, ret_length=True))
    padded = ours[0] if num_shards == 1 else ours[0][0]
    assert padded.size * 4 > 4 << 20


@pytest.mark.parametrize('kind', ['numpy', 'ndarray'])
def test_stack_large_images(kind):
    rng = np.random.RandomState(7)
    images = [rng.randint(0, 256, size=(256, 256, 3)).astype('uint8') for _ in range(8)]
    if kind == 'ndarray':
        images = [mx.nd.array(image, dtype='uint8') for image in images]
    ours, _ = check_parity(images, gb.Stack(), gcv.Stack())
    assert ours.dtype == (np.uint8 if kind == 'ndarray' else np.float32)


@pytest.mark.parametrize('expand', [True, False])
def test_append_ndarray_inputs_are_copied(expand):
    # gluoncv returns the very input object for a cpu_shared NDArray with expand=False;
    # gluonbatch always returns a fresh array (checked by check_parity's overwrite).
    samples = [mx.nd.array([1, 2, 3], ctx=SHARED, dtype='int32'),
               mx.nd.array([4], ctx=SHARED, dtype='int32')]
    check_parity(samples, gb.Append(expand=expand), gcv.Append(expand=expand),
                 compare_context=not expand)


# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

def gluoncv_shard_counts(n):
    """num_shards values for which gluoncv shards a batch of n correctly."""
    return [k for k in range(1, n + 1) if n % k in (0, k - 1)]


def pad_values(dtype):
    """Pad values that gluoncv turns into exactly that value of ``dtype``.

    gluoncv fills with ``mx.nd.full``, which sends ``str(pad_val)`` through MXNet's own
    (not correctly rounding) string-to-double parser, then converts the double to the dtype
    (float16 via float32). Every float16 and float32 value survives that, and so does every
    integer within +-2**53; but about a quarter of arbitrary float64 values do not (see the
    pad-value tests at the end), so float64 pad values are integers and short binary
    fractions here.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in 'iu':
        info = np.iinfo(dtype)
        ints = st.integers(max(int(info.min), -2 ** 53), min(int(info.max), 2 ** 53))
        return st.one_of(ints, ints.map(float), ints.map(dtype.type))
    if dtype == np.float64:
        scalars = st.one_of(
            st.integers(-2 ** 53, 2 ** 53).map(float),
            st.builds(lambda k, m: k / 2.0 ** m, st.integers(-1024, 1024), st.integers(0, 10)),
            st.sampled_from([math.nan, math.inf, -math.inf, -0.0]))
        return st.one_of(st.sampled_from([0, 1, -1]), scalars, scalars.map(np.float64))
    scalars = hnp.from_dtype(dtype)  # includes NaN, +-inf, subnormals, -0.0
    return st.one_of(st.sampled_from([0, 1, -1]), scalars.map(float), scalars)


def list_dtype(dtype):
    """The dtype np.asarray gives a nested list made by ``ndarray.tolist()``."""
    return np.dtype(np.float64 if np.dtype(dtype).kind == 'f' else np.int64)


@st.composite
def as_kind(draw, array, kind):
    """``array``'s values as a nested list, a numpy array (in some memory layout) or an
    NDArray (in cpu or cpu_shared memory, maybe a view or the result of a pending op)."""
    if kind == 'list':
        return array.tolist()
    if kind == 'numpy':
        if array.ndim == 0:
            return draw(st.sampled_from([array.copy(), array[()]]))
        layout = draw(st.sampled_from(['c', 'fortran', 'strided', 'reversed']))
        if layout == 'c':
            return array.copy()
        if layout == 'fortran':
            return np.asfortranarray(array)
        if layout == 'strided':
            wide = np.full(array.shape[:-1] + (2 * array.shape[-1],), 99, array.dtype)
            wide[..., ::2] = array
            return wide[..., ::2]
        return np.flip(np.flip(array, 0).copy(), 0)
    ctx = draw(st.sampled_from([mx.cpu(0), SHARED]))
    variant = draw(st.sampled_from(['plain', 'slice', 'pending']))
    if variant == 'plain':
        return mx.nd.array(array, ctx=ctx, dtype=array.dtype)
    if variant == 'slice':
        # A view into a larger NDArray (its data does not start at the allocation).
        border = np.full((1,) + array.shape[1:], 99, array.dtype)
        big = mx.nd.array(np.concatenate([border, array, border]), ctx=ctx, dtype=array.dtype)
        return big[1:1 + array.shape[0]]
    return mx.nd.array(array, ctx=ctx, dtype=array.dtype).copy()


class Case:
    """One field of a batch: samples, gluonbatch and gluoncv functions, context flag."""

    def __init__(self, samples, ours, theirs, compare_context=True, desc='', kwargs=None):
        self.samples, self.ours, self.theirs = samples, ours, theirs
        self.compare_context, self.desc, self.kwargs = compare_context, desc, kwargs or {}

    def __repr__(self):
        return 'Case(%s, samples=%r)' % (self.desc, self.samples)


def _dims(min_dim, count):
    return st.lists(st.integers(min_dim, MAX_DIM), min_size=count, max_size=count)


@st.composite
def stack_cases(draw, n=None):
    n = n or draw(st.integers(1, MAX_BATCH))
    kind = draw(st.sampled_from(KINDS))
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(1 if kind == 'ndarray' else 0, 3))
    # gluoncv cannot stack zero-size NDArrays (legacy shapes treat 0 as unknown).
    shape = tuple(draw(_dims(1 if kind == 'ndarray' else 0, rank)))
    samples = [draw(as_kind(draw(hnp.arrays(dtype, shape)), kind)) for _ in range(n)]
    return Case(samples, gb.Stack(), gcv.Stack(), True,
                'Stack %s %s %s' % (kind, dtype, shape))


@st.composite
def pad_axes(draw, rank):
    """A non-negative int, or a tuple of >= 2 distinct non-negative axes in any order."""
    if rank == 1 or draw(st.booleans()):
        return draw(st.integers(0, rank - 1))
    order = draw(st.permutations(range(rank)))
    return tuple(order[:draw(st.integers(2, rank))])


@st.composite
def pad_cases(draw, n=None, ret_length=None):
    n = n or draw(st.integers(1, MAX_BATCH))
    kind = draw(st.sampled_from(KINDS))
    dtype = draw(st.sampled_from(DTYPES))
    rank = draw(st.integers(1, 3))
    axis = draw(pad_axes(rank))
    axes = (axis,) if isinstance(axis, int) else axis
    # Zero-length dims: numpy samples only (gluoncv fails to copy zero-size NDArrays, and a
    # zero-length nested list changes dtype and rank under np.asarray).
    min_dim = 0 if kind == 'numpy' else 1
    base = draw(_dims(min_dim, rank))
    samples = []
    for _ in range(n):
        shape = tuple(draw(st.integers(min_dim, MAX_DIM)) if ax in axes else base[ax]
                      for ax in range(rank))
        samples.append(draw(as_kind(draw(hnp.arrays(dtype, shape)), kind)))
    out_dtype = list_dtype(dtype) if kind == 'list' else dtype
    pad_val = draw(pad_values(out_dtype))
    num_shards = draw(st.sampled_from(gluoncv_shard_counts(n)))
    if ret_length is None:
        ret_length = draw(st.booleans())
    kwargs = dict(axis=axis, pad_val=pad_val, num_shards=num_shards, ret_length=ret_length)
    return Case(samples, gb.Pad(**kwargs), gcv.Pad(**kwargs), True,
                'Pad %s %s %r' % (kind, dtype, kwargs), kwargs)


@st.composite
def append_cases(draw, n=None):
    n = n or draw(st.integers(1, MAX_BATCH))
    kind = draw(st.sampled_from(KINDS))
    dtype = draw(st.sampled_from(DTYPES))
    expand = draw(st.booleans())
    # gluoncv's expand_dims fails on 0-d and zero-size arrays; NDArrays: rank >= 1, no zeros.
    min_rank = 1 if expand or kind == 'ndarray' else 0
    min_dim = 1 if expand or kind == 'ndarray' else 0
    ranks = draw(st.lists(st.integers(min_rank, 3), min_size=n, max_size=n))
    samples = [draw(as_kind(draw(hnp.arrays(dtype, tuple(draw(_dims(min_dim, r))))), kind))
               for r in ranks]
    kwargs = {'expand': expand}
    if expand:
        low = min(ranks)
        batch_axis = draw(st.one_of(st.just(0), st.integers(-low - 1, low)))
        if batch_axis != 0 or draw(st.booleans()):
            kwargs['batch_axis'] = batch_axis
    elif draw(st.booleans()):
        kwargs['batch_axis'] = draw(st.integers(-3, 3))  # ignored without expand
    return Case(samples, gb.Append(**kwargs), gcv.Append(**kwargs), not expand,
                'Append %s %s %r' % (kind, dtype, kwargs))


@st.composite
def tuple_cases(draw, n=None, depth=0):
    n = n or draw(st.integers(1, MAX_BATCH))
    field_kinds = [stack_cases, pad_cases, append_cases]
    if depth == 0:
        field_kinds.append(lambda n: tuple_cases(n=n, depth=1))
    fields = draw(st.lists(st.sampled_from(field_kinds), min_size=1, max_size=4))
    cases = [draw(make(n=n)) for make in fields]
    container = draw(st.sampled_from([tuple, list]))
    samples = [container(case.samples[i] for case in cases) for i in range(n)]
    style = draw(st.sampled_from(['args', 'list', 'tuple']))

    def build(module, fns):
        if style == 'args':
            return module.Tuple(*fns)
        return module.Tuple(list(fns) if style == 'list' else tuple(fns))

    return Case(samples, build(gb, [c.ours for c in cases]), build(gcv, [c.theirs for c in cases]),
                tuple(c.compare_context for c in cases),
                'Tuple(%s) over %s' % (', '.join(c.desc for c in cases), container.__name__))


def _run(case):
    check_parity(case.samples, case.ours, case.theirs, case.compare_context)


# --------------------------------------------------------------------------------------
# Property tests
# --------------------------------------------------------------------------------------

@FAST
@given(stack_cases())
def test_stack_parity(case):
    _run(case)


@FAST
@given(pad_cases())
def test_pad_parity(case):
    _run(case)


@FAST
@given(append_cases())
def test_append_parity(case):
    _run(case)


@SLOW
@given(tuple_cases())
def test_tuple_parity(case):
    _run(case)


@FAST
@given(pad_cases(ret_length=True))
def test_pad_valid_lengths_are_int32_in_sample_order(case):
    """Beyond parity: the lengths are the samples' own pad-axis lengths, in order."""
    padded, lengths = case.ours(case.samples)
    num_shards = case.kwargs['num_shards']
    assert isinstance(lengths, list) == (num_shards > 1)
    shards = lengths if num_shards > 1 else [lengths]
    assert all(s.dtype == np.int32 and s.context == SHARED for s in shards)
    got = np.concatenate([s.asnumpy() for s in shards]).tolist()
    axis = case.kwargs['axis']
    if isinstance(axis, int):
        want = [np.shape(s)[axis] for s in case.samples]
    else:
        want = [[np.shape(s)[ax] for ax in axis] for s in case.samples]
    assert got == want


# --------------------------------------------------------------------------------------
# Pad values: a deliberate difference. gluoncv fills the padding with mx.nd.full, whose
# value travels as str(pad_val) through MXNet's string-to-double parser (not correctly
# rounded), reaches float16 via float32, and loses integers above 2**53. gluonbatch writes
# exactly the value numpy converts pad_val to. These tests pin the exact behaviour.
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize('pad_val, samples', [
    (9.787379841057393e-05, [[0.5], [0.5, 0.25]]),
    (1.7976931348623157e+308, [[0.5], [0.5, 0.25]]),
    (1e-300, [[0.5], [0.5, 0.25]]),
    (1 + 2 ** -11 + 2 ** -40, [np.zeros((1,), 'float16'), np.zeros((2,), 'float16')]),
    (2 ** 53 + 1, [np.zeros((1,), 'int64'), np.zeros((2,), 'int64')]),
    (2 ** 63 - 1, [np.zeros((1,), 'int64'), np.zeros((2,), 'int64')]),
])
def test_pad_value_is_written_exactly(pad_val, samples):
    out = gb.Pad(pad_val=pad_val)(samples).asnumpy()
    expected = np.array(pad_val, dtype=out.dtype)
    assert out[0, 1].tobytes() == expected.tobytes()
