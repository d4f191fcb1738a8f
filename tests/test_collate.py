"""``gluonbatch.default_collate`` and ``gluonbatch.Collate``: the PyTorch-style collate.

Arrays are stacked on a new axis 0 with their dtype kept, Python numbers become 1-d arrays
(bool / int64 / float64), strings and bytes are listed, and mappings, namedtuples and other
sequences keep their type with each field collated. Nested structures are checked against
a small numpy reference implementation (``reference_collate``). Every NDArray returned must
be in ``cpu_shared(0)``, the inputs must be left unchanged, and the outputs must not alias
the inputs. The type registry of ``Collate`` is tested on fresh instances, so
``default_collate`` itself is never modified.
"""
import collections
import collections.abc
import pickle

import mxnet as mx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gluonbatch import Collate, default_collate
from helpers import (SHARED, assert_same_batch, assert_unchanged, examples, ndarrays,
                     overwrite_all, snapshot)

DTYPES = tuple(np.dtype(t) for t in (
    'float16', 'float32', 'float64', 'uint8', 'int8', 'int32', 'int64', 'bool'))
MAX_BATCH = 6

EXAMPLES = settings(max_examples=examples(80), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Point = collections.namedtuple('Point', ['x', 'y'])
Record = collections.namedtuple('Record', ['image', 'label', 'name'])


# --------------------------------------------------------------------------------------
# Helpers: a reference implementation, comparison, snapshots
# --------------------------------------------------------------------------------------

def reference_collate(samples):
    """What default_collate should return, with numpy arrays for the NDArray leaves."""
    first = samples[0]
    if isinstance(first, mx.nd.NDArray):
        return np.stack([sample.asnumpy() for sample in samples])
    if isinstance(first, (np.ndarray, np.generic)):
        return np.stack([np.asarray(sample) for sample in samples])
    if isinstance(first, bool):
        return np.array(samples, dtype=np.bool_)
    if isinstance(first, (int, float)):
        # int64 for ints, float64 as soon as one sample is a float
        dtype = np.float64 if any(isinstance(s, float) for s in samples) else np.int64
        return np.array(samples, dtype=dtype)
    if isinstance(first, (str, bytes)):
        return list(samples)
    if isinstance(first, dict):
        return type(first)((key, reference_collate([s[key] for s in samples]))
                           for key in first)
    if isinstance(first, tuple) and hasattr(first, '_fields'):
        return type(first)(*(reference_collate(list(field)) for field in zip(*samples)))
    if isinstance(first, (list, tuple)):
        width = len(first)
        return type(first)(reference_collate([s[i] for s in samples]) for i in range(width))
    raise AssertionError('reference_collate: unexpected %r' % (first,))


def check_collate(samples, collate=default_collate):
    """Collate, compare with the reference, and check inputs are neither changed nor aliased."""
    before = snapshot(samples)
    expected = reference_collate(samples)
    ours = collate(samples)
    assert_unchanged(before, snapshot(samples), 'input after collate')
    assert_same_batch(ours, expected, compare_context=False)
    overwrite_all(ours)
    assert_unchanged(before, snapshot(samples), 'input after writing to the output')
    return collate(samples)


# --------------------------------------------------------------------------------------
# Arrays, numpy scalars, Python numbers, strings
# --------------------------------------------------------------------------------------

@st.composite
def array_batches(draw):
    kind = draw(st.sampled_from(['numpy', 'ndarray']))
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0 if kind == 'numpy' else 1, max_dims=4,
                                  min_side=0 if kind == 'numpy' else 1, max_side=4))
    count = draw(st.integers(1, MAX_BATCH))
    arrays = [draw(hnp.arrays(dtype, shape)) for _ in range(count)]
    if kind == 'ndarray':
        context = draw(st.sampled_from([mx.cpu(0), SHARED]))
        arrays = [mx.nd.array(a, dtype=dtype, ctx=context) for a in arrays]
    return arrays


@EXAMPLES
@given(samples=array_batches())
def test_arrays_stacked_keeping_dtype(samples):
    ours = check_collate(samples)
    assert ours.shape == (len(samples),) + tuple(samples[0].shape)
    assert np.dtype(ours.dtype) == np.dtype(samples[0].dtype)
    assert ours.context == SHARED


@pytest.mark.parametrize('dtype', DTYPES, ids=str)
def test_numpy_scalars_give_1d_of_their_dtype(dtype):
    samples = [dtype.type(1), dtype.type(0), dtype.type(1)]
    ours = check_collate(samples)
    assert ours.shape == (3,) and np.dtype(ours.dtype) == dtype
    assert ours.asnumpy().tolist() == [1, 0, 1]


@pytest.mark.parametrize('samples, dtype, values', [
    ([1, 2, -3], np.int64, [1, 2, -3]),
    ([2 ** 40, 0], np.int64, [2 ** 40, 0]),
    ([0.5, -1.25], np.float64, [0.5, -1.25]),
    ([True, False, True], np.bool_, [True, False, True]),
    ([1, 2.5], np.float64, [1.0, 2.5]),
    ([2.5, 1], np.float64, [2.5, 1.0]),
    ([3], np.int64, [3]),
], ids=['int', 'big_int', 'float', 'bool', 'int_float', 'float_int', 'one'])
def test_python_numbers(samples, dtype, values):
    ours = check_collate(samples)
    assert isinstance(ours, mx.nd.NDArray) and ours.context == SHARED
    assert ours.shape == (len(samples),) and np.dtype(ours.dtype) == np.dtype(dtype)
    assert ours.asnumpy().tolist() == values


@pytest.mark.parametrize('samples', [['a', 'bc', ''], [b'x', b'yz'], ['only']],
                         ids=['str', 'bytes', 'one'])
def test_strings_and_bytes_give_a_list(samples):
    ours = default_collate(samples)
    assert type(ours) is list and ours == samples and ours is not samples


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------

def test_dict_keeps_type_and_key_order():
    samples = [{'b': np.full((2,), i, 'uint8'), 'a': i, 'c': 'n%d' % i} for i in range(3)]
    samples[1] = {'a': 1, 'c': 'n1', 'b': np.full((2,), 1, 'uint8')}  # other order
    ours = check_collate(samples)
    assert type(ours) is dict and list(ours) == ['b', 'a', 'c']
    assert ours['b'].dtype == np.uint8 and ours['b'].asnumpy()[:, 0].tolist() == [0, 1, 2]
    assert ours['a'].dtype == np.int64 and ours['c'] == ['n0', 'n1', 'n2']


def test_ordered_dict_keeps_type():
    samples = [collections.OrderedDict([('z', float(i)), ('y', mx.nd.ones((2, 2)) * i)])
               for i in range(2)]
    ours = check_collate(samples)
    assert type(ours) is collections.OrderedDict and list(ours) == ['z', 'y']
    assert ours['z'].dtype == np.float64 and ours['y'].shape == (2, 2, 2)


def test_namedtuple_keeps_type():
    samples = [Record(np.zeros((3, 2), 'float32') + i, i, 'r%d' % i) for i in range(4)]
    ours = check_collate(samples)
    assert type(ours) is Record
    assert ours.image.shape == (4, 3, 2) and ours.label.asnumpy().tolist() == [0, 1, 2, 3]
    assert ours.name == ['r0', 'r1', 'r2', 'r3']


def test_list_and_tuple_keep_type():
    tuples = check_collate([(np.ones(2), 1), (np.zeros(2), 2)])
    assert type(tuples) is tuple and len(tuples) == 2
    assert tuples[0].shape == (2, 2) and tuples[0].dtype == np.float64
    lists = check_collate([[1, 2.0], [3, 4.0]])  # transposed, position by position
    assert type(lists) is list
    assert lists[0].dtype == np.int64 and lists[0].asnumpy().tolist() == [1, 3]
    assert lists[1].dtype == np.float64 and lists[1].asnumpy().tolist() == [2.0, 4.0]


def test_nested_example():
    samples = [{'image': mx.nd.ones((3, 2, 2), dtype='uint8') * i,
                'target': (np.full((i + 1, 4), i, 'float32')[:1], Point(i, i * 0.5)),
                'meta': {'id': i, 'tags': ['t%d' % i, 'u']}} for i in range(3)]
    ours = check_collate(samples)
    assert ours['image'].shape == (3, 3, 2, 2) and ours['image'].dtype == np.uint8
    boxes, point = ours['target']
    assert boxes.shape == (3, 1, 4) and type(point) is Point
    assert point.x.dtype == np.int64 and point.y.dtype == np.float64
    assert ours['meta']['tags'] == [['t0', 't1', 't2'], ['u', 'u', 'u']]


# Hypothesis: random nested schemas; every sample of a batch follows the schema.

LEAF_KINDS = ('numpy', 'ndarray', 'int', 'float', 'mixed', 'bool', 'str', 'numpy_scalar')


@st.composite
def leaf_schema(draw):
    kind = draw(st.sampled_from(LEAF_KINDS))
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=0 if kind == 'numpy' else 1, max_dims=3,
                                  min_side=0 if kind == 'numpy' else 1, max_side=3))
    return ('leaf', kind, dtype, shape)


def schemas():
    return st.recursive(
        leaf_schema(),
        lambda children: st.one_of(
            st.lists(children, max_size=3).map(lambda items: ('list', items)),
            st.lists(children, max_size=3).map(lambda items: ('tuple', items)),
            st.tuples(children, children).map(lambda items: ('point', list(items))),
            st.dictionaries(st.sampled_from('abcdef'), children, max_size=3).map(
                lambda items: ('dict', items)),
            st.dictionaries(st.sampled_from('uvwxyz'), children, max_size=3).map(
                lambda items: ('ordered', items))),
        max_leaves=6)


@st.composite
def sample_from(draw, schema):
    tag, body = schema[0], schema[1:]
    if tag == 'leaf':
        kind, dtype, shape = body
        if kind in ('numpy', 'ndarray', 'numpy_scalar'):
            array = draw(hnp.arrays(dtype, () if kind == 'numpy_scalar' else shape))
            if kind == 'numpy_scalar':
                return array[()]
            return mx.nd.array(array, dtype=dtype) if kind == 'ndarray' else array
        ints = st.integers(-2 ** 62, 2 ** 62)
        return draw({'int': ints, 'float': st.floats(), 'mixed': st.one_of(ints, st.floats()),
                     'bool': st.booleans(), 'str': st.text(max_size=3)}[kind])
    items = body[0]
    if tag in ('dict', 'ordered'):
        keys = draw(st.permutations(list(items)))  # samples may order their keys differently
        mapping = {key: draw(sample_from(items[key])) for key in keys}
        return collections.OrderedDict(mapping) if tag == 'ordered' else mapping
    values = [draw(sample_from(item)) for item in items]
    return {'list': list, 'tuple': tuple, 'point': lambda v: Point(*v)}[tag](values)


@st.composite
def nested_batches(draw):
    schema = draw(schemas())
    count = draw(st.integers(1, MAX_BATCH))
    return [draw(sample_from(schema)) for _ in range(count)]


@EXAMPLES
@given(samples=nested_batches())
def test_nested_structures_match_reference(samples):
    ours = check_collate(samples)
    assert all(array.context == SHARED for array in ndarrays(ours))


def test_outputs_are_fresh_for_shared_inputs():
    # Inputs already in cpu_shared (as from a worker), including a batch of one.
    for count in (1, 3):
        samples = [{'x': mx.nd.array([i, i + 1], ctx=SHARED, dtype='int32')}
                   for i in range(count)]
        ours = check_collate(samples)
        assert ours['x'].context == SHARED
        ours['x'][:] = -7
        assert [s['x'].asnumpy().tolist() for s in samples] == [[i, i + 1]
                                                               for i in range(count)]


def test_inputs_of_strings_and_lists_not_mutated():
    samples = [{'names': ['a', 'b'], 'v': [1, 2]}, {'names': ['c', 'd'], 'v': [3, 4]}]
    ours = default_collate(samples)
    assert samples == [{'names': ['a', 'b'], 'v': [1, 2]}, {'names': ['c', 'd'], 'v': [3, 4]}]
    assert ours['names'] == [['a', 'c'], ['b', 'd']]
    ours['names'][0].append('zzz')
    assert samples[0]['names'] == ['a', 'b']


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize('samples', [
    [[1, 2], [3]],
    [(np.zeros(2), 1), (np.zeros(2),)],
    [{'a': [1, 2]}, {'a': [1, 2, 3]}],
], ids=['list', 'tuple', 'nested'])
def test_different_lengths(samples):
    with pytest.raises(ValueError, match='should be of equal size'):
        default_collate(samples)


@pytest.mark.parametrize('samples, sample', [
    ([{'a': 1}, {'b': 1}], 1),
    ([{'a': 1, 'b': 2}, {'a': 1, 'b': 2}, {'a': 1}], 2),
    ([{'x': {'a': 1}}, {'x': {'a': 1, 'c': 3}}], 1),
], ids=['other_key', 'missing_key', 'nested'])
def test_mismatched_dict_keys(samples, sample):
    with pytest.raises(ValueError, match='sample %d' % sample):
        default_collate(samples)


@pytest.mark.parametrize('bad', [object(), None, {1, 2}], ids=['object', 'None', 'set'])
def test_unsupported_type_lists_supported_types(bad):
    with pytest.raises(TypeError, match='supported types') as info:
        default_collate([bad, bad])
    message = str(info.value)
    for name in ('NDArray', 'ndarray', 'int', 'float', 'str', 'Mapping', 'Sequence'):
        assert name in message, message
    assert type(bad).__name__ in message


def test_unsupported_type_inside_a_structure():
    with pytest.raises(TypeError, match='supported types'):
        default_collate([{'a': None}, {'a': None}])


# --------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------

class Box:
    def __init__(self, coords):
        self.coords = np.asarray(coords, 'float32')


class Shape:
    def __init__(self, name):
        self.name = name


class Circle(Shape):
    pass


class SmallCircle(Circle):
    pass


def test_register_custom_class_gets_the_field_list_and_recurses():
    collate = Collate()
    calls = []

    def collate_boxes(samples, recurse):
        calls.append((list(samples), recurse))
        return recurse([box.coords for box in samples])

    assert collate.register(Box, collate_boxes) is collate_boxes
    boxes = [Box([i, i, i + 2, i + 2]) for i in range(3)]
    batch = collate([(box, i) for i, box in enumerate(boxes)])
    assert len(calls) == 1
    received, recurse = calls[0]
    assert received == boxes  # the per-field list, in batch order (the same objects)
    assert recurse is collate
    assert type(batch) is tuple and batch[0].shape == (3, 4) and batch[0].dtype == np.float32
    assert batch[0].context == SHARED
    assert batch[0].asnumpy()[:, 0].tolist() == [0, 1, 2]
    with pytest.raises(TypeError, match='supported types'):  # default_collate unchanged
        default_collate([boxes[0], boxes[1]])


@pytest.mark.parametrize('base_first', [True, False])
def test_most_specific_type_wins(base_first):
    collate = Collate()
    registrations = [(Shape, lambda s, c: 'shape'), (Circle, lambda s, c: 'circle')]
    for kind, fn in (registrations if base_first else registrations[::-1]):
        collate.register(kind, fn)
    assert collate([Shape('a'), Shape('b')]) == 'shape'
    assert collate([Circle('a'), Circle('b')]) == 'circle'
    assert collate([SmallCircle('a')]) == 'circle'  # nearest registered base


def test_later_registration_replaces_earlier():
    collate = Collate()
    collate.register(Shape, lambda s, c: 'first')
    collate.register(Shape, lambda s, c: 'second')
    assert collate([Shape('a')]) == 'second'
    collate.register(int, lambda s, c: 'ints')  # replacing a built-in
    assert collate([1, 2]) == 'ints'
    assert Collate()([1, 2]).asnumpy().tolist() == [1, 2]  # registries are per instance
    assert default_collate([1, 2]).asnumpy().tolist() == [1, 2]


def test_register_as_decorator():
    collate = Collate()

    @collate.register(Shape)
    def names(samples, recurse):
        return recurse([s.name for s in samples])

    assert callable(names) and names.__name__ == 'names'
    batch = collate([{'s': Shape('x')}, {'s': Shape('y')}])
    assert batch == {'s': ['x', 'y']}


@pytest.mark.parametrize('kind', ['int', 3, None, Shape('x')],
                         ids=['str', 'int', 'None', 'instance'])
def test_register_with_a_non_type(kind):
    collate = Collate()
    with pytest.raises(TypeError, match='register takes a type'):
        collate.register(kind, lambda s, c: None)
    assert collate([1]).asnumpy().tolist() == [1]  # nothing registered


def test_register_a_non_callable():
    with pytest.raises(TypeError, match='must be callable'):
        Collate().register(Shape, 'not a function')


@pytest.mark.parametrize('abc, samples', [
    (collections.abc.MutableSequence, [[1, 2], [3, 4]]),
    (collections.abc.MutableMapping, [{'a': 1}, {'a': 2}]),
], ids=['MutableSequence', 'MutableMapping'])
def test_most_specific_abstract_type_wins(abc, samples):
    """A registered ABC more specific than the built-in Sequence / Mapping wins, although
    ``list`` and ``dict`` are only virtual subclasses of these ABCs (not in their
    ``__mro__``): the README promises that "the most specific registered type wins"."""
    collate = Collate()
    collate.register(abc, lambda s, c: 'custom')
    assert collate(samples) == 'custom'


# --------------------------------------------------------------------------------------
# In mx.gluon.data.DataLoader, with worker processes
# --------------------------------------------------------------------------------------

class DictDataset(mx.gluon.data.Dataset):
    """Sample i: a dict with an image, a nested (boxes, Point) target and metadata."""

    def __len__(self):
        return 10

    def __getitem__(self, idx):
        return {'image': np.full((3, 4, 4), idx, 'uint8'),
                'target': (np.full((2, 5), idx, 'float32'), Point(idx, idx / 2)),
                'meta': {'id': idx, 'name': 'img%d' % idx, 'flip': idx % 2 == 0}}


def test_default_collate_pickles():
    # mx.gluon.data.DataLoader sends the batchify function to its workers with every batch.
    clone = pickle.loads(pickle.dumps(default_collate))
    assert clone([1, 2]).asnumpy().tolist() == [1, 2]


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_in_gluon_dataloader(num_workers):
    loader = mx.gluon.data.DataLoader(DictDataset(), batch_size=4, shuffle=False,
                                      last_batch='keep', batchify_fn=default_collate,
                                      num_workers=num_workers)
    ids, names, sizes = [], [], []
    for batch in loader:
        assert type(batch) is dict and list(batch) == ['image', 'target', 'meta']
        assert all(array.context == SHARED for array in ndarrays(batch))
        boxes, point = batch['target']
        assert type(batch['target']) is tuple and type(point) is Point
        n = batch['image'].shape[0]
        sizes.append(n)
        assert batch['image'].shape == (n, 3, 4, 4) and batch['image'].dtype == np.uint8
        assert boxes.shape == (n, 2, 5) and boxes.dtype == np.float32
        assert point.x.dtype == np.int64 and point.y.dtype == np.float64
        assert batch['meta']['flip'].dtype == np.bool_
        batch_ids = batch['meta']['id'].asnumpy()
        np.testing.assert_array_equal(batch['image'].asnumpy()[:, 0, 0, 0], batch_ids)
        np.testing.assert_array_equal(boxes.asnumpy()[:, 1, 4], batch_ids)
        np.testing.assert_array_equal(point.y.asnumpy(), batch_ids / 2)
        np.testing.assert_array_equal(batch['meta']['flip'].asnumpy(), batch_ids % 2 == 0)
        ids.extend(batch_ids.tolist())
        names.extend(batch['meta']['name'])
    assert sizes == [4, 4, 2]
    assert ids == list(range(10))
    assert names == ['img%d' % i for i in range(10)]
