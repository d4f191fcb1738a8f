"""SplitSampler: every rank's equally long part of the dataset, the same split on every rank."""
import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gluonbatch.dataloader
import gluonbatch.sharding
from gluonbatch.sampler import SplitSampler


def test_old_import_paths_name_the_same_class():
    assert gluonbatch.sharding.SplitSampler is SplitSampler
    assert gluonbatch.dataloader.SplitSampler is SplitSampler


@settings(max_examples=60, deadline=None)
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
    if not shuffle and last_part == 'drop':
        assert every == list(range(len(every)))


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
    (dict(length=-1), 'length'), (dict(length=3.5), 'length'),
    (dict(length=4, num_parts=0), 'num_parts'),
    (dict(length=4, num_parts=2, part_index=2), 'part_index'),
    (dict(length=4, part_index=-1), 'part_index'),
    (dict(length=4, seed=-1), 'seed'), (dict(length=4, last_part='keep'), 'last_part'),
    (dict(length=True), 'length'),
])
def test_split_sampler_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SplitSampler(**kwargs)
    with pytest.raises(ValueError, match='epoch'):
        SplitSampler(4).set_epoch(-1)
