"""split_to_devices and DeviceLoader."""
import collections
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.batchify import Append, Dict, List, NamedTuple, Pad, Stack, Tuple
from gluonbatch.devices import DeviceLoader, split_to_devices
from gluonbatch.batchify.rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from helpers import examples, tiny_rcnn_net
from tiers import each_value

CTX = [mx.cpu(i) for i in range(4)]


def _quiet(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return fn(*args)


def _samples(n, seed=0):
    rng = np.random.RandomState(seed)
    return [(rng.rand(3, rng.randint(2, 6), rng.randint(2, 6)).astype('float32'),
             rng.rand(rng.randint(1, 4), 5).astype('float32'), 'name-%d' % i)
            for i in range(n)]


def _assert_copy(out, src):
    """``out`` has ``src``'s values and does not share its memory."""
    mx.nd.waitall()
    np.testing.assert_array_equal(out.asnumpy(), src.asnumpy())
    assert out.dtype == src.dtype
    before = out.asnumpy().copy()
    if src.size:
        src[:] = src + 1
        mx.nd.waitall()
        np.testing.assert_array_equal(out.asnumpy(), before)
        src[:] = src - 1


@pytest.mark.parametrize('num_samples', [4, 7, 9])
def test_pad_slices_go_to_their_devices(num_samples):
    data = [np.arange(k + 1) for k in range(num_samples)]
    batchify = Pad(num_shards=4)
    slices = batchify(data)
    parts = split_to_devices(slices, CTX, layout=batchify)
    assert len(parts) == 4
    for part, piece, ctx in zip(parts, slices, CTX):
        assert part.context == ctx
        _assert_copy(part, piece)


def test_values_equal_the_unsplit_batch():
    samples = _samples(7)
    batchify = Tuple(Pad(axis=(1, 2), num_shards=3), Pad(pad_val=-1, num_shards=3), List())
    images, boxes, names = batchify(samples)
    parts = split_to_devices((images, boxes, names), CTX[:3], layout=batchify)
    start = 0
    for (image, box, name), ctx in zip(parts, CTX):
        assert image.context == ctx and box.context == ctx
        for row in range(image.shape[0]):
            want_image, want_box, want_name = samples[start + row]
            c, h, w = want_image.shape
            np.testing.assert_array_equal(image[row].asnumpy()[:, :h, :w], want_image)
            assert (image[row].asnumpy()[:, h:, :] == 0).all()
            np.testing.assert_array_equal(box[row].asnumpy()[:len(want_box)], want_box)
            assert name[row] == want_name
        start += image.shape[0]
    assert start == 7
    assert [n for _, _, part in parts for n in part] == [s[2] for s in samples]


def test_fields_of_rows_split_on_the_slice_boundaries():
    samples = [(np.ones((3, 4, 4)) * k, np.arange(k + 1)) for k in range(5)]
    batchify = Tuple(Stack(), Pad(num_shards=3))
    images, labels = batchify(samples)
    parts = split_to_devices((images, labels), CTX, layout=batchify)
    assert [(x.shape[0], y.shape[0]) for x, y in parts] == [(2, 2), (2, 2), (1, 1)]
    got = np.concatenate([x.asnumpy() for x, _ in parts])
    np.testing.assert_array_equal(got, images.asnumpy())
    for (x, y), ctx in zip(parts, CTX):
        assert x.context == ctx and y.context == ctx
    _assert_copy(parts[0][0], images[0:2])


def test_ret_length_and_namedtuple_and_dict():
    Sample = collections.namedtuple('Sample', ['tokens', 'label'])
    samples = [Sample(list(range(k + 1)), k) for k in range(5)]
    batchify = NamedTuple(Sample, [Pad(num_shards=2, ret_length=True), Stack()])
    parts = split_to_devices(batchify(samples), CTX[:2], layout=batchify)
    assert [type(p).__name__ for p in parts] == ['Sample', 'Sample']
    (tokens0, lengths0), label0 = parts[0]
    assert tokens0.shape == (3, 3) and lengths0.asnumpy().tolist() == [1, 2, 3]
    assert label0.asnumpy().tolist() == [0, 1, 2] and lengths0.context == mx.cpu(0)
    assert parts[1].tokens[1].context == mx.cpu(1)

    batchify = Dict({'x': Pad(num_shards=2), 'name': List()})
    batch = batchify([{'x': [1] * (k + 1), 'name': str(k)} for k in range(3)])
    parts = split_to_devices(batch, CTX, layout=batchify)
    assert [p['name'] for p in parts] == [['0', '1'], ['2']]
    assert parts[1]['x'].context == mx.cpu(1)


def _rcnn_sample(rng, height, width, masks=False):
    fh, fw = -(-height // 16), -(-width // 16)
    sample = (rng.rand(3, height, width).astype('float32'),
              rng.rand(rng.randint(1, 4), 5).astype('float32'),
              [rng.rand(fh, fw, 2).astype('float32')], [rng.rand(fh, fw, 8).astype('float32')],
              [rng.rand(fh, fw, 8).astype('float32')])
    if masks:
        sample += (rng.rand(len(sample[1]), height, width).astype('float32'),)
    return sample


@pytest.mark.parametrize('masks', [False, True])
def test_rcnn_batches(masks):
    rng = np.random.RandomState(1)
    samples = [_rcnn_sample(rng, 32 + 16 * (k % 3), 48 + 16 * (k % 2), masks) for k in range(6)]
    cls = MaskRCNNTrainBatchify if masks else FasterRCNNTrainBatchify
    batchify = cls(tiny_rcnn_net(), num_shards=3)
    batch = batchify(samples)
    parts = split_to_devices(batch, CTX[:3], layout=batchify)
    assert len(parts) == 3
    for device, (part, ctx) in enumerate(zip(parts, CTX)):
        assert len(part) == len(batch)
        for field, value in enumerate(part):
            assert value.context == ctx
            _assert_copy(value, batch[field][device])
        # each device's slice equals the same samples batchified alone
        alone = cls(tiny_rcnn_net())(samples[2 * device:2 * device + 2])
        for value, want in zip(part, alone):
            want = want[0] if isinstance(want, tuple) else want
            np.testing.assert_array_equal(value.asnumpy(), want.asnumpy())


def test_rcnn_one_slice_goes_to_the_first_device():
    rng = np.random.RandomState(2)
    samples = [_rcnn_sample(rng, 32, 48) for _ in range(2)]
    batchify = FasterRCNNTrainBatchify(tiny_rcnn_net())
    batch = batchify(samples)
    (part,) = split_to_devices(batch, CTX, layout=batchify)
    assert all(value.context == mx.cpu(0) for value in part)
    np.testing.assert_array_equal(part[2].asnumpy(), batch[2][0].asnumpy())


def test_fewer_slices_than_devices_use_the_first_devices():
    batchify = Tuple(Pad(num_shards=4), List())
    batch = _quiet(batchify, [([1, 2], 'a'), ([3], 'b')])
    parts = split_to_devices(batch, CTX, layout=batchify)
    assert len(parts) == 2
    assert [p[0].context for p in parts] == CTX[:2] and [p[1] for p in parts] == [['a'], ['b']]
    # no per-device field: one sample on each of the first devices
    batch = Tuple(Stack(), Stack())([(1, 2), (3, 4)])
    parts = split_to_devices(batch, CTX)
    assert [(x.context, x.asnumpy().tolist(), y.asnumpy().tolist()) for x, y in parts] == [
        (CTX[0], [1.0], [2.0]), (CTX[1], [3.0], [4.0])]
    # one slice (num_shards=1): the first device only
    (only,) = split_to_devices(batch, CTX, num_shards=1)
    assert only[0].context == mx.cpu(0) and only[0].shape == (2,)


def test_num_shards_splits_a_batch_without_per_device_fields():
    batch = Tuple(Stack(), Stack(), List())([(k, [k, k], str(k)) for k in range(5)])
    parts = split_to_devices(batch, CTX, num_shards=4)
    assert [p[0].asnumpy().tolist() for p in parts] == [[0, 1], [2], [3], [4]]
    assert [p[2] for p in parts] == [['0', '1'], ['2'], ['3'], ['4']]
    assert [p[1].context for p in parts] == CTX
    assert len(split_to_devices(batch[0][:2], CTX, num_shards=4)) == 2


# Batches without a per-device field, as gluoncv's scripts batchify them: (batchify, sample k)
ROWS_ONLY = {
    'ssd': (Tuple(Stack(), Stack(), Stack()),
            lambda k: (np.full((3, 4, 4), k, 'float32'), np.arange(6, dtype='float32') + k,
                       np.full((6, 4), k / 10, 'float32'))),
    'pad_length_and_stack': (Tuple(Pad(ret_length=True), Stack()),
                             lambda k: (np.arange(k % 4 + 1) + k, k)),
    'pad_length': (Pad(ret_length=True), lambda k: np.arange(k % 3 + 1) + k),
}


def _fields(value):
    """The NDArrays of a batch (or of one device's part), in field order."""
    if isinstance(value, mx.nd.NDArray):
        return [value]
    return [array for item in value for array in _fields(item)]


def _assert_split_and_load(parts, batch, ctx_list):
    """``parts`` hold, field by field, what ``split_and_load`` gives for the batch's arrays:
    over all of ``ctx_list``, or one sample on each first device when there are fewer."""
    fields = _fields(batch)
    used = ctx_list[:min(len(ctx_list), fields[0].shape[0])]
    assert len(parts) == len(used)
    for index, field in enumerate(fields):
        want = mx.gluon.utils.split_and_load(field, used, even_split=False)
        for part, expected, ctx in zip(parts, want, used):
            got = _fields(part)[index]
            assert type(part) is type(batch) and len(_fields(part)) == len(fields)
            assert got.context == ctx and got.dtype == expected.dtype
            np.testing.assert_array_equal(got.asnumpy(), expected.asnumpy())


@pytest.mark.parametrize('num_samples', [2, 7, 8])
@pytest.mark.parametrize('num_devices', [2, 3, 4])
@pytest.mark.parametrize('kind', sorted(ROWS_ONLY))
def test_a_batch_without_per_device_fields_splits_like_split_and_load(kind, num_devices,
                                                                      num_samples):
    batchify, make = ROWS_ONLY[kind]
    batch = batchify([make(k) for k in range(num_samples)])
    parts = split_to_devices(batch, CTX[:num_devices], layout=batchify)
    assert len(parts) == min(num_devices, num_samples)  # every device busy, if it can be
    _assert_split_and_load(parts, batch, CTX[:num_devices])
    for array in _fields(parts[0]):  # copies: the batch's memory is not shared
        before = array.asnumpy().copy()
        for field in _fields(batch):
            field[:] = field + 1
        mx.nd.waitall()
        np.testing.assert_array_equal(array.asnumpy(), before)
        for field in _fields(batch):
            field[:] = field - 1


@pytest.mark.parametrize('kind', sorted(ROWS_ONLY))
def test_num_shards_1_keeps_the_whole_batch_on_the_first_device(kind):
    batchify, make = ROWS_ONLY[kind]
    batch = batchify([make(k) for k in range(5)])
    (whole,) = split_to_devices(batch, CTX, num_shards=1, layout=batchify)
    assert type(whole) is type(batch)
    for got, want in zip(_fields(whole), _fields(batch)):
        assert got.context == CTX[0]
        np.testing.assert_array_equal(got.asnumpy(), want.asnumpy())
    assert len(_fields(whole)) == len(_fields(batch))
    # and a single device takes the whole batch without being asked
    (alone,) = split_to_devices(batch, CTX[1:2], layout=batchify)
    assert [x.shape for x in _fields(alone)] == [x.shape for x in _fields(batch)]
    assert all(x.context == CTX[1] for x in _fields(alone))


@pytest.mark.parametrize(*each_value(kind=sorted(ROWS_ONLY), num_workers=[0, 1, 2]))
def test_device_loader_splits_batches_of_rows_like_split_and_load(kind, num_workers):
    batchify, make = ROWS_ONLY[kind]
    data = mx.gluon.data.SimpleDataset([make(k) for k in range(11)])
    plain = mx.gluon.data.DataLoader(data, batch_size=5, batchify_fn=batchify)
    loader = DeviceLoader(mx.gluon.data.DataLoader(data, batch_size=5, batchify_fn=batchify,
                                                   num_workers=num_workers), CTX[:3])
    batches = list(loader)
    assert [len(per_device) for per_device in batches] == [3, 3, 1]  # 5, 5 and 1 samples
    for per_device, batch in zip(batches, plain):
        _assert_split_and_load(per_device, batch, CTX[:3])
    whole = DeviceLoader(mx.gluon.data.DataLoader(data, batch_size=5, batchify_fn=batchify,
                                                  num_workers=num_workers), CTX[:3],
                         num_shards=1)
    assert [[_fields(part)[0].shape[0] for part in per_device] for per_device in whole] == [
        [5], [5], [1]]


def _with_anchors(samples):
    """A plain batchify function returning one array per batch beside the rows."""
    return Stack()(samples), mx.nd.ones((6, 4))


def test_fields_of_different_row_counts_need_to_be_told_apart():
    batch = _with_anchors([np.full(2, k, 'float32') for k in range(4)])
    with pytest.raises(ValueError, match=r"cannot split the batch across 3 devices: its fields "
                                         r"have different numbers of rows \(the batch\[0\]: 4, "
                                         r"the batch\[1\]: 6\).*num_shards=1.*layout=.*'whole'"):
        split_to_devices(batch, CTX[:3])
    # the remedies the message names
    (whole,) = split_to_devices(batch, CTX[:3], num_shards=1)
    assert whole[0].shape == (4, 2) and whole[1].shape == (6, 4)
    parts = split_to_devices(batch, CTX[:3], layout=('rows', 'whole'))
    assert [x.asnumpy()[:, 0].tolist() for x, _ in parts] == [[0, 1], [2], [3]]
    assert [(anchors.shape, anchors.context) for _, anchors in parts] == [
        ((6, 4), ctx) for ctx in CTX[:3]]
    (alone,) = split_to_devices(batch, CTX[:1])  # one device: unchanged, the batch whole
    assert alone[1].shape == (6, 4)
    # the loader raises it too rather than using one device
    data = mx.gluon.data.SimpleDataset([np.full(2, k, 'float32') for k in range(4)])
    loader = DeviceLoader(mx.gluon.data.DataLoader(data, batch_size=4,
                                                   batchify_fn=_with_anchors), CTX[:2])
    with pytest.raises(ValueError, match='across 2 devices.*different numbers of rows'):
        next(iter(loader))


def test_a_batch_with_nothing_to_split_goes_to_the_first_device():
    (only,) = split_to_devices((0.5, mx.nd.ones((3, 2))), CTX, layout=('whole', 'whole'))
    assert only[0] == 0.5 and only[1].context == CTX[0] and only[1].shape == (3, 2)


def test_append_lists_are_split_per_sample():
    samples = [(np.arange(k + 1), np.ones(k + 2)) for k in range(4)]
    batchify = Tuple(Pad(num_shards=2), Append())
    parts = split_to_devices(batchify(samples), CTX[:2], layout=batchify)
    assert [len(p[1]) for p in parts] == [2, 2]
    assert parts[1][1][0].shape == (1, 4) and parts[1][1][0].context == mx.cpu(1)


def test_every_slice_is_copied_once(monkeypatch):
    calls = []
    original = mx.nd.NDArray.copyto

    def counting(self, other):
        calls.append(self.shape)
        return original(self, other)

    monkeypatch.setattr(mx.nd.NDArray, 'copyto', counting)
    batchify = Tuple(Pad(num_shards=3), Stack())
    split_to_devices(batchify([([1] * (k + 1), k) for k in range(6)]), CTX[:3],
                     layout=batchify)
    assert len(calls) == 6  # 3 slices x 2 fields, nothing else


def test_same_context_is_still_a_copy():
    slices = Pad(num_shards=2)([[1, 2], [3]])
    ctx = [slices[0].context, slices[1].context]  # cpu_shared(0) twice
    parts = split_to_devices(slices, ctx, layout='per_device')
    for part, piece in zip(parts, slices):
        assert part.context == piece.context and part is not piece
        _assert_copy(part, piece)


def test_errors():
    slices = Pad(num_shards=4)([[1], [2], [3], [4]])
    with pytest.raises(ValueError, match='4 device slices but only 2 device'):
        split_to_devices(slices, CTX[:2], layout='per_device')
    with pytest.raises(ValueError, match='empty'):
        split_to_devices(slices, [], layout='per_device')
    with pytest.raises(TypeError, match='not an mx.Context'):
        split_to_devices(slices, ['gpu0'], layout='per_device')
    bad = (Pad(num_shards=2)([[1], [2], [3]]), Pad(num_shards=2)([[1], [2], [3], [4]]))
    with pytest.raises(ValueError, match='sliced alike'):
        split_to_devices(bad, CTX, layout=('per_device', 'per_device'))
    with pytest.raises(ValueError, match='must have 3 rows'):
        split_to_devices((Pad(num_shards=2)([[1], [2], [3]]), mx.nd.ones((4, 2))), CTX,
                         layout=('per_device', 'rows'))
    with pytest.raises(ValueError, match=r'into num_shards=2 device slices: its fields have '
                                         r'different numbers of rows \(the batch\[0\]: 3, '
                                         r'the batch\[1\]: 4\)'):
        split_to_devices((mx.nd.ones(3), mx.nd.ones(4)), CTX, num_shards=2)
    with pytest.raises(ValueError, match='num_shards'):
        split_to_devices(slices, CTX, num_shards=0)
    with pytest.raises(ValueError, match='4 device slices; num_shards=2'):
        split_to_devices(slices, CTX, num_shards=2, layout='per_device')
    # the batch must have the structure its layout declares
    with pytest.raises(TypeError, match=r'the batch\[0\] is a mxnet.NDArray of shape \(2,\)'
                                        r'.*one NDArray per device slice'):
        split_to_devices((mx.nd.ones(2), mx.nd.ones(2)), CTX, layout=('per_device', 'rows'))
    with pytest.raises(ValueError, match=r"the batch has 2 fields; its device layout "
                                         r"\('rows', 'rows', 'rows'\) expects 3"):
        split_to_devices((mx.nd.ones(2), mx.nd.ones(2)), CTX, layout=('rows',) * 3)
    with pytest.raises(TypeError, match=r"the batch is a list; its device layout \('rows',\) "
                                        r"expects a tuple of 1 fields"):
        split_to_devices([mx.nd.ones(2)], CTX, layout=('rows',))
    with pytest.raises(ValueError, match=r"the batch has keys \['y'\]; its device layout "
                                         r"expects \['x'\] \(missing \['x'\], extra \['y'\]\)"):
        split_to_devices({'y': mx.nd.ones(2)}, CTX, layout={'x': 'rows'})
    with pytest.raises(TypeError, match=r"the batch is .*NDArray.*expects a dict"):
        split_to_devices(mx.nd.ones(2), CTX, layout={'x': 'rows'})
    with pytest.raises(TypeError, match='the class Pad; give the batchify function'):
        split_to_devices(slices, CTX, layout=Pad)
    with pytest.raises(ValueError, match="layout\\[1\\] is 'row'"):
        split_to_devices((mx.nd.ones(2), mx.nd.ones(2)), CTX, layout=('rows', 'row'))
    with pytest.raises(TypeError, match='layout is a list; a device layout is'):
        split_to_devices(slices, CTX, layout=['per_device'])
    with pytest.raises(ValueError, match='device slice 0 is a 0-d NDArray'):
        split_to_devices([mx.nd.array(1)], CTX, layout='per_device')


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_device_loader(num_workers):
    samples = _samples(10)
    data = mx.gluon.data.SimpleDataset([s[:2] for s in samples])
    batchify = Tuple(Pad(axis=(1, 2), num_shards=3), Pad(pad_val=-1, num_shards=3))
    loader = DeviceLoader(mx.gluon.data.DataLoader(
        data, batch_size=4, batchify_fn=batchify, num_workers=num_workers), CTX[:3])
    assert len(loader) == 3 and loader.layout == ('per_device', 'per_device')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        batches = list(loader)
    assert [len(per_device) for per_device in batches] == [3, 3, 2]
    seen = 0
    for per_device in batches:
        for (images, boxes), ctx in zip(per_device, CTX):
            assert images.context == ctx and boxes.context == ctx
            for row in range(images.shape[0]):
                image, box = samples[seen][:2]
                np.testing.assert_array_equal(
                    images[row].asnumpy()[:, :image.shape[1], :image.shape[2]], image)
                np.testing.assert_array_equal(boxes[row].asnumpy()[:len(box)], box)
                seen += 1
    assert seen == 10


def test_scalars_are_given_to_every_device():
    batch = (Pad(num_shards=2)([[1], [2, 3]]), 0.5, None)
    parts = split_to_devices(batch, CTX[:2], layout=('per_device', 'rows', 'rows'))
    assert [p[1:] for p in parts] == [(0.5, None), (0.5, None)]
    assert [p[0].context for p in parts] == CTX[:2]


# ------------------------------------------------------------------ any nesting, any devices

Pair = collections.namedtuple('Pair', ['first', 'second'])


def _stack_leaf(num_slices):
    return (Stack(), lambda sid: np.full(2, sid, 'float32'),
            lambda value, device, start, stop: value[start:stop].asnumpy())


def _pad_leaf(num_slices, ret_length):
    def expect_one(value, device, start, stop):
        return value[device].asnumpy() if num_slices > 1 else value[start:stop].asnumpy()

    def expect(value, device, start, stop):
        if ret_length:
            return tuple(expect_one(item, device, start, stop) for item in value)
        return expect_one(value, device, start, stop)
    return (Pad(num_shards=num_slices, ret_length=ret_length, pad_val=-1),
            lambda sid: np.arange(sid % 3 + 1) + sid, expect)


def _append_leaf(num_slices):
    return (Append(), lambda sid: np.full(sid % 2 + 1, sid, 'float32'),
            lambda value, device, start, stop: [a.asnumpy() for a in value[start:stop]])


def _list_leaf(num_slices):
    return (List(), lambda sid: 'id-%d' % sid,
            lambda value, device, start, stop: value[start:stop])


def _combine(kind, children):
    """A Tuple, Dict or NamedTuple of ``children``: (batchify, make sample, expected part)."""
    fns, makes, expects = zip(*children)
    if kind == 'dict':
        keys = ['k%d' % i for i in range(len(children))]
        return (Dict(dict(zip(keys, fns))),
                lambda sid: {key: make(sid) for key, make in zip(keys, makes)},
                lambda value, *at: {key: expect(value[key], *at)
                                    for key, expect in zip(keys, expects)})
    if kind == 'namedtuple' and len(children) == 2:
        return (NamedTuple(Pair, list(fns)),
                lambda sid: Pair(*(make(sid) for make in makes)),
                lambda value, *at: Pair(*(e(v, *at) for e, v in zip(expects, value))))
    return (Tuple(*fns), lambda sid: tuple(make(sid) for make in makes),
            lambda value, *at: tuple(e(v, *at) for e, v in zip(expects, value)))


def _tree(draw, num_slices, depth, per_device):
    leaves = ['stack', 'pad', 'pad_length', 'append', 'list']
    kind = draw(st.sampled_from((['tuple', 'dict', 'namedtuple'] if depth < 2 else []) + leaves))
    if kind in ('tuple', 'dict', 'namedtuple'):
        width = draw(st.integers(1, 3))
        return _combine(kind, [_tree(draw, num_slices, depth + 1, per_device)
                              for _ in range(width)])
    slices = draw(st.sampled_from([1, num_slices]))
    if kind.startswith('pad') and slices > 1:
        per_device.append(kind)
    if kind in ('pad', 'pad_length'):
        return _pad_leaf(slices, kind == 'pad_length')
    return {'stack': _stack_leaf, 'append': _append_leaf, 'list': _list_leaf}[kind](slices)


def _assert_part(part, want, ctx, path='part'):
    """``part`` has ``want``'s structure and values, every NDArray a copy on ``ctx``."""
    if isinstance(part, mx.nd.NDArray):
        assert part.context == ctx, path
        np.testing.assert_array_equal(part.asnumpy(), want, err_msg=path)
        return
    assert type(part) is type(want), '%s: %s is not %s' % (path, type(part), type(want))
    if isinstance(want, dict):
        assert list(part) == list(want), path
        for key in want:
            _assert_part(part[key], want[key], ctx, '%s[%r]' % (path, key))
    elif isinstance(want, (list, tuple)):
        assert len(part) == len(want), path
        for index, (got, item) in enumerate(zip(part, want)):
            _assert_part(got, item, ctx, '%s[%d]' % (path, index))
    else:
        assert part == want, path


@settings(max_examples=examples(60), deadline=None)
@given(st.data())
def test_any_nesting_splits_like_slicing_the_batch(data):
    num_devices = data.draw(st.integers(1, 4), label='devices')
    num_samples = data.draw(st.integers(1, 7), label='samples')
    per_device = []  # the Pads drawn with one array per device
    batchify, make, expect = _tree(data.draw, num_devices, 0, per_device)
    ids = list(range(10, 10 + num_samples))
    batch = _quiet(batchify, [make(sid) for sid in ids])
    # per-device Pads decide the slices; without them num_shards does, len(ctx_list) by default
    choices = [None, num_devices] if per_device else [None] + list(range(1, num_devices + 1))
    num_shards = data.draw(st.sampled_from(choices), label='num_shards')
    parts = split_to_devices(batch, CTX[:num_devices], num_shards, layout=batchify)
    wanted = num_devices if per_device or num_shards is None else num_shards
    sizes = [len(s) for s in np.array_split(ids, min(wanted, num_samples))]
    bounds = [(sum(sizes[:i]), sum(sizes[:i + 1])) for i in range(len(sizes))]
    assert len(parts) == len(bounds)
    for device, (part, (start, stop)) in enumerate(zip(parts, bounds)):
        _assert_part(part, expect(batch, device, start, stop), CTX[device])


def test_a_pair_of_arrays_is_two_fields_not_two_slices():
    batchify = Tuple(Pad(ret_length=True), Stack())
    batch = batchify([([1, 2], 0), ([3], 1)])
    (whole,) = split_to_devices(batch, CTX[:2], num_shards=1, layout=batchify)
    (padded, lengths), labels = whole
    assert padded.shape == (2, 2) and lengths.asnumpy().tolist() == [2, 1]
    assert padded.context == mx.cpu(0)
    for num_shards in (None, 2):  # two devices: two halves, by default too
        halves = split_to_devices(batch, CTX[:2], num_shards, layout=batchify)
        assert [(p.asnumpy().tolist(), n.asnumpy().tolist(), y.asnumpy().tolist())
                for (p, n), y in halves] == [([[1, 2]], [2], [0.0]), ([[3, 0]], [1], [1.0])]
        assert [(p.context, n.context, y.context) for (p, n), y in halves] == [
            (ctx,) * 3 for ctx in CTX[:2]]


def test_device_loader_layout_comes_from_the_batchify_function():
    data = mx.gluon.data.SimpleDataset([(np.ones(k + 1), k) for k in range(4)])

    def plain(samples):  # declares no layout: no field is per device
        return Tuple(Pad(), Stack())(samples)

    loader = mx.gluon.data.DataLoader(data, batch_size=4, batchify_fn=plain)
    assert DeviceLoader(loader, CTX[:2]).layout is None
    (per_device,) = list(DeviceLoader(loader, CTX[:2], num_shards=2))
    assert [x.shape for x, _ in per_device] == [(2, 4), (2, 4)]
    explicit = DeviceLoader(loader, CTX[:2], layout=('per_device', 'rows'))
    with pytest.raises(TypeError, match='one NDArray per device slice'):
        next(iter(explicit))
    with pytest.raises(ValueError, match="'rowz'"):
        DeviceLoader(loader, CTX[:2], layout='rowz')


def test_whole_arrays_are_copied_to_every_device():
    scale = mx.nd.array([2.0])
    batch = (Pad(num_shards=2)([[1], [2, 3]]), scale)
    parts = split_to_devices(batch, CTX[:2], layout=('per_device', 'whole'))
    for (_, copy), ctx in zip(parts, CTX):
        assert copy.context == ctx
        _assert_copy(copy, scale)


def test_a_list_of_arrays_without_a_layout_is_refused_not_guessed():
    """One array per device, per sample, or per field: only a layout can say."""
    slices = Pad(num_shards=2)([[1], [2, 3], [4]])
    for batch in (slices, (slices, mx.nd.ones(3))):
        with pytest.raises(ValueError, match='list of 2 NDArrays.*declares no device_layout.*'
                                             'Pass layout='):
            split_to_devices(batch, CTX[:2])
    # an undeclared batch of plain fields splits as rows; rows of different lengths cannot
    # split alike across several devices
    odd = (mx.nd.ones((4, 2)), [1, 2, 3])
    with pytest.raises(ValueError, match='across 4 devices.*different numbers of rows'):
        split_to_devices(odd, CTX)
    for args in ((CTX[:1],), (CTX, 1)):  # one device, or num_shards=1: the batch whole
        (whole,) = split_to_devices(odd, *args)
        assert whole[0].shape == (4, 2) and whole[1] == [1, 2, 3]
        assert whole[0].context == CTX[0]


@pytest.mark.parametrize(*each_value(batchify=['mxnet', 'gluonbatch', 'gluonbatch_pad'],
                                      num_workers=[0, 1, 2]))
def test_default_batchify_functions_split_field_by_field(batchify, num_workers):
    """MXNet's and gluoncv's default batchify return a list with one array per field."""
    from gluonbatch.dataloader import default_batchify_fn, default_pad_batchify_fn
    features = np.arange(12, dtype='float32').reshape(6, 2)
    data = mx.gluon.data.ArrayDataset(features, np.arange(6, dtype='float32').reshape(6, 1))
    fn = {'mxnet': None, 'gluonbatch': default_batchify_fn,
          'gluonbatch_pad': default_pad_batchify_fn}[batchify]
    loader = DeviceLoader(mx.gluon.data.DataLoader(data, batch_size=4, batchify_fn=fn,
                                                   num_workers=num_workers),
                          CTX[:2], num_shards=2)
    assert loader.layout == 'fields'
    parts = [part for per_device in loader for part in per_device]
    assert [type(part) for part in parts] == [list] * 4
    assert [(x.context, x.shape, y.asnumpy().ravel().tolist()) for x, y in parts] == [
        (CTX[0], (2, 2), [0, 1]), (CTX[1], (2, 2), [2, 3]),
        (CTX[0], (1, 2), [4]), (CTX[1], (1, 2), [5])]
    np.testing.assert_array_equal(np.concatenate([x.asnumpy() for x, _ in parts]), features)


def test_whole_containers_are_copied_to_every_device():
    extra = {'scale': mx.nd.array([2.0]), 'tag': 'a'}
    batch = (Pad(num_shards=2)([[1], [2, 3]]), extra)
    parts = split_to_devices(batch, CTX[:2], layout=('per_device', 'whole'))
    for (_, copy), ctx in zip(parts, CTX):
        assert copy is not extra and copy['tag'] == 'a' and copy['scale'].context == ctx
        _assert_copy(copy['scale'], extra['scale'])
