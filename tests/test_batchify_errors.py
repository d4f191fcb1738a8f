"""Bad input gets a clear ValueError/TypeError naming the sample, and loses nothing."""
import ast
import pathlib
from collections import namedtuple

import mxnet as mx
import numpy as np
import pytest

import gluonbatch
from gluonbatch.batchify import Append, Dict, List, NamedTuple, Pad, Stack, Tuple

BATCHIFIERS = [Stack(), Pad(), Append(), Tuple(Stack()), List(), Dict({'a': Stack()})]


@pytest.mark.parametrize('fn', BATCHIFIERS, ids=repr)
def test_empty_batch_is_a_value_error(fn):
    with pytest.raises(ValueError, match='batch is empty'):
        fn([])


@pytest.mark.parametrize('fn', [Stack(), Pad(), Append()], ids=repr)
@pytest.mark.parametrize('bad, name', [('text', 'a str'), ({'a': 1}, 'a dict'),
                                       (None, 'a NoneType'), (object(), 'an object')])
def test_unsupported_sample_type_names_index_and_type(fn, bad, name):
    with pytest.raises(TypeError, match=r'sample 1 is %s; expected' % name):
        fn([np.zeros(2), bad])


def test_non_numeric_arrays_are_type_errors():
    with pytest.raises(TypeError, match=r'sample 0 is a numpy.ndarray .* dtype <U1'):
        Stack()([np.array(['a', 'b'])])
    with pytest.raises(TypeError, match='sample 0'):
        Stack()([np.array([1 + 2j])])


def test_ragged_nested_list_is_a_value_error():
    with pytest.raises(ValueError, match='sample 1 is a ragged'):
        Pad()([[[1, 2]], [[1, 2], [3]]])


def test_stack_shape_mismatch_names_sample_and_shapes():
    with pytest.raises(ValueError, match=r'sample 2 has shape \(3, 5\); expected \(3, 4\)'):
        Stack()([np.zeros((3, 4)), np.zeros((3, 4)), np.zeros((3, 5))])


def test_pad_mismatch_on_unpadded_axis_names_sample():
    with pytest.raises(ValueError, match=r'sample 1 has shape \(2, 7\); expected \(\*, 6\)'):
        Pad(axis=0)([np.zeros((3, 6)), np.zeros((2, 7))])


def test_rank_mismatch_names_sample():
    with pytest.raises(ValueError, match=r'sample 1 has shape \(3,\) \(1 dimensions\); '
                                         r'expected 2 dimensions'):
        Pad()([np.zeros((3, 6)), np.zeros(3)])


def test_pad_axis_out_of_range():
    with pytest.raises(ValueError, match='pad axis 2 is out of range'):
        Pad(axis=2)([np.zeros((3, 6))])
    with pytest.raises(ValueError, match='same dimension twice'):
        Pad(axis=(1, -1))([np.zeros((3, 6))])


@pytest.mark.parametrize('pad_val, dtype, match', [
    (-1, 'uint8', r'pad_val=-1 cannot be stored in uint8 \(range 0..255\)'),
    (300, 'uint8', 'range 0..255'),
    (float('nan'), 'int32', 'pad_val=nan cannot be stored in int32'),
    (float('inf'), 'int64', 'cannot be stored in int64'),
    (0.5, 'int64', 'pad_val=0.5 cannot be stored in int64'),
    (1e10, 'float16', 'overflows float16'),
    (2, 'bool', 'only 0 or 1'),
])
def test_pad_value_the_dtype_cannot_hold(pad_val, dtype, match):
    samples = [np.zeros(2, dtype), np.zeros(1, dtype)]
    with pytest.raises(ValueError, match=match):
        Pad(pad_val=pad_val)(samples)
    with pytest.raises(ValueError, match=match):
        Pad(pad_val=pad_val, dtype=dtype)  # known at construction


def test_pad_value_of_wrong_type():
    with pytest.raises(TypeError, match='pad_val must be a real number'):
        Pad(pad_val='0')


def test_nan_padding_is_fine_for_floats():
    out = Pad(pad_val=float('nan'))([np.zeros(2, np.float32), np.zeros(1, np.float32)])
    assert np.isnan(out.asnumpy()[1, 1])


@pytest.mark.parametrize('kwargs, error', [
    ({'axis': 'x'}, TypeError), ({'axis': ()}, TypeError), ({'axis': 1.0}, TypeError),
    ({'num_shards': 0}, ValueError), ({'num_shards': 1.5}, TypeError),
    ({'num_shards': '2'}, TypeError), ({'axis': '1'}, TypeError),
    ({'round_to': 0}, ValueError), ({'dtype': 'uint16'}, TypeError),
])
def test_pad_constructor_checks_arguments(kwargs, error):
    with pytest.raises(error):
        Pad(**kwargs)


def test_dtype_mxnet_cannot_hold_suggests_dtype_argument():
    with pytest.raises(TypeError, match='cannot hold dtype uint16; pass dtype='):
        Pad()([np.zeros(2, np.uint16)])
    assert Pad(dtype='int32')([np.zeros(2, np.uint16)]).dtype == np.int32


def test_append_batch_axis_out_of_range():
    with pytest.raises(ValueError, match=r'sample 0 has shape \(2,\); batch_axis 3'):
        Append(batch_axis=3)([np.zeros(2)])
    with pytest.raises(TypeError, match='batch_axis must be an int'):
        Append(batch_axis='0')


def test_tuple_arguments():
    with pytest.raises(TypeError, match='batchify function 1 must be callable'):
        Tuple(Stack(), 3)
    with pytest.raises(ValueError, match='Tuple takes'):
        Tuple([Stack()], Pad())
    with pytest.raises(ValueError, match='at least one'):
        Tuple([])


def test_tuple_field_count_mismatch_names_sample():
    with pytest.raises(ValueError, match='sample 1 has 3 fields; Tuple expects 2'):
        Tuple(Stack(), Stack())([(1, 2), (1, 2, 3)])
    with pytest.raises(TypeError, match='sample 0 is an int; Tuple expects'):
        Tuple(Stack(), Stack())([1, 2])


def test_tuple_names_the_field_of_an_inner_error():
    with pytest.raises(ValueError, match=r'field 1: sample 1 has shape \(3,\); expected \(2,\)'):
        Tuple(Stack(), Stack())([(0, [1, 2]), (0, [1, 2, 3])])


def test_dict_key_mismatch_and_types():
    batchify = Dict({'a': Stack(), 'b': Pad()})
    with pytest.raises(ValueError, match=r"sample 1 lacks key \['b'\]; Dict batchifies "
                                         r"\['a', 'b'\]"):
        batchify([{'a': 1, 'b': [1]}, {'a': 1, 'c': [1]}])
    strict = Dict({'a': Stack(), 'b': Pad()}, strict=True)
    with pytest.raises(ValueError, match=r"sample 1 has keys \['a', 'c'\].*missing \['b'\], "
                                         r"extra \['c'\]"):
        strict([{'a': 1, 'b': [1]}, {'a': 1, 'c': [1]}])
    with pytest.raises(TypeError, match='sample 0 is a list; Dict expects a dict'):
        batchify([[1, 2]])
    with pytest.raises(TypeError, match="function 'a' must be callable"):
        Dict({'a': 1})
    with pytest.raises(TypeError, match='Dict takes a dict'):
        Dict([Stack()])


def test_named_tuple_mismatches():
    Point = namedtuple('Point', ['x', 'y'])
    with pytest.raises(ValueError, match='1 function given but Point has 2 fields'):
        NamedTuple(Point, [Stack()])
    with pytest.raises(ValueError, match="fields \\['x', 'z'\\] but Point has fields"):
        NamedTuple(Point, {'x': Stack(), 'z': Stack()})
    with pytest.raises(TypeError, match='must be callable'):
        NamedTuple(Point, [Stack(), 'y'])
    with pytest.raises(TypeError, match='needs a namedtuple type'):
        NamedTuple(tuple, [Stack()])
    batchify = NamedTuple(Point, [Stack(), Stack()])
    with pytest.raises(ValueError, match='sample 1 is a tuple; expected Point'):
        batchify([Point(1, 2), (1, 2)])


def test_batch_that_is_not_a_list():
    with pytest.raises(TypeError, match='a batch must be a list of samples'):
        Stack()(5)
    with pytest.raises(TypeError, match='a batch must be a list of samples'):
        Tuple(Stack())('ab')


def test_sparse_ndarray_is_a_type_error():
    sparse = mx.nd.array([[0, 1]]).tostype('csr')
    with pytest.raises(TypeError, match='sparse NDArrays'):
        Stack()([sparse])


def test_failed_call_leaves_inputs_untouched_and_later_calls_work():
    samples = [np.arange(4.0), np.arange(3.0)]
    before = [s.copy() for s in samples]
    with pytest.raises(ValueError):
        Pad(pad_val=-1, dtype='uint8')(samples)
    for sample, original in zip(samples, before):
        np.testing.assert_array_equal(sample, original)
    assert Pad()(samples).shape == (2, 4)


def test_package_has_no_assert_statements():
    """Input checks must survive ``python -O``."""
    package = pathlib.Path(gluonbatch.__file__).parent
    offenders = [f'{path.name}:{node.lineno}' for path in package.rglob('*.py')
                 for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Assert)]
    assert offenders == []
