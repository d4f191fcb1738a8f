"""Zeroed allocations and the zero fill of the batch targets: every element, nothing else."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch import memory
from gluonbatch._core.alloc import allocate
from gluonbatch._core.native import fill_zero
from helpers import examples

DTYPES = ['float32', 'float64', 'uint8', 'int32']


@settings(max_examples=examples(40), deadline=None)
@given(size=st.integers(0, 5000), dtype=st.sampled_from(DTYPES), strided=st.booleans())
def test_every_element_and_nothing_around_it(size, dtype, strided):
    base = np.full(size + 2, 7, dtype)  # a guard element on each side
    inner = base[1:-1]
    array = inner[::2] if strided else inner
    fill_zero(array)
    assert not array.any()
    assert base[0] == 7 and base[-1] == 7  # nothing written outside
    if strided:
        assert (base[2:-1:2] == 7).all()  # the elements between the strided ones kept


def test_a_read_only_array_is_refused_untouched():
    array = np.ones(4, 'float32')
    array.flags.writeable = False
    with pytest.raises(ValueError, match='writable'):
        fill_zero(array)
    assert (array == 1).all()


@pytest.mark.parametrize('mode', ['shared', 'cpu'])
def test_zeroed_allocations_are_zero_even_where_memory_is_reused(mode):
    # ordinary memory comes back from MXNet's pool with what was written in it
    with memory.use_memory(mode):
        for _ in range(20):
            out, view = allocate((256, 1024), 'float32', zeroed=True)
            assert not view.any()
            view[...] = 7
            del out, view
