"""MXNet numpy mode (``npx.set_np()``): every array gluonbatch returns is an ``mx.np.ndarray``
sharing the batch's memory, in this process and through worker processes; legacy mode is
unchanged, and the R-CNN batchifiers stay legacy."""
import collections
import pickle
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mxnet import autograd, gluon, npx

from gluonbatch import memory
from gluonbatch.batchify import (Append, Dict, List, NamedTuple, Pad, Stack, Tuple,
                                 dict_batchify_fn, ms_batchify_fn)
from gluonbatch.collate import default_collate
from gluonbatch.dataloader import (DetectionDataLoader, default_batchify_fn,
                                   default_pad_batchify_fn, tsn_mp_batchify_fn)
from gluonbatch.devices import DeviceLoader, split_to_devices
from gluonbatch.batchify.rcnn import (FasterRCNNTrainBatchify, FeatureShapes,
                                      MaskRCNNTrainBatchify)
from helpers import SHARED, batch_leaves, examples, settled, shm_held, tiny_rcnn_net
from tiers import each_value

Sample = collections.namedtuple('Sample', ['image', 'label'])
LEGACY, NUMPY = mx.nd.NDArray, mx.np.ndarray


@pytest.fixture(params=['legacy', 'numpy'])
def mode(request):
    """Run the test in both modes; yields the array type every output must have."""
    if request.param == 'numpy':
        npx.set_np()
    try:
        yield NUMPY if request.param == 'numpy' else LEGACY
    finally:
        npx.reset_np()


def _array_inputs(kind, values):
    """``values`` (numpy arrays) as samples of ``kind``: numpy, legacy or mx.np arrays."""
    if kind == 'numpy':
        return values
    if kind == 'legacy':
        return [mx.nd.array(v, dtype=v.dtype) for v in values]
    with mx.util.np_shape(True), mx.util.np_array(True):
        return [mx.np.array(v, dtype=v.dtype) for v in values]


def _ndarray(array):
    """A numpy array as a legacy NDArray; MXNet arrays as they are."""
    return mx.nd.array(array, dtype=array.dtype) if isinstance(array, np.ndarray) else array


def _arrays(batch):
    return [leaf for _, leaf in batch_leaves(batch) if isinstance(leaf, mx.nd.NDArray)]


def _containers(batch):
    """The container types of ``batch``, depth first."""
    if isinstance(batch, dict):
        return [type(batch)] + [t for item in batch.values() for t in _containers(item)]
    if isinstance(batch, (list, tuple)):
        return [type(batch)] + [t for item in batch for t in _containers(item)]
    return []


def _values(batch):
    """The container types of ``batch`` and every leaf as plain values, for comparing the
    two modes."""
    return [('containers', _containers(batch))] + [
        (path, leaf.asnumpy() if isinstance(leaf, mx.nd.NDArray) else leaf)
        for path, leaf in batch_leaves(batch)]


def _assert_same_values(ours, want):
    assert [path for path, _ in ours] == [path for path, _ in want]
    for (path, got), (_, expected) in zip(ours, want):
        if isinstance(expected, np.ndarray):
            assert got.dtype == expected.dtype and got.shape == expected.shape, path
            np.testing.assert_array_equal(got, expected, err_msg=path)
        else:
            assert got == expected, path


def _rng_images(count, seed):
    rng = np.random.RandomState(seed)
    return [rng.randint(0, 255, (3, 2 + k % 3, 4)).astype('int32') for k in range(count)]


# Every combinator and helper, on samples of one kind of array.
CASES = {
    'Stack': (Stack(), lambda x: [a[:, :2] for a in x]),
    'Pad': (Pad(axis=1, pad_val=7), lambda x: x),
    'Pad num_shards ret_length': (Pad(axis=(1, 2), num_shards=2, ret_length=True), lambda x: x),
    'Append': (Append(), lambda x: x),
    'Tuple': (Tuple(Pad(axis=1), Stack(), List()), lambda x: [(a, a[0, 0], 'n') for a in x]),
    'Dict': (Dict({'x': Pad(axis=1), 'y': Append(expand=False)}),
             lambda x: [{'x': a, 'y': a, 'id': k} for k, a in enumerate(x)]),
    'NamedTuple': (NamedTuple(Sample, [Pad(axis=1), Stack()]),
                   lambda x: [Sample(a, a[0, 0, :1]) for a in x]),
    'default_collate': (default_collate, lambda x: [{'p': [a[:, :1, :]], 'n': 'a'} for a in x]),
    'default_batchify_fn': (default_batchify_fn, lambda x: [(a[:, :1], a[0, 0, :1]) for a in x]),
    'default_pad_batchify_fn': (default_pad_batchify_fn,
                                lambda x: [(a[0, :2], a[0, :2]) for a in x]),
    'tsn_mp_batchify_fn': (tsn_mp_batchify_fn, lambda x: [a[:, :2] for a in x]),
    # these two take NDArrays only, as gluoncv's
    'ms_batchify_fn': (ms_batchify_fn, lambda x: [(_ndarray(a), 'n') for a in x]),
    'dict_batchify_fn': (dict_batchify_fn, lambda x: [{'d': _ndarray(a[:, :1])} for a in x]),
}


@pytest.mark.parametrize('case', sorted(CASES))
@pytest.mark.parametrize('inputs', ['numpy', 'legacy', 'mx.np'])
def test_every_combinator_returns_the_modes_arrays(mode, case, inputs):
    batchify, make = CASES[case]
    images = _rng_images(5, seed=len(case))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # Pad's "more slices than samples" does not apply
        batch = batchify(make(_array_inputs(inputs, images)))
        with mx.util.np_array(False), mx.util.np_shape(False):
            # the same values as legacy inputs in legacy mode (MXNet inputs keep their dtype)
            want = batchify(make(_array_inputs('numpy' if inputs == 'numpy' else 'legacy',
                                               images)))
    arrays = _arrays(batch)
    assert arrays, 'the case makes no arrays'
    for array in arrays:
        assert type(array) is mode and array.context == SHARED
    assert all(type(array) is LEGACY for array in _arrays(want))
    _assert_same_values(_values(batch), _values(want))


@settings(max_examples=examples(25), deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.integers(0, 3),
       st.sampled_from(['uint8', 'int32', 'float32', 'float64']))
def test_numpy_mode_values_equal_legacy_values(rows, cols, dtype):
    """Zero-size samples and batches included."""
    samples = [np.arange(n * cols, dtype=dtype).reshape(n, cols) for n in rows]
    batchify = Tuple(Pad(pad_val=-1 if dtype != 'uint8' else 1, ret_length=True), Append())
    legacy = batchify([(s, s) for s in samples])
    npx.set_np()
    try:
        ours = batchify([(s, s) for s in samples])
    finally:
        npx.reset_np()
    assert all(type(a) is NUMPY for a in _arrays(ours))
    _assert_same_values(_values(ours), _values(legacy))


def test_the_example_from_numpy_mode_code_trains():
    npx.set_np()
    try:
        net = gluon.nn.Dense(2)
        net.initialize()
        out = net(Stack()([mx.np.ones((4,)), mx.np.zeros((4,))]))
        assert type(out) is NUMPY and out.shape == (2, 2)
    finally:
        npx.reset_np()


def test_numpy_outputs_share_the_batch_memory():
    """The mx.np array is a view of the one allocation: no second copy of the batch."""
    images = [np.ones((256, 1024), 'float32')] * 4  # 4 MiB
    before = settled(shm_held)
    legacy = Stack()(images)
    one_batch = settled(shm_held) - before
    npx.set_np()
    try:
        batch = Stack()(images)
        assert type(batch) is NUMPY and type(legacy) is LEGACY
        assert one_batch > 0 and settled(shm_held) - before == 2 * one_batch
        batch[0, 0, 0] = 5  # writes through to the memory the batch was built in
        assert float(batch[0, 0, 0]) == 5 and float(batch[1, 0, 0]) == 1
    finally:
        npx.reset_np()


def test_rcnn_batchifiers_stay_legacy(mode):
    rng = np.random.RandomState(0)
    sample = (rng.rand(3, 32, 48).astype('float32'), rng.rand(2, 5).astype('float32'),
              [rng.rand(2, 3, 2).astype('float32')], [rng.rand(2, 3, 8).astype('float32')],
              [rng.rand(2, 3, 8).astype('float32')], rng.rand(2, 32, 48).astype('float32'))
    with mx.util.np_array(False), mx.util.np_shape(False):  # R-CNN networks are legacy
        nets = tiny_rcnn_net(), tiny_rcnn_net()
    for batchify, width in ((FasterRCNNTrainBatchify(nets[0]), 5),
                            (MaskRCNNTrainBatchify(nets[1], num_shards=2), 6)):
        batch = batchify([sample[:width]] * 2)
        assert all(type(array) is LEGACY for array in _arrays(batch))
    assert mx.util.is_np_array() == (mode is NUMPY)  # the mode is restored


def test_feature_shapes_infer_in_numpy_mode(mode):
    with mx.util.np_array(False), mx.util.np_shape(False):
        shapes = FeatureShapes(tiny_rcnn_net())
    assert shapes(64, 96) == ((4, 6),)
    copy = pickle.loads(pickle.dumps(shapes))  # as a DataLoader worker receives it
    assert copy(80, 96) == ((5, 6),)


def test_split_to_devices_keeps_the_mode(mode):
    batchify = Tuple(Pad(num_shards=2, ret_length=True), Stack(), Append())
    batch = batchify([([1, 2], k, [k]) for k in range(3)])
    parts = split_to_devices(batch, [mx.cpu(0), mx.cpu(1)], layout=batchify)
    for part, ctx in zip(parts, [mx.cpu(0), mx.cpu(1)]):
        for array in _arrays(part):
            assert type(array) is mode and array.context == ctx
    assert parts[1][1].asnumpy().tolist() == [2.0]


def _loader_data():
    """Images of 64 KiB and more (recycled in workers), labels with and without objects."""
    return mx.gluon.data.SimpleDataset(
        [(np.full((3, 64, 96), k, 'float32'), np.full((k % 3, 5), k, 'float32'))
         for k in range(10)])


def _check_loader_batches(batches, mode):
    """The batches of ``_loader_data`` in order: sample k's image is all k, its k % 3
    label rows are all k, the padding -1."""
    seen = 0
    for images, labels in batches:
        for array in (images, labels):
            assert type(array) is mode
        ids = range(seen, seen + images.shape[0])
        assert labels.shape == (len(ids), max(k % 3 for k in ids), 5)
        labels = labels.asnumpy()
        for row, k in enumerate(ids):
            assert (images[row].asnumpy() == k).all()
            assert (labels[row, :k % 3] == k).all() and (labels[row, k % 3:] == -1).all()
        seen += len(ids)
    assert seen == 10


@pytest.mark.parametrize(*each_value(num_workers=[0, 1, 2], loader_kind=['mxnet', 'pooled']))
def test_loaders_deliver_the_modes_arrays(mode, num_workers, loader_kind):
    batchify = Tuple(Stack(), Pad(pad_val=-1))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if loader_kind == 'mxnet':
            loader = mx.gluon.data.DataLoader(_loader_data(), batch_size=3,
                                              num_workers=num_workers, batchify_fn=batchify)
        else:
            loader = DetectionDataLoader(_loader_data(), batch_size=3, num_workers=num_workers,
                                         batchify_fn=batchify)
    for _ in range(3):  # later epochs reuse recycled segments in the workers
        _check_loader_batches(list(loader), mode)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_zero_size_arrays_cross_workers_in_numpy_mode(num_workers):
    data = mx.gluon.data.SimpleDataset([np.zeros((0, 5), 'float32')] * 4)
    npx.set_np()
    try:
        loader = mx.gluon.data.DataLoader(data, batch_size=2, num_workers=num_workers,
                                          batchify_fn=Pad(pad_val=-1))
        batches = list(loader)
    finally:
        npx.reset_np()
    assert [(type(b), b.shape) for b in batches] == [(NUMPY, (2, 0, 5))] * 2


@pytest.mark.parametrize('num_workers', [0, 2])
def test_a_numpy_mode_network_trains_on_the_loader(num_workers):
    rng = np.random.RandomState(0)
    weights = rng.rand(6, 2).astype('float32')
    features = rng.rand(64, 6).astype('float32')
    data = mx.gluon.data.ArrayDataset(features, features @ weights)
    npx.set_np()
    try:
        mx.random.seed(0)
        net = gluon.nn.Dense(2)
        net.initialize(mx.init.Zero())
        trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.5})
        loss_fn = gluon.loss.L2Loss()
        loader = mx.gluon.data.DataLoader(data, batch_size=16, num_workers=num_workers,
                                          batchify_fn=Tuple(Stack(), Stack()))
        losses = []
        for _ in range(4):
            for x, y in loader:
                assert type(x) is NUMPY and type(y) is NUMPY
                with autograd.record():
                    loss = loss_fn(net(x), y)
                loss.backward()
                trainer.step(x.shape[0])
                losses.append(float(loss.mean()))
    finally:
        npx.reset_np()
    assert np.isfinite(losses).all() and losses[-1] < losses[0] / 4


@pytest.mark.parametrize('num_workers', [0, 2])
def test_the_mode_switched_between_two_loaders(num_workers):
    """Each loader keeps the mode it was made in; the process's mode decides nothing else."""
    batchify = Tuple(Stack(), Pad(pad_val=-1))
    npx.set_np()
    try:
        numpy_loader = mx.gluon.data.DataLoader(_loader_data(), batch_size=5,
                                                num_workers=num_workers, batchify_fn=batchify)
    finally:
        npx.reset_np()
    legacy_loader = mx.gluon.data.DataLoader(_loader_data(), batch_size=5,
                                             num_workers=num_workers, batchify_fn=batchify)
    for _ in range(2):
        if num_workers:  # workers were started in their loader's mode
            _check_loader_batches(list(numpy_loader), NUMPY)
        _check_loader_batches(list(legacy_loader), LEGACY)
    npx.set_np()
    try:
        _check_loader_batches(list(numpy_loader), NUMPY)
        if not num_workers:  # batches made here follow the mode in force
            _check_loader_batches(list(legacy_loader), NUMPY)
    finally:
        npx.reset_np()


def test_device_loader_in_numpy_mode():
    batchify = Tuple(Pad(axis=(1, 2), num_shards=2), Pad(pad_val=-1, num_shards=2))
    npx.set_np()
    try:
        loader = DeviceLoader(mx.gluon.data.DataLoader(
            _loader_data(), batch_size=4, num_workers=2, batchify_fn=batchify),
            [mx.cpu(0), mx.cpu(1)])
        parts = [part for per_device in loader for part in per_device]
    finally:
        npx.reset_np()
    assert len(parts) == 6
    for images, labels in parts:
        assert type(images) is NUMPY and type(labels) is NUMPY


def _stack_and_count_reuse(samples):
    return Stack()(samples), memory.recycling_stats()['reused']


def test_recycled_segments_serve_numpy_batches_in_workers():
    """Recycled segments work the same whatever the array type holding them."""
    data = mx.gluon.data.SimpleDataset([np.full((3, 64, 96), k, 'float32') for k in range(8)])
    npx.set_np()
    try:
        loader = mx.gluon.data.DataLoader(data, batch_size=2, num_workers=1,
                                          batchify_fn=_stack_and_count_reuse)
        epochs = [[(batch.asnumpy()[:, 0, 0, 0].tolist(), reused) for batch, reused in loader]
                  for _ in range(3)]
    finally:
        npx.reset_np()
    assert all(type(batch) is NUMPY for batch, _ in loader)
    for epoch in epochs:
        assert [values for values, _ in epoch] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    reused = [count for epoch in epochs for _, count in epoch]
    assert reused[-1] > 0 and reused == sorted(reused)
