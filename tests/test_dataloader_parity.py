"""Parity with gluoncv's data-loading helpers: run gluoncv and gluonbatch side by side.

Batchify functions: ``gluonbatch.dataloader``'s ``default_batchify_fn``,
``default_mp_batchify_fn``, ``default_pad_batchify_fn``, ``default_mp_pad_batchify_fn`` and
``tsn_mp_batchify_fn`` against ``gluoncv.data.dataloader`` (whose plain/mp batchify
functions are MXNet's), and ``gluonbatch.batchify``'s ``ms_batchify_fn`` /
``dict_batchify_fn`` against ``gluoncv.data.segbase`` / ``gluoncv.data.kitti.kitti_utils``.
Containers (list vs tuple vs dict, with key order), shapes, dtypes and values must be
identical, every gluonbatch NDArray must be in ``cpu_shared(0)``, the inputs must be left
unchanged and the outputs must not alias them.

Contexts of gluoncv's results are not compared: gluoncv's non-``_mp_`` functions (and the
NDArray path of ``tsn_mp_batchify_fn``, and ``ms_batchify_fn``, which returns its inputs)
give ``cpu(0)`` arrays, gluonbatch always ``cpu_shared(0)`` (a documented difference).

Only inputs gluoncv handles are generated: one dtype and kind (numpy / NDArray) per field of
a batch; gluoncv's pad functions get NDArray images and rank-2 numpy labels (not uint8:
gluonbatch rejects a -1 pad into uint8 on purpose, pinned at the end of the pad section);
zero-size dimensions only for numpy samples.

Loaders: ``DetectionDataLoader`` and ``RandomTransformDataLoader`` of both libraries, with
0, 1 and 2 workers, must produce the same sequence of batches; gluonbatch's loaders must
raise the original error of a batch that failed to load, with a note naming its dataset
indices, and keep working afterwards.
Transforms are module-level functions so that gluoncv's workers can pickle them.
"""
import multiprocessing
import warnings

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import dataloader as gcv
from gluoncv.data.kitti.kitti_utils import dict_batchify_fn as gcv_dict_batchify_fn
from gluoncv.data.segbase import ms_batchify_fn as gcv_ms_batchify_fn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gluonbatch.batchify as gbb
import gluonbatch.dataloader as gb
from helpers import (SHARED, assert_same_batch, assert_unchanged, examples, overwrite_all,
                     snapshot)

DTYPES = tuple(np.dtype(t) for t in (
    'float16', 'float32', 'float64', 'uint8', 'int8', 'int32', 'int64', 'bool'))
# gluoncv pads labels with -1, which gluonbatch refuses to write into uint8 (see below).
LABEL_DTYPES = tuple(np.dtype(t) for t in ('float16', 'float32', 'float64', 'int8', 'int32',
                                           'int64'))
MAX_BATCH = 6

EXAMPLES = settings(max_examples=examples(35), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

BATCHIFY_PAIRS = [
    pytest.param(gb.default_batchify_fn, gcv.default_batchify_fn, id='default'),
    pytest.param(gb.default_mp_batchify_fn, gcv.default_mp_batchify_fn, id='default_mp'),
]
PAD_PAIRS = [
    pytest.param(gb.default_pad_batchify_fn, gcv.default_pad_batchify_fn, id='pad'),
    pytest.param(gb.default_mp_pad_batchify_fn, gcv.default_mp_pad_batchify_fn, id='mp_pad'),
]


# --------------------------------------------------------------------------------------
# Comparison helpers
# --------------------------------------------------------------------------------------

def gluoncv_call(fn, samples):
    with warnings.catch_warnings():
        # numpy 1.23 warns when gluoncv turns ragged label lists into object arrays.
        warnings.simplefilter('ignore')
        return fn(samples)


def check_parity(samples, ours_fn, theirs_fn):
    """Both implementations on ``samples``: equal results, inputs unchanged, no aliasing."""
    before = snapshot(samples)
    ours = ours_fn(samples)
    assert_unchanged(before, snapshot(samples), 'input after gluonbatch')
    theirs = gluoncv_call(theirs_fn, samples)
    assert_same_batch(ours, theirs, compare_context=False)
    overwrite_all(ours)
    assert_unchanged(before, snapshot(samples), 'input after writing to the output')
    again = ours_fn(samples)
    assert_same_batch(again, theirs, compare_context=False)
    return again, theirs


# --------------------------------------------------------------------------------------
# Strategies
# --------------------------------------------------------------------------------------

def arrays_of(draw, dtype, shape, count, kind):
    arrays = [draw(hnp.arrays(dtype, shape)) for _ in range(count)]
    if kind == 'ndarray':
        return [mx.nd.array(array, dtype=dtype) for array in arrays]
    return arrays


@st.composite
def same_shape_arrays(draw, kinds=('numpy', 'ndarray'), dtypes=DTYPES, count=None):
    """One field of a batch: arrays of one kind, shape and dtype."""
    kind = draw(st.sampled_from(kinds))
    dtype = draw(st.sampled_from(dtypes))
    # Legacy NDArrays have no 0-d or zero-size form gluoncv copes with.
    shape = draw(hnp.array_shapes(min_dims=0 if kind == 'numpy' else 1, max_dims=3,
                                  min_side=0 if kind == 'numpy' else 1, max_side=4))
    count = count if count is not None else draw(st.integers(1, MAX_BATCH))
    return arrays_of(draw, dtype, shape, count, kind)


def python_numbers(kind):
    ints = st.integers(-2 ** 62, 2 ** 62)
    floats = st.floats(width=64)
    return {'int': ints, 'float': floats, 'bool': st.booleans(),
            'mixed': st.one_of(ints, floats)}[kind]


@st.composite
def number_batches(draw, count=None):
    count = count if count is not None else draw(st.integers(1, MAX_BATCH))
    kind = draw(st.sampled_from(['int', 'float', 'bool', 'mixed', 'numpy']))
    if kind == 'numpy':  # numpy scalars of one dtype
        dtype = draw(st.sampled_from(DTYPES))
        return [array[()] for array in
                (draw(hnp.arrays(dtype, ())) for _ in range(count))]
    return draw(st.lists(python_numbers(kind), min_size=count, max_size=count))


@st.composite
def label_rows(draw, count):
    """Numbers of label rows per sample: varied, some zero, or all zero."""
    mode = draw(st.sampled_from(['varied', 'some_zero', 'all_zero', 'equal']))
    if mode == 'all_zero':
        return [0] * count
    if mode == 'equal':
        return [draw(st.integers(0, 4))] * count
    rows = draw(st.lists(st.integers(0 if mode == 'varied' else 1, 5),
                         min_size=count, max_size=count))
    if mode == 'some_zero':
        zeros = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=count))
        for index in zeros:
            rows[index] = 0
    return rows


@st.composite
def labels(draw, rows, dtype=None, width=6):
    dtype = dtype if dtype is not None else draw(st.sampled_from(LABEL_DTYPES))
    return [draw(hnp.arrays(dtype, (m, width))) for m in rows]


@st.composite
def detection_batches(draw, pad):
    """Detection-style tuples: (image, label (M_i, 6)[, extras]).

    For gluoncv's pad functions images are NDArrays (gluoncv pads any numpy field) and the
    extras are more rank-2 numpy labels; otherwise every label of a batch has the same M
    and images may be numpy arrays, with Python numbers as extras.
    """
    count = draw(st.integers(1, MAX_BATCH))
    images = draw(same_shape_arrays(kinds=('ndarray',) if pad else ('numpy', 'ndarray'),
                                    count=count))
    rows = draw(label_rows(count)) if pad else [draw(st.integers(0, 4))] * count
    first = draw(labels(rows))
    layout = draw(st.sampled_from(['pair', 'nested', 'flat3']))
    if layout == 'pair':
        return list(zip(images, first))
    if pad:
        second = draw(labels(draw(label_rows(count)), width=draw(st.integers(1, 5))))
    else:
        second = draw(number_batches(count=count))
    if layout == 'flat3':
        return list(zip(images, first, second))
    return [(image, (label, extra)) for image, label, extra in zip(images, first, second)]


# --------------------------------------------------------------------------------------
# default_batchify_fn / default_mp_batchify_fn
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize('ours_fn, theirs_fn', BATCHIFY_PAIRS)
@EXAMPLES
@given(samples=same_shape_arrays())
def test_default_arrays(ours_fn, theirs_fn, samples):
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    assert ours.shape == (len(samples),) + samples[0].shape
    assert np.dtype(ours.dtype) == np.dtype(samples[0].dtype)


@pytest.mark.parametrize('ours_fn, theirs_fn', BATCHIFY_PAIRS)
@EXAMPLES
@given(samples=number_batches())
def test_default_numbers(ours_fn, theirs_fn, samples):
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    assert ours.shape == (len(samples),)


@pytest.mark.parametrize('ours_fn, theirs_fn', BATCHIFY_PAIRS)
@EXAMPLES
@given(samples=detection_batches(pad=False))
def test_default_detection_tuples(ours_fn, theirs_fn, samples):
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    assert type(ours) is list and len(ours) == len(samples[0])


@pytest.mark.parametrize('ours_fn, theirs_fn', BATCHIFY_PAIRS)
def test_default_explicit_cases(ours_fn, theirs_fn):
    # dtypes kept: int64 from Python ints, float64 from mixed numbers, uint8 arrays
    ours, _ = check_parity([1, 2, 3], ours_fn, theirs_fn)
    assert ours.dtype == np.int64 and ours.asnumpy().tolist() == [1, 2, 3]
    ours, _ = check_parity([1, 2.5], ours_fn, theirs_fn)
    assert ours.dtype == np.float64 and ours.asnumpy().tolist() == [1.0, 2.5]
    images = [np.full((2, 3), i, 'uint8') for i in range(4)]
    ours, _ = check_parity(images, ours_fn, theirs_fn)
    assert ours.dtype == np.uint8 and ours.asnumpy()[:, 0, 0].tolist() == [0, 1, 2, 3]
    # lists of numbers are arrays; nested tuples give nested lists
    ours, _ = check_parity([[1, 2], [3, 4]], ours_fn, theirs_fn)
    assert ours.asnumpy().tolist() == [[1, 2], [3, 4]]
    samples = [(mx.nd.ones((2, 2)) * i, (np.zeros((0, 6), 'float32'), i)) for i in range(3)]
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    assert [type(x) for x in ours] == [mx.nd.NDArray, list]
    assert ours[1][0].shape == (3, 0, 6) and ours[1][1].asnumpy().tolist() == [0, 1, 2]


# --------------------------------------------------------------------------------------
# default_pad_batchify_fn / default_mp_pad_batchify_fn
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize('ours_fn, theirs_fn', PAD_PAIRS)
@EXAMPLES
@given(samples=detection_batches(pad=True))
def test_pad_detection_tuples(ours_fn, theirs_fn, samples):
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    label = samples[0][1][0] if isinstance(samples[0][1], tuple) else samples[0][1]
    padded = ours[1][0] if isinstance(ours[1], list) else ours[1]
    rows = max([1] + [len(s[1][0] if isinstance(s[1], tuple) else s[1]) for s in samples])
    assert padded.shape == (len(samples), rows, 6)
    assert np.dtype(padded.dtype) == label.dtype


@pytest.mark.parametrize('ours_fn, theirs_fn', PAD_PAIRS)
@EXAMPLES
@given(data=st.data())
def test_pad_bare_labels(ours_fn, theirs_fn, data):
    count = data.draw(st.integers(1, MAX_BATCH))
    samples = data.draw(labels(data.draw(label_rows(count)), width=data.draw(st.integers(1, 7))))
    check_parity(samples, ours_fn, theirs_fn)


@pytest.mark.parametrize('ours_fn, theirs_fn', PAD_PAIRS)
@pytest.mark.parametrize('dtype', LABEL_DTYPES, ids=str)
def test_pad_all_labels_empty(ours_fn, theirs_fn, dtype):
    samples = [(mx.nd.ones((3, 2, 2)) * i, np.zeros((0, 6), dtype)) for i in range(3)]
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    assert ours[1].shape == (3, 1, 6) and np.dtype(ours[1].dtype) == dtype
    assert (ours[1].asnumpy() == -1).all()


@pytest.mark.parametrize('ours_fn, theirs_fn', PAD_PAIRS)
def test_pad_some_labels_empty(ours_fn, theirs_fn):
    samples = [(mx.nd.ones((1, 2, 2)) * i, np.full((i % 3, 6), i, 'float32'))
               for i in range(5)]
    ours, _ = check_parity(samples, ours_fn, theirs_fn)
    got = ours[1].asnumpy()
    assert got.shape == (5, 2, 6)
    for i in range(5):
        assert (got[i, :i % 3] == i).all() and (got[i, i % 3:] == -1).all()


@pytest.mark.parametrize('ours_fn', [gb.default_pad_batchify_fn,
                                     gb.default_mp_pad_batchify_fn])
def test_pad_uint8_labels_rejected(ours_fn):
    # Documented difference: gluoncv silently pads uint8 labels with 255.
    with pytest.raises(ValueError, match='cannot be stored in uint8'):
        ours_fn([np.ones((1, 6), 'uint8'), np.ones((2, 6), 'uint8')])


# --------------------------------------------------------------------------------------
# tsn_mp_batchify_fn
# --------------------------------------------------------------------------------------

@st.composite
def tsn_clips(draw, count):
    """NDArrays that already have a batch axis: (k_i,) + trailing shape, one dtype."""
    dtype = draw(st.sampled_from(DTYPES[:-1]))
    trailing = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3))
    clips = []
    for _ in range(count):
        k = draw(st.integers(1, 4))
        clips.append(mx.nd.array(draw(hnp.arrays(dtype, (k,) + trailing)), dtype=dtype))
    return clips


@st.composite
def tsn_batches(draw):
    count = draw(st.integers(1, MAX_BATCH))
    layout = draw(st.sampled_from(['clips', 'numpy', 'numbers', 'clip_label']))
    if layout == 'clips':
        return draw(tsn_clips(count))
    if layout == 'numpy':
        return draw(same_shape_arrays(kinds=('numpy',), count=count))
    if layout == 'numbers':
        return draw(number_batches(count=count))
    return list(zip(draw(tsn_clips(count)), draw(number_batches(count=count))))


@EXAMPLES
@given(samples=tsn_batches())
def test_tsn(samples):
    check_parity(samples, gb.tsn_mp_batchify_fn, gcv.tsn_mp_batchify_fn)


def test_tsn_explicit():
    clips = [mx.nd.ones((2, 3), dtype='uint8') * i for i in (1, 2)]
    ours, _ = check_parity([(clips[0], 0), (clips[1], 1)], gb.tsn_mp_batchify_fn,
                           gcv.tsn_mp_batchify_fn)
    assert type(ours) is list and ours[0].shape == (4, 3) and ours[0].dtype == np.uint8
    assert ours[0].asnumpy()[:, 0].tolist() == [1, 1, 2, 2]
    assert ours[1].dtype == np.int64 and ours[1].asnumpy().tolist() == [0, 1]


# --------------------------------------------------------------------------------------
# ms_batchify_fn (gluoncv.data.segbase) and dict_batchify_fn (gluoncv.data.kitti)
# --------------------------------------------------------------------------------------

@st.composite
def ms_images(draw, count):
    """NDArrays of different shapes and dtypes: ms_batchify_fn lists them unchanged."""
    out = []
    for _ in range(count):
        dtype = draw(st.sampled_from(DTYPES))
        shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
        out.append(mx.nd.array(draw(hnp.arrays(dtype, shape)), dtype=dtype))
    return out


@st.composite
def ms_batches(draw):
    count = draw(st.integers(1, MAX_BATCH))
    names = draw(st.lists(st.text(max_size=4), min_size=count, max_size=count))
    layout = draw(st.sampled_from(['images', 'names', 'pair', 'nested']))
    if layout == 'images':
        return draw(ms_images(count))
    if layout == 'names':
        return names
    if layout == 'pair':
        return list(zip(draw(ms_images(count)), names))
    return [(image, (mask, name)) for image, mask, name in
            zip(draw(ms_images(count)), draw(ms_images(count)), names)]


@EXAMPLES
@given(samples=ms_batches())
def test_ms_batchify(samples):
    ours, _ = check_parity(samples, gbb.ms_batchify_fn, gcv_ms_batchify_fn)
    assert type(ours) is list


def test_ms_batchify_copies():
    # gluoncv returns the very input arrays; gluonbatch fresh cpu_shared copies.
    images = [mx.nd.ones((3, 4)), mx.nd.zeros((3, 6), dtype='int32')]
    ours = gbb.ms_batchify_fn(images)
    assert all(a is not b for a, b in zip(ours, images))
    assert [a.context for a in ours] == [SHARED, SHARED]
    assert [a.dtype for a in ours] == [np.float32, np.int32]
    ours[0][:] = 7
    assert (images[0].asnumpy() == 1).all()


@st.composite
def dict_schema(draw, depth=0):
    """key -> (shape, dtype) leaf or nested schema."""
    keys = draw(st.lists(st.sampled_from('abcdefgh'), min_size=1, max_size=4, unique=True))
    schema = {}
    for key in keys:
        if depth < 2 and draw(st.booleans()):
            schema[key] = draw(dict_schema(depth + 1))
        else:
            schema[key] = (draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1,
                                                  max_side=3)),
                           draw(st.sampled_from(DTYPES)))
    return schema


@st.composite
def dict_sample(draw, schema):
    keys = draw(st.permutations(list(schema)))  # key order may differ between samples
    sample = {}
    for key in keys:
        spec = schema[key]
        if isinstance(spec, dict):
            sample[key] = draw(dict_sample(spec))
        else:
            shape, dtype = spec
            sample[key] = mx.nd.array(draw(hnp.arrays(dtype, shape)), dtype=dtype)
    return sample


@st.composite
def dict_batches(draw):
    schema = draw(dict_schema())
    count = draw(st.integers(1, MAX_BATCH))
    return [draw(dict_sample(schema)) for _ in range(count)]


@EXAMPLES
@given(samples=dict_batches())
def test_dict_batchify(samples):
    ours, _ = check_parity(samples, gbb.dict_batchify_fn, gcv_dict_batchify_fn)
    assert type(ours) is dict and list(ours) == list(samples[0])


def test_dict_batchify_explicit():
    samples = [{'depth': mx.nd.ones((2, 2), dtype='float16') * i,
                'meta': {'k': mx.nd.array([i], dtype='int32')}} for i in range(3)]
    ours, _ = check_parity(samples, gbb.dict_batchify_fn, gcv_dict_batchify_fn)
    assert ours['depth'].shape == (3, 2, 2) and ours['depth'].dtype == np.float16
    assert ours['meta']['k'].asnumpy().tolist() == [[0], [1], [2]]


# --------------------------------------------------------------------------------------
# DetectionDataLoader and RandomTransformDataLoader
# --------------------------------------------------------------------------------------

NUM_SAMPLES = 11
BATCH_SIZE = 3


def detection_dataset():
    """NDArray images, float32 labels with i % 4 rows (some samples have none)."""
    rng = np.random.RandomState(0)
    samples = []
    for i in range(NUM_SAMPLES):
        image = mx.nd.array(rng.uniform(-1, 1, size=(3, 4, 5)).astype('float32'))
        label = rng.randint(-5, 50, size=(i % 4, 6)).astype('float32')
        samples.append((image, label))
    return mx.gluon.data.SimpleDataset(samples)


def fixed_label_dataset():
    """numpy images and labels of one shape (for the stacking default_batchify_fn)."""
    rng = np.random.RandomState(1)
    return mx.gluon.data.SimpleDataset([
        (rng.uniform(-1, 1, size=(3, 4, 4)).astype('float32'),
         rng.randint(0, 9, size=(2, 6)).astype('int32')) for _ in range(NUM_SAMPLES)])


def double_image(image, label):
    return image * 2, label


def make_loaders(which, num_workers, last_batch):
    """(gluonbatch loader, gluoncv loader) over equal datasets and arguments."""
    args = dict(batch_size=BATCH_SIZE, shuffle=False, last_batch=last_batch,
                num_workers=num_workers)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        if which == 'detection':
            return (gb.DetectionDataLoader(detection_dataset(), **args),
                    gcv.DetectionDataLoader(detection_dataset(), **args))
    if which == 'random_default':
        return (gb.RandomTransformDataLoader([double_image], fixed_label_dataset(),
                                             interval=2, **args),
                gcv.RandomTransformDataLoader([double_image], fixed_label_dataset(),
                                              interval=2, **args))
    # ragged labels: the pad functions as batchify_fn (gluoncv's workers need its _mp_ one)
    theirs_fn = gcv.default_mp_pad_batchify_fn if num_workers else gcv.default_pad_batchify_fn
    return (gb.RandomTransformDataLoader([double_image], detection_dataset(), interval=2,
                                         batchify_fn=gb.default_pad_batchify_fn, **args),
            gcv.RandomTransformDataLoader([double_image], detection_dataset(), interval=2,
                                          batchify_fn=theirs_fn, **args))


def expected_batch_sizes(last_batch, epochs):
    sizes, carry = [], 0
    for _ in range(epochs):
        total = carry + NUM_SAMPLES
        sizes += [BATCH_SIZE] * (total // BATCH_SIZE)
        rest = total % BATCH_SIZE
        carry = 0
        if rest and last_batch == 'keep':
            sizes.append(rest)
        elif rest and last_batch == 'rollover':
            carry = rest
    return sizes


LOADER_CASES = [(which, num_workers, last_batch)
                for which in ('detection', 'random_default')
                for num_workers in (0, 1, 2)
                for last_batch in ('keep', 'discard', 'rollover')]
# The pad functions as RandomTransformDataLoader's batchify_fn: fewer cases (pools are slow
# to start once MXNet runs).
LOADER_CASES += [('random_pad', 0, 'rollover'), ('random_pad', 2, 'rollover')]


@pytest.mark.parametrize('which, num_workers, last_batch', LOADER_CASES)
def test_loader_parity(which, num_workers, last_batch):
    ours_loader, theirs_loader = make_loaders(which, num_workers, last_batch)
    ours, theirs = [], []
    for _ in range(2):  # two epochs: 'rollover' carries samples into the second
        ours.extend(ours_loader)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            theirs.extend(theirs_loader)
    assert [b[0].shape[0] for b in ours] == expected_batch_sizes(last_batch, 2)
    assert len(ours) == len(theirs)
    for index, (mine, ref) in enumerate(zip(ours, theirs)):
        assert_same_batch(mine, ref, compare_context=False, path='batch %d' % index)
    if which != 'detection':  # the transform was applied
        dataset = fixed_label_dataset() if which == 'random_default' else detection_dataset()
        raw = [dataset[i][0] for i in range(BATCH_SIZE)]
        raw = np.stack([x.asnumpy() if isinstance(x, mx.nd.NDArray) else x for x in raw])
        np.testing.assert_array_equal(ours[0][0].asnumpy(), raw * 2)


@pytest.mark.parametrize('num_workers', [0, 2])
def test_detection_loader_default_pads_labels(num_workers):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)
        loader = gb.DetectionDataLoader(detection_dataset(), batch_size=4,
                                        num_workers=num_workers)
    batches = list(loader)
    assert [labels.shape for _, labels in batches] == [(4, 3, 6), (4, 3, 6), (3, 2, 6)]
    first = batches[0][1].asnumpy()
    assert (first[0] == -1).all()  # sample 0 has no label row: all padding
    assert (first[1, 1:] == -1).all() and not (first[1, :1] == -1).all()


def test_detection_loader_warns_deprecated():
    with pytest.warns(UserWarning, match='deprecated') as record:
        gb.DetectionDataLoader(detection_dataset(), batch_size=2)
    assert any(w.filename == __file__ for w in record)  # points at the caller


# Transforms that multiply images by distinct constants: which one made a batch is visible.
def times2(image, label):
    return image * 2, label


def times3(image, label):
    return image * 3, label


def times5(image, label):
    return image * 5, label


def times7(image, label):
    return image * 7, label


SCALERS = [times2, times3, times5, times7]


def counting_dataset(n=24):
    """Sample i: image of ones * (i + 1), label [[i] * 6] -- so image / (label + 1) is the
    constant of the transform."""
    return mx.gluon.data.SimpleDataset([
        (np.full((2, 2), i + 1, 'float32'), np.full((1, 6), i, 'float32')) for i in range(n)])


def constants_used(loader):
    """Per batch, the one constant its images were multiplied by (asserts there is one)."""
    constants = []
    for images, labels in loader:
        ratios = images.asnumpy()[:, 0, 0] / (labels.asnumpy()[:, 0, 0] + 1)
        assert len(set(ratios.tolist())) == 1, 'one batch, several transforms: %s' % ratios
        constants.append(int(ratios[0]))
    return constants


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('interval', [1, 3])
def test_random_transform_interval(interval, num_workers):
    loader = gb.RandomTransformDataLoader(SCALERS, counting_dataset(), interval=interval,
                                          batch_size=2, num_workers=num_workers)
    np.random.seed(12)
    constants = constants_used(loader)
    assert len(constants) == 12 and set(constants) <= {2, 3, 5, 7}
    for start in range(0, len(constants), interval):
        assert len(set(constants[start:start + interval])) == 1, constants
    assert len(set(constants)) > 1, constants  # not stuck on one transform
    np.random.seed(12)
    assert constants_used(loader) == constants  # seeded: reproducible


def test_random_transform_same_choice_with_any_worker_count():
    runs = []
    for num_workers in (0, 1, 2):
        loader = gb.RandomTransformDataLoader(SCALERS, counting_dataset(), interval=2,
                                              batch_size=2, num_workers=num_workers)
        np.random.seed(5)
        runs.append(constants_used(loader))
    assert runs[0] == runs[1] == runs[2]


@pytest.mark.parametrize('num_workers', [0, 2])
def test_random_transform_seeded_parity(num_workers):
    """With np.random seeded identically, gluonbatch picks the transforms gluoncv picks.

    gluoncv draws one transform when an iteration starts (``_RandomTransformMultiWorkerIter``
    and ``same_process_iter``) and draws again for batch 0, so its k-th group of
    ``interval`` batches uses draw k + 1 of the seeded stream: so must ours, or migrated
    multi-scale schedules would differ."""
    ours_loader = gb.RandomTransformDataLoader(SCALERS, counting_dataset(), interval=2,
                                               batch_size=2, num_workers=num_workers)
    theirs_loader = gcv.RandomTransformDataLoader(SCALERS, counting_dataset(), interval=2,
                                                  batch_size=2, num_workers=num_workers)
    for seed in (3, 4):
        np.random.seed(seed)
        theirs = constants_used(theirs_loader)
        np.random.seed(seed)
        ours = constants_used(ours_loader)
        assert ours == theirs, 'seed %d' % seed


def test_random_transform_lambdas_with_workers():
    # gluonbatch hands transforms to the pool once: lambdas work (gluoncv's cannot pickle).
    loader = gb.RandomTransformDataLoader([lambda image, label: (image * 11, label)],
                                          counting_dataset(6), batch_size=3, num_workers=2)
    assert constants_used(loader) == [11, 11]


class FlakyDataset(mx.gluon.data.Dataset):
    """Sample 7 raises while ``failing`` (shared with forked workers) is set."""

    def __init__(self, error=ValueError, *extra_args):
        self.failing = multiprocessing.Value('b', 1)
        self.error = error
        self.extra_args = extra_args

    def __len__(self):
        return 10

    def __getitem__(self, idx):
        if idx == 7 and self.failing.value:
            raise self.error('boom at sample %d' % idx, *self.extra_args)
        return np.full((2, 2), idx, 'float32'), np.full((idx % 3, 6), idx, 'float32')


class TwoArgumentError(Exception):
    def __init__(self, message, code):
        super().__init__(message, code)
        self.code = code

    def __str__(self):
        return self.args[0]


def make_flaky_loader(which, dataset, num_workers):
    if which == 'detection':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            return gb.DetectionDataLoader(dataset, batch_size=3, num_workers=num_workers,
                                          batchify_fn=gb.default_pad_batchify_fn)
    return gb.RandomTransformDataLoader([double_image], dataset, batch_size=3,
                                        num_workers=num_workers,
                                        batchify_fn=gb.default_pad_batchify_fn)


@pytest.mark.parametrize('num_workers', [0, 2])
@pytest.mark.parametrize('which', ['detection', 'random'])
def test_loader_error_names_indices_then_recovers(which, num_workers):
    dataset = FlakyDataset()
    loader = make_flaky_loader(which, dataset, num_workers)
    for _ in range(2):  # the same error every time; the loader keeps working
        seen = []
        with pytest.raises(ValueError) as info:
            for images, _ in loader:
                seen.append(images.shape[0])
        # the dataset's own exception; the indices are in a note (they were in the message)
        assert str(info.value) == 'boom at sample 7'
        notes = '\n'.join(info.value.__notes__)
        assert 'while loading dataset samples [6, 7, 8]' in notes, notes
        assert seen == [3, 3]  # the batches before the failing one arrived
    dataset.failing.value = 0
    batches = list(loader)
    assert [images.shape[0] for images, _ in batches] == [3, 3, 3, 1]
    scale = 2 if which == 'random' else 1
    firsts = np.concatenate([images.asnumpy()[:, 0, 0] for images, _ in batches])
    np.testing.assert_array_equal(firsts, np.arange(10) * scale)


@pytest.mark.parametrize('num_workers', [0, 2])
def test_loader_error_with_unusual_exception_type(num_workers):
    # An exception type that cannot be built from one message arrives as itself, with the
    # indices in a note.
    loader = make_flaky_loader('detection', FlakyDataset(TwoArgumentError, 42), num_workers)
    with pytest.raises(TwoArgumentError) as info:
        list(loader)
    assert info.value.args == ('boom at sample 7', 42) and info.value.code == 42
    assert str(info.value) == 'boom at sample 7'
    assert 'while loading dataset samples [6, 7, 8]' in '\n'.join(info.value.__notes__)
