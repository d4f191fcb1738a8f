"""One check policy everywhere: TypeError for a wrong type, ValueError for a bad value,
and misuse of a combinator catchable as either (GluonNLP raises ValueError there)."""
import collections

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, strategies as st

import gluonbatch
from gluonbatch import BatchifyUsageError, default_collate
from gluonbatch.batchify import (Append, Dict, List, NamedTuple, Pad, Stack, Tuple,
                                 dict_batchify_fn, ms_batchify_fn)
from gluonbatch.dataloader import (default_batchify_fn, default_pad_batchify_fn,
                                   tsn_mp_batchify_fn)
from gluonbatch.examples.synthetic import SyntheticDetection
from helpers import tiny_rcnn_net

Point = collections.namedtuple('Point', ['x', 'y'])

# Every public batchify function, ready to be called on a batch.
BATCHIFIERS = {
    'Stack': Stack(), 'Pad': Pad(), 'Append': Append(), 'List': List(),
    'Tuple': Tuple(Stack(), Stack()), 'Dict': Dict({'a': Stack()}),
    'NamedTuple': NamedTuple(Point, [Stack(), Stack()]), 'default_collate': default_collate,
    'default_batchify_fn': default_batchify_fn,
    'default_pad_batchify_fn': default_pad_batchify_fn, 'ms_batchify_fn': ms_batchify_fn,
    'dict_batchify_fn': dict_batchify_fn, 'tsn_mp_batchify_fn': tsn_mp_batchify_fn,
    'FasterRCNNTrainBatchify': gluonbatch.FasterRCNNTrainBatchify(tiny_rcnn_net()),
    'MaskRCNNTrainBatchify': gluonbatch.MaskRCNNTrainBatchify(tiny_rcnn_net()),
    'Collate': gluonbatch.Collate(),
}

# Functions of tuple samples, and a sample of the width each expects.
TUPLE_BATCHIFIERS = {
    'Tuple': (Tuple(List(), List()), 2), 'default_batchify_fn': (default_batchify_fn, 2),
    'default_pad_batchify_fn': (default_pad_batchify_fn, 2),
    'tsn_mp_batchify_fn': (tsn_mp_batchify_fn, 2), 'ms_batchify_fn': (ms_batchify_fn, 2),
    'default_collate': (default_collate, 2),
    'FasterRCNNTrainBatchify': (BATCHIFIERS['FasterRCNNTrainBatchify'], 5),
    'MaskRCNNTrainBatchify': (BATCHIFIERS['MaskRCNNTrainBatchify'], 6),
}


@pytest.mark.parametrize('name', sorted(BATCHIFIERS))
def test_a_mapping_passed_as_a_batch_is_a_type_error_everywhere(name):
    # Iterating a dict gives its keys: a batch of keys would be silently wrong.
    with pytest.raises(TypeError, match='a batch must be a list of samples, got dict'):
        BATCHIFIERS[name]({0: [1, 2], 1: [3, 4]})


@pytest.mark.parametrize('name', sorted(BATCHIFIERS))
def test_an_empty_batch_is_a_value_error_everywhere(name):
    with pytest.raises(ValueError, match='the batch is empty'):
        BATCHIFIERS[name]([])


@pytest.mark.parametrize('name', sorted(TUPLE_BATCHIFIERS))
@given(widths=st.lists(st.integers(0, 7), min_size=2, max_size=5), data=st.data())
def test_tuple_samples_of_another_width_are_misuse_never_truncated(name, widths, data):
    fn, width = TUPLE_BATCHIFIERS[name]
    widths[0] = width  # sample 0 sets (or has) the width every sample must have
    odd = data.draw(st.integers(1, len(widths) - 1))
    if widths[odd] == width:
        widths[odd] = width + 1
    samples = [tuple(np.ones(1, 'float32') for _ in range(w)) for w in widths]
    with pytest.raises(BatchifyUsageError,
                       match=r'sample \d+ has \d+ (fields?|elements?|items?)'):
        fn(samples)


@pytest.mark.parametrize('name', sorted(TUPLE_BATCHIFIERS))
@pytest.mark.parametrize('sample', [3, 'abc', {'a': 1}], ids=['int', 'str', 'dict'])
def test_a_non_tuple_sample_among_tuples_is_misuse(name, sample):
    fn, width = TUPLE_BATCHIFIERS[name]
    first = tuple(np.ones(1, 'float32') for _ in range(width))
    with pytest.raises(BatchifyUsageError, match='sample 1 is a'):
        fn([first, sample])


@pytest.mark.parametrize('make', [
    lambda: Tuple(Stack(), 3), lambda: Tuple([Stack()], Stack()), lambda: Tuple([]),
    lambda: Dict([Stack()]), lambda: Dict({'a': 'not callable'}),
    lambda: NamedTuple(tuple, [Stack()]), lambda: NamedTuple(Point, [Stack()]),
    lambda: NamedTuple(Point, {'x': Stack(), 'z': Stack()}), lambda: NamedTuple(Point, Stack()),
    lambda: Tuple(Stack(), Stack())([(1, 2), (1, 2, 3)]),
    lambda: Tuple(Stack(), Stack())([(1, 2), 7]),
    lambda: Dict({'a': Stack()})([{'a': 1}, [1]]),
    lambda: Dict({'a': Stack()})([{'a': 1}, {'b': 1}]),
    lambda: NamedTuple(Point, [Stack(), Stack()])([Point(1, 2), (1, 2)]),
], ids=['tuple-not-callable', 'tuple-seq-and-args', 'tuple-empty', 'dict-not-mapping',
        'dict-not-callable', 'namedtuple-not-namedtuple', 'namedtuple-count',
        'namedtuple-names', 'namedtuple-fn-info', 'tuple-width', 'tuple-sample-type',
        'dict-sample-type', 'dict-keys', 'namedtuple-sample-type'])
def test_combinator_misuse_is_catchable_as_type_error_and_as_value_error(make):
    with pytest.raises(BatchifyUsageError) as info:
        make()
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize('make, name', [
    (lambda v: Pad(num_shards=v), 'num_shards'), (lambda v: Pad(round_to=v), 'round_to'),
    (lambda v: Append(batch_axis=v), 'batch_axis'),
    (lambda v: SyntheticDetection(length=v), 'length'),
    (lambda v: gluonbatch.FasterRCNNTrainBatchify(tiny_rcnn_net(), num_shards=v), 'num_shards'),
])
@given(value=st.one_of(st.text(max_size=3), st.floats(allow_nan=False), st.booleans(),
                       st.lists(st.integers(), max_size=2)))
def test_integer_arguments_of_a_wrong_type_are_type_errors(make, name, value):
    with pytest.raises(TypeError, match='%s must be an integer' % name):
        make(value)


@pytest.mark.parametrize('make, name', [
    (lambda v: Pad(num_shards=v), 'num_shards'), (lambda v: Pad(round_to=v), 'round_to'),
    (lambda v: gluonbatch.FasterRCNNTrainBatchify(tiny_rcnn_net(), num_shards=v), 'num_shards'),
])
@given(value=st.integers(max_value=0))
def test_integer_arguments_below_their_minimum_are_value_errors(make, name, value):
    with pytest.raises(ValueError, match=r'%s must be an integer >= 1, got %d' % (name, value)):
        make(value)


def test_mxnet_and_numpy_arrays_are_batches_too():
    assert Stack()(np.ones((3, 2))).shape == (3, 2)
    assert Stack()(mx.nd.ones((3, 2))).shape == (3, 2)
