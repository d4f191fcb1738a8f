"""The presets' box arithmetic against gluoncv's, bit for bit (signs of zero included).

A float64 label of a few boxes with plain, finite numbers is done in Python floats, every
other label in numpy: both must give gluoncv's bits, dtype and shape, and never write to
the label.
"""
import numpy as np
import pytest
from gluoncv.data.transforms import bbox as gcv_bbox
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.transforms import boxes

# coordinates that meet edges and each other: small integers, halves, signed zeros
_COORDINATE = st.one_of(st.sampled_from([0.0, -0.0, 0.5, 1.0, 2.0, 3.5, 4.0, 7.0, 10.0]),
                        st.integers(-20, 60).map(float),
                        st.floats(-100, 100, allow_nan=False, width=64))
_NON_FINITE = st.sampled_from([np.nan, -np.nan, np.inf, -np.inf])
_NUMBER = st.one_of(st.integers(-10, 40), st.sampled_from([0.0, -0.0, 2.5, 7.0, 1e-9]),
                    st.floats(-50, 50, allow_nan=False))
# with the numbers numpy must take: nan, infinities, ints a double cannot hold, numpy's own
_ANY_NUMBER = st.one_of(_NUMBER, _NON_FINITE.map(float), st.just(2 ** 60 + 1),
                        _NUMBER.map(np.float64))


@st.composite
def labels(draw, dtypes=('float64',), non_finite=False):
    """(N, 4+) labels of ``dtypes``: N 0-6 (Python's path) or one past
    ``boxes.PYTHON_ROWS`` (numpy's), 4-6 columns; with ``non_finite``, some nan or infinite
    values anywhere."""
    rows = draw(st.one_of(st.integers(0, 6), st.just(boxes.PYTHON_ROWS + 1)))
    columns = draw(st.integers(4, 6))
    values = draw(st.lists(_COORDINATE, min_size=rows * columns, max_size=rows * columns))
    label = np.array(values, np.float64).reshape(rows, columns)
    if non_finite and label.size:
        for _ in range(draw(st.integers(1, 3))):
            at = draw(st.integers(0, label.size - 1))
            label.flat[at] = draw(_NON_FINITE)
    dtype = draw(st.sampled_from(dtypes))
    with np.errstate(invalid='ignore'):
        return label.astype(dtype)


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes(), (got, want)


def _unchanged(label, fn):
    """``fn(label)``, checking that ``label`` is left as it was and not shared."""
    before = label.copy()
    out = fn(label)
    assert label.tobytes() == before.tobytes()
    assert not np.shares_memory(out, label)
    return out


# gluoncv reads a crop edge of 0 (or -0.0) as 0 and a width or height of 0 as unbounded
_EDGE = _NUMBER.filter(lambda value: value != 0)
_EXTENT = st.one_of(st.integers(1, 40), st.floats(1e-9, 50))


def _same_outcome(theirs, ours):
    """Run gluoncv's ``theirs`` and our ``ours``: the same bits, or the same error."""
    with np.errstate(all='ignore'):
        try:
            want = theirs()
        except (TypeError, ValueError) as err:  # numpy refuses a cast in place
            with pytest.raises(type(err)):
                ours()
            return
        got = ours()
    _same_bits(got, want)


@settings(deadline=None)
@given(labels(('float64', 'float32', 'int64')) | labels(non_finite=True),
       st.tuples(_EDGE, _EDGE, _EXTENT, _EXTENT), st.booleans())
def test_crop_matches_gluoncv(label, crop_box, keep_outside_center):
    _same_outcome(
        lambda: gcv_bbox.crop(label, crop_box, allow_outside_center=keep_outside_center),
        lambda: _unchanged(label, lambda lb: boxes.crop(lb, crop_box, keep_outside_center)))


@settings(deadline=None)
@given(labels(('float64', 'float32', 'int64')) | labels(non_finite=True), _ANY_NUMBER,
       _ANY_NUMBER)
def test_translate_matches_gluoncv(label, x_offset, y_offset):
    _same_outcome(lambda: gcv_bbox.translate(label, x_offset, y_offset),
                  lambda: _unchanged(label, lambda lb: boxes.translate(lb, x_offset, y_offset)))


_SIDE = st.one_of(st.integers(1, 1000), st.floats(0.5, 1000), _NON_FINITE.map(float))


@settings(deadline=None)
@given(labels(('float64', 'float32', 'int64')) | labels(non_finite=True),
       st.tuples(_SIDE, _SIDE), st.tuples(_SIDE, _SIDE))
def test_resize_matches_gluoncv(label, in_size, out_size):
    _same_outcome(lambda: gcv_bbox.resize(label, in_size, out_size),
                  lambda: _unchanged(label, lambda lb: boxes.resize(lb, in_size, out_size)))


@settings(deadline=None)
@given(labels(('float64', 'float32', 'int64')) | labels(non_finite=True),
       st.tuples(_SIDE, _SIDE), st.booleans(), st.booleans())
def test_flip_matches_gluoncv(label, size, flip_x, flip_y):
    _same_outcome(lambda: gcv_bbox.flip(label, size, flip_x=flip_x, flip_y=flip_y),
                  lambda: _unchanged(label, lambda lb: boxes.flip(lb, size, flip_x=flip_x,
                                                                  flip_y=flip_y)))


def test_a_tie_with_an_edge_takes_the_edges_zero():
    """numpy's maximum gives its second argument on a tie: a box at -0.0 cropped at 0.0
    starts at 0.0 - 0.0 = +0.0, where taking the box's -0.0 would give -0.0 - 0.0 = -0.0."""
    label = np.array([[-0.0, -0.0, 5.0, 5.0, 1.0]])
    got = boxes.crop(label, (0.0, 0.0, 10, 10))
    assert not np.signbit(got[0, :2]).any()
    _same_bits(got, gcv_bbox.crop(label, (0.0, 0.0, 10, 10), allow_outside_center=False))


@pytest.mark.parametrize('value, plain', [(1.5, True), (3, True), (2 ** 53, True),
                                          (-2 ** 53, True), (2 ** 53 + 1, False),
                                          (True, False), (np.float64(1.5), False),
                                          (np.int64(3), False), ('3', False)])
def test_plain_numbers_are_python_floats_and_exact_ints(value, plain):
    assert boxes.plain_number(value) is plain


def test_numpy_numbers_take_numpys_path_to_the_same_boxes():
    label = np.array([[10.0, 20.0, 30.0, 40.0, 1.0], [1.0, 2.0, 3.0, 4.0, 0.0]])
    crop_box = (np.int64(5), np.float32(2.5), np.int64(20), np.float64(30.25))
    _same_bits(boxes.crop(label, crop_box),
               gcv_bbox.crop(label, crop_box, allow_outside_center=False))
    _same_bits(boxes.crop(label, crop_box), boxes.crop(label, tuple(map(float, crop_box))))


@pytest.mark.parametrize('dtype', ['float64', 'float32'])
def test_a_centre_on_the_crops_near_edge_is_kept_and_on_its_far_edge_dropped(dtype):
    """The crop is half-open, ``[x, x + width)``: boxes centred on each edge, both paths."""
    label = np.array([[0, 0, 10, 10, 0],  # centre (5, 5): the near corner
                      [10, 2, 20, 8, 1],  # centre (15, 5): the far side
                      [2, 10, 8, 20, 2],  # centre (5, 15): the far bottom
                      [4, 4, 8, 8, 3]], dtype)  # inside
    got = boxes.crop(label, (5, 5, 10, 10))
    _same_bits(got, gcv_bbox.crop(label, (5, 5, 10, 10), allow_outside_center=False))
    assert got[:, 4].tolist() == [0, 3]


def test_a_few_float64_boxes_are_cropped_without_numpys_ufuncs(monkeypatch):
    """The fast path is taken for a sample's few boxes, and left for many (numpy's
    ``maximum`` is what the numpy path clips with)."""
    calls = []
    maximum = np.maximum
    monkeypatch.setattr(np, 'maximum', lambda *args: calls.append(1) or maximum(*args))
    few = np.tile([[1.0, 2.0, 30.0, 40.0, 0.0]], (boxes.PYTHON_ROWS, 1))
    boxes.crop(few, (5, 5, 20, 20))
    assert not calls
    boxes.crop(np.concatenate([few, few[:1]]), (5, 5, 20, 20))
    assert calls


@pytest.mark.parametrize('op', ['translate', 'resize', 'flip'])
def test_a_nan_number_with_a_nan_coordinate_gives_the_same_bits_every_call(op):
    """Which of two NaNs an operation returns depends on the operands' order, which
    Python's specialised float operations change after a few calls: such numbers go
    through numpy, whose bits for the same call stay the same."""
    label = np.array([[-np.nan, -np.nan, 1.0, 1.0, 0.0]])
    call = {'translate': lambda: boxes.translate(label, np.nan, np.nan),
            'resize': lambda: boxes.resize(label, (1, 1), (np.nan, np.nan)),
            'flip': lambda: boxes.flip(label, (np.nan, np.nan), flip_x=True, flip_y=True)}[op]
    assert len({call().tobytes() for _ in range(20)}) == 1
