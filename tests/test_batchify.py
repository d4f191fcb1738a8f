"""List, Dict, NamedTuple, nesting, Append contexts and the no-alias rule."""
from collections import OrderedDict, namedtuple

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gluonbatch
from gluonbatch.batchify import Append, Dict, List, NamedTuple, Pad, Stack, Tuple
from helpers import SHARED, examples

Sample = namedtuple('Sample', ['image', 'boxes', 'name'])


def test_public_names_are_reexported():
    for name in ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple']:
        assert getattr(gluonbatch, name) is getattr(gluonbatch.batchify, name)


def test_list_returns_a_new_list_of_the_samples():
    samples = ['a cat', {'id': 3}]
    out = List()(samples)
    assert out == samples and out is not samples
    assert out[1] is samples[1]


def test_dict_batchifies_each_key_and_keeps_key_order():
    fn = Dict(OrderedDict([('boxes', Pad(pad_val=-1)), ('image', Stack()), ('id', List())]))
    out = fn([{'image': [1, 2], 'boxes': [[1, 2, 3, 4]], 'id': 'x'},
              {'id': 'y', 'image': [3, 4], 'boxes': [[5, 6, 7, 8], [1, 1, 1, 1]]}])
    assert type(out) is dict and list(out) == ['boxes', 'image', 'id']
    assert out['boxes'].shape == (2, 2, 4)
    np.testing.assert_array_equal(out['boxes'].asnumpy()[0, 1], [-1, -1, -1, -1])
    np.testing.assert_array_equal(out['image'].asnumpy(), [[1, 2], [3, 4]])
    assert out['id'] == ['x', 'y']


@settings(max_examples=examples(30), deadline=None)
@given(extra=st.dictionaries(st.text(min_size=1, max_size=5).filter(lambda k: k not in 'ab'),
                             st.one_of(st.integers(), st.text(), st.none()), max_size=3),
       rows=st.lists(st.integers(1, 4), min_size=1, max_size=4))
def test_dict_ignores_keys_it_has_no_function_for(extra, rows):
    """As GluonNLP's: samples may carry an id or a path beside the batchified keys."""
    samples = [dict(extra, a=[index] * length, b=index) for index, length in enumerate(rows)]
    before = [dict(sample) for sample in samples]
    batch = Dict({'a': Pad(pad_val=-1), 'b': Stack()})(samples)
    assert set(batch) == {'a', 'b'}
    plain = Dict({'a': Pad(pad_val=-1), 'b': Stack()})(
        [{'a': sample['a'], 'b': sample['b']} for sample in samples])
    for key in 'ab':
        np.testing.assert_array_equal(batch[key].asnumpy(), plain[key].asnumpy())
    assert samples == before  # nothing taken out of the samples


def test_strict_dict_refuses_other_keys():
    samples = [{'a': [1], 'id': 'x'}, {'a': [2], 'id': 'y'}]
    with pytest.raises(ValueError, match=r"sample 0 has keys \['a', 'id'\]; expected \['a'\] "
                                         r"\(missing \[\], extra \['id'\]\)"):
        Dict({'a': Stack()}, strict=True)(samples)
    assert Dict({'a': Stack()}, strict=True)([{'a': [1]}])['a'].shape == (1, 1)
    with pytest.raises(ValueError, match=r"sample 1 lacks key \['a'\]; Dict batchifies "
                                         r"\['a'\]$"):
        Dict({'a': Stack()})([{'a': [1], 'id': 'x'}, {'id': 'y'}])
    with pytest.raises(TypeError, match='strict must be one of True, False'):
        Dict({'a': Stack()}, strict='yes')
    assert repr(Dict({'a': List()}, strict=True)).endswith('strict=True)')


@pytest.mark.parametrize('fn_info', [[Stack(), Pad(), List()],
                                     (Stack(), Pad(), List()),
                                     {'name': List(), 'image': Stack(), 'boxes': Pad()}])
def test_named_tuple_returns_the_container_type(fn_info):
    out = NamedTuple(Sample, fn_info)([Sample(np.zeros((2, 2)), [1], 'a'),
                                       Sample(np.ones((2, 2)), [2, 3], 'b')])
    assert type(out) is Sample
    assert out.image.shape == (2, 2, 2) and out.image.context == SHARED
    np.testing.assert_array_equal(out.boxes.asnumpy(), [[1, 0], [2, 3]])
    assert out.name == ['a', 'b']


def test_nested_combinators():
    fn = Tuple(Stack(), Tuple(Pad(pad_val=-1), Stack()), Dict({'k': List()}))
    image, (boxes, label), meta = fn([([0.0], ([1, 2], 7), {'k': 'a'}),
                                      ([1.0], ([3], 8), {'k': 'b'})])
    np.testing.assert_array_equal(boxes.asnumpy(), [[1, 2], [3, -1]])
    np.testing.assert_array_equal(label.asnumpy(), [7, 8])
    assert meta == {'k': ['a', 'b']}


def test_tuple_accepts_varargs_list_and_tuple_forms_alike():
    data = [([1, 2], 0), ([3], 1)]
    results = [Tuple(Pad(), Stack())(data), Tuple([Pad(), Stack()])(data),
               Tuple((Pad(), Stack()))(data)]
    for result in results:
        assert type(result) is tuple
        np.testing.assert_array_equal(result[0].asnumpy(), [[1, 2], [3, 0]])


def test_append_is_cpu_shared_and_never_aliases_shared_inputs():
    shared_input = mx.nd.array([1, 2, 3], ctx=SHARED)
    for expand in (True, False):
        out = Append(expand=expand)([shared_input])[0]
        assert out.context == SHARED
        out[:] = 0
        np.testing.assert_array_equal(shared_input.asnumpy(), [1, 2, 3])


@pytest.mark.parametrize('batch_axis, shape', [(0, (1, 2, 3)), (1, (2, 1, 3)), (2, (2, 3, 1)),
                                               (-1, (2, 3, 1)), (-3, (1, 2, 3))])
def test_append_batch_axis_like_expand_dims(batch_axis, shape):
    sample = np.arange(6).reshape(2, 3)
    out = Append(batch_axis=batch_axis)([sample])[0]
    assert out.shape == shape and out.dtype == np.float32
    np.testing.assert_array_equal(out.asnumpy(), np.expand_dims(sample, batch_axis))


def test_append_keeps_ndarray_dtype():
    out = Append()([mx.nd.array([1, 2], dtype='uint8'), mx.nd.array([3], dtype='int64')])
    assert [o.dtype for o in out] == [np.uint8, np.int64]


def test_ndarray_inputs_with_pending_writes_are_waited_for():
    base = mx.nd.ones((256, 256))
    pending = [mx.nd.dot(base, base) for _ in range(3)]  # still computing when we read them
    out = Stack()(pending)
    np.testing.assert_array_equal(out.asnumpy(), np.full((3, 256, 256), 256, np.float32))


def test_ndarray_views_are_read_at_their_offset():
    base = mx.nd.arange(12).reshape((3, 4))
    out = Pad()([base[1], base[2][:2]])
    np.testing.assert_array_equal(out.asnumpy(), [[4, 5, 6, 7], [8, 9, 0, 0]])


def test_mx_numpy_arrays_are_accepted():
    out = Stack()([mx.np.ones((2,)), mx.np.zeros((2,))])
    assert isinstance(out, mx.nd.NDArray)
    np.testing.assert_array_equal(out.asnumpy(), [[1, 1], [0, 0]])


def test_large_batches_are_written_correctly_by_several_threads():
    rng = np.random.default_rng(0)
    images = [rng.random((3, rng.integers(200, 260), rng.integers(300, 360)), np.float32)
              for _ in range(9)]
    out = Pad(axis=(1, 2), pad_val=-1)(images).asnumpy()
    assert out.nbytes > 4 << 20
    for row, image in zip(out, images):
        _, h, w = image.shape
        np.testing.assert_array_equal(row[:, :h, :w], image)
        assert (row[:, h:] == -1).all() and (row[:, :h, w:] == -1).all()
    stacked = Stack()([images[0]] * 12).asnumpy()
    np.testing.assert_array_equal(stacked, np.stack([images[0]] * 12))


@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(st.lists(st.integers(-5, 5), min_size=1, max_size=4),
                          st.integers(0, 9), st.text(max_size=3)), min_size=1, max_size=6))
def test_outputs_never_alias_and_inputs_never_change(samples):
    snapshot = [(list(a), b, c) for a, b, c in samples]
    boxes, labels, names = Tuple(Pad(pad_val=-1), Stack(), List())(samples)
    boxes[:] = 99
    labels[:] = 99
    assert samples == snapshot
    assert names == [c for _, _, c in snapshot]
