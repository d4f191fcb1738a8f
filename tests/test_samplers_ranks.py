"""The one rule of which rank gets which samples (gluonbatch.samplers.ranks), and every
sampler that splits an epoch across ranks following it.

The rule deals an epoch's order round-robin in blocks: every rank as many positions, none
twice, the ranks' step ``k`` together a contiguous run of the order. The samplers are
checked against the function itself: SplitSampler and ShardWindowSampler deal their order
one sample at a time, the seeded samplers a batch at a time, with or without an order.
"""
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch.samplers import (RankSampler, SeededBatchSampler, SeededBucketSampler,
                                 ShardWindowSampler, SplitSampler, rank_positions)
from gluonbatch.samplers.ranks import rank_length
from helpers import examples

LASTS = st.sampled_from(['pad', 'drop'])


# --------------------------------------------------------------------------- the rule

@settings(max_examples=examples(300), deadline=None)
@given(count=st.integers(0, 120), num_parts=st.integers(1, 6), block=st.integers(1, 6),
       last=LASTS, data=st.data())
def test_every_rank_as_many_positions_none_twice_each_step_a_run_of_the_order(
        count, num_parts, block, last, data):
    shares = [rank_positions(count, num_parts, rank, block, last)
              for rank in range(num_parts)]
    length = rank_length(count, num_parts, block, last)
    assert all(share.dtype == np.int64 for share in shares)
    assert [len(share) for share in shares] == [length] * num_parts  # equally many
    assert length % block == 0
    every = np.concatenate(shares).tolist()
    assert len(set(every)) == len(every)  # no position taken twice
    size = block * num_parts
    if last == 'pad':  # every position of the order, and past its end less than a round
        assert set(range(count)) <= set(every)
        assert all(0 <= p < count + size for p in every) and len(every) - count < size
    else:  # whole rounds of the order: its last, incomplete round left out
        assert all(0 <= p < count for p in every) and count - len(every) < size
    for step in range(length // block):  # step k of all ranks: a contiguous run
        run = [p for share in shares for p in share[step * block:(step + 1) * block]]
        assert run == list(range(step * size, (step + 1) * size))
    rank = data.draw(st.integers(0, num_parts - 1), label='rank')
    start = data.draw(st.integers(0, length), label='start')
    stop = data.draw(st.integers(start, length), label='stop')
    assert rank_positions(count, num_parts, rank, block, last, start=start,
                          stop=stop).tolist() == shares[rank][start:stop].tolist()


def test_one_position_at_a_time_is_pytorchs_deal_and_one_rank_takes_the_order():
    assert [rank_positions(5, 2, rank).tolist() for rank in (0, 1)] == [[0, 2, 4], [1, 3, 5]]
    assert [rank_positions(5, 2, rank, last='drop').tolist() for rank in (0, 1)] == [
        [0, 2], [1, 3]]
    assert rank_positions(7, block=3).tolist() == list(range(9))
    assert rank_positions(7, block=3, last='drop').tolist() == list(range(6))
    assert rank_positions(0, 3, 2, block=4).tolist() == []


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(count=-1), ValueError, 'count must be an integer >= 0, got -1'),
    (dict(count=2.0), TypeError, 'count must be an integer, got 2.0 (float)'),
    (dict(num_parts=0), ValueError, 'num_parts must be an integer >= 1, got 0'),
    (dict(part_index=2), ValueError,
     'part_index must be in [0, num_parts); got part_index 2 with num_parts 2'),
    (dict(block=0), ValueError, 'block must be an integer >= 1, got 0'),
    (dict(block=True), TypeError, 'block must be an integer, got True (bool)'),
    (dict(last='keep'), ValueError, "last must be one of pad, drop, got 'keep'"),
    (dict(last=None), TypeError, 'last must be one of pad, drop, got None'),
    (dict(start=-1), ValueError, 'start must be an integer >= 0, got -1'),
    (dict(start=3, stop=2), ValueError,
     'start and stop must be in [0, 6] (the positions of each rank), start <= stop; got '
     'start 3 and stop 2'),
    (dict(stop=7), ValueError, 'got start 0 and stop 7'),
])
def test_bad_arguments_name_what_was_seen(kwargs, error, message):
    arguments = dict(dict(count=10, num_parts=2, part_index=1, block=3), **kwargs)
    with pytest.raises(error, match=re.escape(message)):
        rank_positions(**arguments)


# --------------------------------------------------------------------------- the samplers

def dealt(order, count, num_parts, rank, block, last):
    """``order`` as the rule deals it to ``rank``: the indices at its positions."""
    positions = rank_positions(count, num_parts, rank, block, last)
    return order[positions % count].tolist() if count else []


@settings(max_examples=examples(100), deadline=None)
@given(lengths=st.lists(st.integers(0, 6), max_size=8), num_parts=st.integers(1, 5),
       shuffle=st.booleans(), last=LASTS, seed=st.integers(0, 2 ** 32), epoch=st.integers(0, 4),
       window=st.integers(1, 4))
def test_split_and_window_samplers_deal_their_order_one_sample_at_a_time(
        lengths, num_parts, shuffle, last, seed, epoch, window):
    count = sum(lengths)
    for kind in (SplitSampler, ShardWindowSampler):
        ranks = [SplitSampler(count, num_parts, rank, shuffle, seed, last)
                 if kind is SplitSampler else
                 ShardWindowSampler(lengths, window, seed, num_parts, rank, last, shuffle)
                 for rank in range(num_parts)]
        order = ranks[0].order(epoch)
        assert all(rank.order(epoch).tolist() == order.tolist() for rank in ranks)
        for rank, sampler in enumerate(ranks):
            assert isinstance(sampler, RankSampler) and len(sampler) == rank_length(
                count, num_parts, last=last)
            sampler.set_epoch(epoch)
            assert list(sampler) == dealt(order, count, num_parts, rank, 1, last)


@settings(max_examples=examples(100), deadline=None)
@given(lengths=st.lists(st.integers(0, 6), max_size=8), num_parts=st.integers(1, 4),
       batch_size=st.integers(1, 4), last_batch=st.sampled_from(['keep', 'discard', 'pad']),
       order_kind=st.sampled_from([None, SplitSampler, ShardWindowSampler]),
       seed=st.integers(0, 2 ** 32), epoch=st.integers(0, 3))
def test_seeded_samplers_deal_their_order_a_batch_at_a_time(
        lengths, num_parts, batch_size, last_batch, order_kind, seed, epoch):
    count = sum(lengths)
    if last_batch == 'keep' and count % (batch_size * num_parts):
        last_batch = 'pad'  # 'keep' is for whole global batches on several ranks
    last = 'drop' if last_batch == 'discard' else 'pad'
    # the seed's permutation: the order of a sampler without one, or given a SplitSampler
    # (which gives only the rank)
    permutation = SeededBatchSampler(count, 1, seed).batches(epoch)
    permutation = np.array([key.index for batch in permutation for key in batch], np.int64)
    for rank in range(num_parts):
        if order_kind is None:
            sampler = SeededBatchSampler(count, batch_size, seed, last_batch=last_batch,
                                         num_parts=num_parts, part_index=rank)
            order = permutation
        else:
            source = (SplitSampler(count, num_parts, rank, shuffle=True, seed=seed + 1)
                      if order_kind is SplitSampler else
                      ShardWindowSampler(lengths, 2, seed, num_parts, rank))
            sampler = SeededBatchSampler(count, batch_size, seed, last_batch=last_batch,
                                         order=source)
            order = permutation if order_kind is SplitSampler else source.order(epoch)
        keys = [key for batch in sampler.batches(epoch) for key in batch]
        positions = rank_positions(count, num_parts, rank, batch_size, last).tolist()
        if last_batch == 'keep':
            positions = [p for p in positions if p < count]
        assert [key.position for key in keys] == positions  # its own position: its draws
        assert [key.index for key in keys] == dealt(order, count, num_parts, rank,
                                                    batch_size, last)[:len(positions)]


@settings(max_examples=examples(60), deadline=None)
@given(count=st.integers(0, 40), num_parts=st.integers(1, 4), batch_size=st.integers(1, 4),
       seed=st.integers(0, 2 ** 32), epoch=st.integers(0, 5), with_order=st.booleans())
def test_rollover_deals_the_passs_run_of_the_epochs_orders(count, num_parts, batch_size,
                                                          seed, epoch, with_order):
    size = batch_size * num_parts
    first, stop = epoch * count // size, (epoch + 1) * count // size
    orders = {}
    for rank in range(num_parts):
        source = ShardWindowSampler([count], 1, seed, num_parts, rank) if with_order else None
        sampler = SeededBatchSampler(count, batch_size, seed, last_batch='rollover',
                                     num_parts=1 if with_order else num_parts,
                                     part_index=0 if with_order else rank, order=source)
        keys = [key for batch in sampler.batches(epoch) for key in batch]
        run = rank_positions((stop - first) * size, num_parts, rank, batch_size)
        assert [(key.epoch, key.position) for key in keys] == [
            divmod(first * size + p, count) for p in run.tolist()]
        for key in keys:
            if key.epoch not in orders:
                orders[key.epoch] = (source.order(key.epoch) if with_order else np.array(
                    [k.index for b in SeededBatchSampler(count, 1, seed).batches(key.epoch)
                     for k in b]))
            assert key.index == orders[key.epoch][key.position]


@settings(max_examples=examples(60), deadline=None)
@given(count=st.integers(0, 40), num_parts=st.integers(2, 4), batch_size=st.integers(1, 3),
       mult=st.integers(1, 3), seed=st.integers(0, 2 ** 32),
       last_batch=st.sampled_from(['discard', 'pad']))
def test_the_bucket_sampler_deals_each_global_batch_a_batch_at_a_time(
        count, num_parts, batch_size, mult, seed, last_batch):
    keys = np.random.RandomState(seed % 2 ** 32).uniform(0.5, 2, count)
    whole = SeededBucketSampler(keys, batch_size * num_parts, seed, mult=mult,
                                last_batch=last_batch)
    ranks = [SeededBucketSampler(keys, batch_size, seed, mult=mult, last_batch=last_batch,
                                 num_parts=num_parts, part_index=rank)
             for rank in range(num_parts)]
    for number, global_batch in enumerate(whole.batches(0)):
        for rank, sampler in enumerate(ranks):
            taken = rank_positions(len(global_batch), num_parts, rank, batch_size)
            assert list(sampler.batch(0, number)) == [global_batch[p] for p in taken]


# --------------------------------------------------------------------------- the base class

class Reversed(RankSampler):
    """The smallest order: ``range(length)`` backwards, every epoch."""

    def __init__(self, length, num_parts=1, part_index=0):
        super().__init__(num_parts, part_index, 'pad', shuffle=False)
        self._size = length

    length = property(lambda self: self._size)
    seed = property(lambda self: 0)
    description = property(lambda self: {'sampler': 'Reversed'})

    def order(self, epoch):
        return np.arange(self._size)[::-1]


def test_a_rank_sampler_says_what_a_subclass_gives():
    class Lacking(RankSampler):
        def order(self, epoch):
            return np.arange(3)

    with pytest.raises(TypeError, match='abstract'):
        Lacking(1, 0, 'pad', False)
    assert [list(Reversed(5, 2, rank)) for rank in (0, 1)] == [[4, 2, 0], [3, 1, 4]]
    batches = SeededBatchSampler(5, 1, seed=0, shuffle=False, last_batch='pad',
                                 order=Reversed(5, 2, 1))
    assert [[key.index for key in batch] for batch in batches] == [[3], [1], [4]]


def test_an_order_that_is_no_rank_sampler_is_a_type_error():
    class LooksLikeOne:  # every attribute an order had, but not the type
        seed, length, shuffle, num_parts, part_index, description = 0, 4, True, 1, 0, {}

        def order(self, epoch):
            return np.arange(4)

    for order in (LooksLikeOne(), [1, 2]):
        with pytest.raises(TypeError, match=re.escape(
                'order must be a RankSampler (an epoch order of all ranks, such as a '
                'ShardWindowSampler), got a')):
            SeededBatchSampler(4, 2, 0, order=order)


def test_the_old_rules_are_gone_without_aliases():
    import gluonbatch.samplers as samplers
    import gluonbatch.samplers.seeded as seeded
    import gluonbatch.samplers.split as split

    old = ['PartSampler', 'part_of', 'part_length', 'LAST_PARTS']
    assert [name for name in old if hasattr(split, name) or hasattr(samplers, name)] == []
    assert not hasattr(seeded, 'ORDER_ATTRIBUTES')


def test_an_order_of_the_wrong_length_is_refused_wherever_it_is_dealt():
    class Short(SplitSampler):  # an order one index short of its length
        def order(self, epoch):
            return super().order(epoch)[:-1]

    message = re.escape('Short.order(0) gave 5 indices, but its length is 6')
    with pytest.raises(ValueError, match=message):
        list(Short(6, 2, 0))
    seeded = SeededBatchSampler(6, 2, seed=0, order=ShardWindowSampler([3, 3], seed=0))
    assert len(list(seeded)) == 3   # a good order deals

    class ShortWindows(ShardWindowSampler):
        def order(self, epoch):
            return super().order(epoch)[:-1]

    seeded = SeededBatchSampler(6, 2, seed=0, order=ShortWindows([3, 3], seed=0))
    with pytest.raises(ValueError, match=re.escape(
            'ShortWindows.order(0) gave 5 indices, but its length is 6')):
        list(seeded)
