"""SplitSampler: every rank's equally long part of the dataset, the same split on every rank."""
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch.samplers.split import SplitSampler
from helpers import examples


@settings(max_examples=examples(60), deadline=None)
@given(length=st.integers(0, 60), num_parts=st.integers(1, 9), shuffle=st.booleans(),
       seed=st.integers(0, 2 ** 31), epoch=st.integers(0, 5),
       last_part=st.sampled_from(['pad', 'drop']))
def test_split_sampler_properties(length, num_parts, shuffle, seed, epoch, last_part):
    def parts():
        out = []
        for rank in range(num_parts):
            sampler = SplitSampler(length, num_parts, rank, shuffle=shuffle, seed=seed,
                                   last_part=last_part)
            sampler.set_epoch(epoch)
            out.append(list(sampler))
        return out

    got = parts()
    assert got == parts()  # deterministic: every rank computes the same split
    lengths = {len(part) for part in got}
    assert len(lengths) == 1  # equal: synchronous training does not deadlock
    part_len = lengths.pop()
    every = [i for part in got for i in part]
    assert all(0 <= i < length for i in every)
    if last_part == 'drop':
        assert part_len == length // num_parts
        assert len(set(every)) == len(every)  # disjoint
        assert len(every) == length - length % num_parts
    else:
        assert part_len == -(-length // num_parts)
        assert set(every) == set(range(length))  # complete
        if length >= num_parts:
            assert len(every) - len(set(every)) == (-length) % num_parts  # few duplicates
    if not shuffle:  # one index at a time to every rank, round-robin
        assert [i for step in zip(*got) for i in step] == [
            i % length for i in range(len(every))]


def test_split_sampler_epochs():
    sampler = SplitSampler(20, 2, 0, shuffle=True, seed=3)
    first, second = list(sampler), list(sampler)
    assert first != second and sampler.epoch == 2
    sampler.set_epoch(1)
    assert list(sampler) == second and sampler.epoch == 2
    other = SplitSampler(20, 2, 1, shuffle=True, seed=3)
    assert sorted(first + list(other)) == list(range(20))
    assert list(SplitSampler(20, 2, 0, shuffle=True, seed=4)) != first
    np.testing.assert_array_equal(sampler.indices(0), first)
    assert len(mx.gluon.data.BatchSampler(sampler, 3, 'keep')) == 4


@pytest.mark.parametrize('kwargs, match', [
    (dict(length=-1), 'length'),
    (dict(length=4, num_parts=0), 'num_parts'),
    (dict(length=4, num_parts=2, part_index=2), 'part_index'),
    (dict(length=4, part_index=-1), 'part_index'),
    (dict(length=4, seed=-1), 'seed'), (dict(length=4, last_part='keep'), 'last_part'),
])
def test_split_sampler_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SplitSampler(**kwargs)
    with pytest.raises(ValueError, match='epoch'):
        SplitSampler(4).set_epoch(-1)


# A non-integer is a TypeError (it used to be a ValueError), like every gluonbatch check.
@pytest.mark.parametrize('kwargs, match', [
    (dict(length=3.5), 'length'), (dict(length=True), 'length'), (dict(length='10'), 'length'),
])
def test_split_sampler_non_integers_are_type_errors(kwargs, match):
    with pytest.raises(TypeError, match=match):
        SplitSampler(**kwargs)
    with pytest.raises(TypeError, match='epoch'):
        SplitSampler(4).set_epoch('1')


NON_INTEGERS = st.one_of(st.booleans(), st.floats(), st.text(max_size=3), st.none(),
                         st.lists(st.integers(), max_size=2))


@settings(max_examples=examples(40), deadline=None)
@given(name=st.sampled_from(['length', 'num_parts', 'part_index', 'seed']), value=NON_INTEGERS)
def test_any_non_integer_argument_is_a_type_error(name, value):
    kwargs = dict(length=4, num_parts=2, part_index=0, seed=0)
    kwargs[name] = value
    with pytest.raises(TypeError, match=name):
        SplitSampler(**kwargs)
    with pytest.raises(TypeError, match='epoch'):
        SplitSampler(4).indices(value)


@settings(max_examples=examples(40), deadline=None)
@given(name=st.sampled_from(['length', 'num_parts', 'part_index', 'seed']),
       below=st.integers(1, 2 ** 40), numpy_int=st.booleans())
def test_any_integer_below_the_minimum_is_a_value_error(name, below, numpy_int):
    minimum = {'num_parts': 1}.get(name, 0)
    kwargs = dict(length=4, num_parts=2, part_index=0, seed=0)
    kwargs[name] = np.int64(minimum - below) if numpy_int else minimum - below
    with pytest.raises(ValueError, match=name):
        SplitSampler(**kwargs)


def test_a_split_sampler_gives_a_seeded_sampler_its_rank_wherever_it_is_passed():
    # as the order of a SeededBatchSampler or as a seeded loader's sampler: the rank and
    # whether to shuffle are the SplitSampler's, the order is the seed's permutation
    import mxnet as mx
    from gluonbatch import DataLoader
    from gluonbatch.samplers import SeededBatchSampler

    data = mx.gluon.data.SimpleDataset(list(range(8)))
    for rank in (0, 1):
        split = SplitSampler(8, 2, rank, shuffle=True, seed=5)  # its own seed is not used
        direct = SeededBatchSampler(8, 2, seed=3, order=split)
        plain = SeededBatchSampler(8, 2, seed=3, num_parts=2, part_index=rank)
        assert [[key.index for key in batch] for batch in direct] == \
            [[key.index for key in batch] for batch in plain]
        loader = DataLoader(data, batch_size=2, sampler=split, seed=3)
        assert [batch.asnumpy().tolist() for batch in loader] == \
            [[key.index for key in batch] for batch in plain.batches(0)]
