"""The zero fill of the batch targets: every element of every array, nothing else."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch._core.write import PARALLEL_MIN_BYTES, fill_zeros

DTYPES = ['float32', 'float64', 'uint8', 'int32']


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 3000), min_size=1, max_size=5),
       dtypes=st.lists(st.sampled_from(DTYPES), min_size=5, max_size=5),
       large=st.booleans(), strided=st.booleans())
def test_every_element_of_every_array_and_nothing_around_them(sizes, dtypes, large, strided):
    scale = PARALLEL_MIN_BYTES // 4000 + 1 if large else 1  # large: the threaded path
    arrays, bases = [], []
    for size, dtype in zip(sizes, dtypes):
        base = np.full(size * scale + 2, 7, dtype)  # a guard element on each side
        bases.append(base)
        inner = base[1:-1]
        arrays.append(inner[::2] if strided else inner)
    fill_zeros(arrays)
    for base, array in zip(bases, arrays):
        assert not array.any()
        assert base[0] == 7 and base[-1] == 7  # nothing written outside
        if strided:
            assert (base[2:-1:2] == 7).all()  # the elements between the strided ones kept


def test_a_read_only_array_is_refused_untouched():
    array = np.ones(4, 'float32')
    array.flags.writeable = False
    with pytest.raises(ValueError, match='writable'):
        fill_zeros([array])
    assert (array == 1).all()
