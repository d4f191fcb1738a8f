"""A sampler or loader whose every pass is empty says so, once, as it is made: with
``last_batch`` ``'discard'`` or ``'rollover'`` and fewer samples than a (global) batch,
naming the numbers and what to change; never when a pass has batches."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gluonbatch
from gluonbatch.dataloader import RandomTransformDataLoader
from gluonbatch.samplers import SeededBatchSampler, SeededBucketSampler, SplitSampler
from helpers import examples


def made(make):
    """``(made object, the UserWarnings making it raised)``."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        value = make()
    return value, [w for w in record if issubclass(w.category, UserWarning)]


def data_of(length):
    return mx.gluon.data.SimpleDataset([np.float32(i) for i in range(length)])


@settings(max_examples=examples(80), deadline=None)
@given(length=st.integers(0, 40), batch_size=st.integers(1, 24), num_parts=st.integers(1, 3),
       last_batch=st.sampled_from(['keep', 'discard', 'pad', 'rollover']))
def test_a_seeded_sampler_warns_exactly_when_its_passes_are_empty(length, batch_size,
                                                                  num_parts, last_batch):
    size = batch_size * num_parts
    if last_batch == 'keep' and num_parts > 1 and length % size:
        return  # refused: the ranks would run different numbers of batches
    sampler, warned = made(lambda: SeededBatchSampler(
        length, batch_size, seed=5, last_batch=last_batch, num_parts=num_parts,
        part_index=num_parts - 1))
    empty = last_batch in ('discard', 'rollover') and 0 < length < size
    assert len(warned) == (1 if empty else 0)
    passes, again = made(lambda: [len(list(sampler)) for _ in range(3)])
    assert again == []  # once, as it is made: not per pass
    if length:
        assert (passes[0] == 0) == empty
    if empty:
        assert sampler.batches_in(0) == 0
        if last_batch == 'discard':
            assert passes == [0, 0, 0]
        message = str(warned[0].message)
        assert 'batch_size=%d ' % batch_size in message
        assert 'the %d sample' % length in message and repr(last_batch) in message
        assert 'at most %d' % (length // num_parts) in message or length < num_parts
        assert warned[0].filename == __file__  # the line that made it


@settings(max_examples=examples(40), deadline=None)
@given(length=st.integers(1, 30), batch_size=st.integers(1, 40),
       last_batch=st.sampled_from(['keep', 'discard', 'rollover']),
       seed=st.sampled_from([None, 3]))
def test_a_loader_warns_once_exactly_when_its_passes_are_empty(length, batch_size,
                                                               last_batch, seed):
    loader, warned = made(lambda: gluonbatch.DataLoader(
        data_of(length), batch_size=batch_size, last_batch=last_batch, seed=seed))
    first, again = made(lambda: [len(list(loader)) for _ in range(2)][0])
    assert again == []
    assert len(warned) == (1 if first == 0 else 0)
    assert (first == 0) == (last_batch != 'keep' and length < batch_size)
    if warned:
        message = str(warned[0].message)
        assert message.startswith('batch_size=%d is larger than the %d sample'
                                  % (batch_size, length))
        assert "last_batch='keep'" in message and 'at most %d' % length in message
        assert warned[0].filename == __file__


def test_the_message_says_why_and_what_to_change():
    _, [discard] = made(lambda: gluonbatch.DataLoader(data_of(16), batch_size=64,
                                                       last_batch='discard'))
    assert str(discard.message) == (
        "batch_size=64 is larger than the 16 samples: with last_batch='discard' every pass "
        "is empty (len() is 0); use last_batch='keep', or a batch_size of at most 16")
    loader, [rollover] = made(lambda: gluonbatch.DataLoader(data_of(16), batch_size=64,
                                                             last_batch='rollover'))
    assert 'the first 3 passes are empty' in str(rollover.message)
    assert 'a batch comes only every 4 passes' in str(rollover.message)
    assert [len(list(loader)) for _ in range(8)] == [0, 0, 0, 1, 0, 0, 0, 1]


def test_a_rank_is_checked_on_its_own_part():
    # unseeded: MXNet batches the 10 samples the SplitSampler gives this rank
    _, [warned] = made(lambda: gluonbatch.DataLoader(
        data_of(20), batch_size=16, last_batch='discard', sampler=SplitSampler(20, 2, 1)))
    assert 'larger than the 10 samples' in str(warned.message)
    # seeded: the global batch of 2 x 16 is larger than the 20 samples; 'keep' cannot help
    _, [warned] = made(lambda: gluonbatch.DataLoader(
        data_of(20), batch_size=16, last_batch='discard', sampler=SplitSampler(20, 2, 1),
        seed=1))
    assert 'global batch of 32 (batch_size=16 x num_parts=2)' in str(warned.message)
    assert "use last_batch='pad', or a batch_size of at most 10" in str(warned.message)
    # and 16 per rank of 40 makes a batch each
    _, warned = made(lambda: gluonbatch.DataLoader(
        data_of(40), batch_size=16, last_batch='discard', sampler=SplitSampler(40, 2, 1)))
    assert warned == []


def test_a_loader_on_a_sampler_that_warned_does_not_warn_again():
    sampler, [warned] = made(lambda: SeededBatchSampler(5, 8, seed=2, last_batch='discard'))
    assert 'larger than the 5 samples' in str(warned.message)
    loader, again = made(lambda: gluonbatch.DataLoader(data_of(5), batch_sampler=sampler))
    assert again == [] and len(loader) == 0


def test_the_other_samplers_and_loaders_warn_too():
    _, [bucket] = made(lambda: SeededBucketSampler([1.0, 2.0, 3.0], 4, seed=1,
                                                   last_batch='discard'))
    assert 'batch_size=4 is larger than the 3 samples' in str(bucket.message)
    _, [transform] = made(lambda: RandomTransformDataLoader(
        [lambda x: x], data_of(3), batch_size=4, last_batch='discard'))
    assert 'batch_size=4 is larger than the 3 samples' in str(transform.message)
    _, none = made(lambda: SeededBucketSampler([1.0, 2.0, 3.0], 4, seed=1))  # 'pad'
    assert none == []


@pytest.mark.parametrize('last_batch', ['keep', 'pad'])
def test_keeping_or_padding_never_warns(last_batch):
    _, warned = made(lambda: SeededBatchSampler(3, 64, seed=1, last_batch=last_batch))
    assert warned == []


@pytest.mark.parametrize('last_batch, warns', [('discard', True), ('rollover', True),
                                               ('keep', False)])
def test_a_loader_on_a_batch_sampler_giving_no_batch_warns(last_batch, warns):
    sampler = mx.gluon.data.BatchSampler(mx.gluon.data.SequentialSampler(16), 64, last_batch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = gluonbatch.DataLoader(list(range(16)), batch_sampler=sampler)
    said = [str(w.message) for w in caught if 'gives no batch' in str(w.message)]
    assert len(said) == int(warns) and len(loader) == int(not warns)
    if warns:
        assert 'over the 16 samples' in said[0] and caught[0].filename == __file__
