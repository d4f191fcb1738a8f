"""ShardWindowSampler: an epoch order that reads a few shards at a time, dealt to the ranks
in equal parts, and the seeded loaders that follow it (resumable, elastic).

A test dataset's samples are numbered shard by shard, so a sample's shard is found from
the shard lengths alone; the order's locality is checked on the shards its samples come
from, in order.
"""
import json
import random
import re

import mxnet as mx
import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from gluonbatch import DataLoader
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.samplers import ShardWindowSampler, rank_positions
from helpers import ID, examples

SEED = 20240611
#: Shard lengths of the loaders' dataset: an empty shard among them; 19 samples, so two
#: ranks' parts of 10 end in a batch of 1.
LENGTHS = (3, 0, 4, 2, 5, 3, 2)
BATCH = 3
LAST_BATCHES = ['keep', 'discard', 'pad', 'rollover']

lengths_lists = st.lists(st.integers(0, 8), max_size=12)
seeds = st.integers(0, 2 ** 64 - 1)


class Shards(mx.gluon.data.SimpleDataset):
    """Samples ``0 .. sum(lengths) - 1``, shard by shard, with their ``shard_lengths``."""

    def __init__(self, lengths):
        super().__init__(list(range(sum(lengths))))
        self.shard_lengths = tuple(lengths)


def shards_of(indices, lengths):
    """The shard of every sample in ``indices``."""
    return np.searchsorted(np.cumsum(lengths), indices, side='right').tolist()


def fewest_runs(shards, window):
    """The fewest consecutive runs, of at most ``window`` distinct shards each, that the
    sequence ``shards`` splits into (taking each run as long as it goes is the fewest)."""
    runs, current = 0, set()
    for shard in shards:
        if shard in current:
            continue
        if not current or len(current) == window:
            runs, current = runs + 1, set()
        current.add(shard)
    return runs


def parts(lengths, window, seed, num_parts, last_part, epoch, shuffle=True):
    return [ShardWindowSampler(lengths, window, seed, num_parts, rank, last_part,
                               shuffle).indices(epoch) for rank in range(num_parts)]


def round_robin(shares):
    """The ranks' equally long shares taken a sample of each rank at a time."""
    return [index for step in zip(*shares) for index in step]


def dealt(order, num_parts, rank, block, last):
    """``order`` as the rule deals it to ``rank`` (the indices at its positions)."""
    positions = rank_positions(len(order), num_parts, rank, block, last)
    return np.asarray(order)[positions % max(len(order), 1)].tolist()


# --------------------------------------------------------------------------- the order

@settings(max_examples=examples(200), deadline=None)
@given(lengths=lengths_lists, window=st.integers(1, 14), seed=seeds,
       num_parts=st.integers(1, 5), epoch=st.integers(0, 5),
       last_part=st.sampled_from(['pad', 'drop']))
def test_every_sample_once_per_epoch_in_equal_parts_a_few_shards_at_a_time(
        lengths, window, seed, num_parts, epoch, last_part):
    given_lengths = list(lengths)
    length = sum(lengths)
    whole = ShardWindowSampler(lengths, window, seed).indices(epoch)
    assert whole.dtype == np.int64 and sorted(whole.tolist()) == list(range(length))
    # a few shards at a time: the windows' runs, one after the other
    assert fewest_runs(shards_of(whole, lengths), window) <= -(-len(lengths) // window)
    got = parts(lengths, window, seed, num_parts, last_part, epoch)
    assert got[0].dtype == np.int64
    assert [part.tolist() for part in got] == [
        part.tolist() for part in parts(lengths, window, seed, num_parts, last_part, epoch)]
    part = -(-length // num_parts) if last_part == 'pad' else length // num_parts
    assert [len(indices) for indices in got] == [part] * num_parts
    every = round_robin(got)
    if last_part == 'drop':  # one sample to every rank in turn, the order's last few left out
        assert every == whole[:part * num_parts].tolist()
        assert len(set(every)) == len(every)
    else:  # the last parts run on from the order's start
        assert every == np.resize(whole, part * num_parts).tolist()
        assert set(every) == set(range(length))
        if length >= num_parts:
            assert len(every) - len(set(every)) == (-length) % num_parts
    assert lengths == given_lengths


@settings(max_examples=examples(60), deadline=None)
@given(lengths=st.lists(st.integers(0, 8), min_size=4, max_size=12), window=st.integers(1, 14),
       seed=seeds, epoch=st.integers(0, 5))
def test_epochs_and_seeds_give_other_orders_the_same_arguments_the_same(lengths, window, seed,
                                                                        epoch):
    assume(sum(lengths) >= 20)  # every order then has over 10**9 equally likely others
    sampler = ShardWindowSampler(lengths, window, seed)
    sampler.set_epoch(epoch)
    first = list(sampler)
    assert sampler.epoch == epoch + 1
    assert first == ShardWindowSampler(lengths, window, seed).indices(epoch).tolist()
    assert first != sampler.indices(epoch + 1).tolist() == list(sampler)
    assert first != ShardWindowSampler(lengths, window, (seed + 1) % 2 ** 64).indices(
        epoch).tolist()
    assert sampler.epoch == epoch + 2  # indices() changed nothing


@settings(max_examples=examples(40), deadline=None)
@given(lengths=lengths_lists, window=st.integers(1, 14), seed=seeds,
       num_parts=st.integers(1, 5), last_part=st.sampled_from(['pad', 'drop']))
def test_without_shuffle_the_order_is_the_datasets(lengths, window, seed, num_parts,
                                                   last_part):
    length = sum(lengths)
    got = parts(lengths, window, seed, num_parts, last_part, 3, shuffle=False)
    part = len(got[0])
    if last_part == 'drop':
        expected = np.arange(part * num_parts)
    else:
        expected = np.resize(np.arange(length), part * num_parts)
    assert round_robin(got) == expected.tolist()


def test_one_shard_per_window_reads_each_shard_whole_and_a_wide_window_mixes_them_all():
    lengths, firsts = [8] * 8, set()
    for seed in range(5):
        one = shards_of(ShardWindowSampler(lengths, 1, seed).indices(0), lengths)
        wide = shards_of(ShardWindowSampler(lengths, 8, seed).indices(0), lengths)
        changes = [sum(a != b for a, b in zip(order, order[1:])) for order in (one, wide)]
        assert changes[0] == 7 and changes[1] > 30, changes
        firsts.add(tuple(sorted(set(one), key=one.index)))
        two = shards_of(ShardWindowSampler(lengths, 2, seed).indices(0), lengths)
        assert [len(set(two[start:start + 16])) for start in range(0, 64, 16)] == [2] * 4
        assert sorted(two[:16]) != two[:16]  # mixed within the window
    assert len(firsts) == 5  # the shards in another order for every seed


def test_empty_shards_and_datasets():
    assert ShardWindowSampler([0, 0]).indices(0).tolist() == []
    assert list(ShardWindowSampler([], num_parts=3, part_index=2)) == []
    sampler = ShardWindowSampler(np.array([0, 2, 0, 1]), window=1, seed=4, num_parts=2,
                                 part_index=1)
    assert len(sampler) == 2 and sampler.shard_lengths == (0, 2, 0, 1)
    assert sampler.length == 3


def test_properties_and_repr():
    sampler = ShardWindowSampler(Shards([2, 3]), window=3, seed=9, num_parts=2,
                                 part_index=1, last_part='drop', shuffle=False)
    assert (sampler.window, sampler.seed, sampler.num_parts, sampler.part_index,
            sampler.last_part, sampler.shuffle, sampler.shard_lengths, sampler.length,
            len(sampler)) == (3, 9, 2, 1, 'drop', False, (2, 3), 5, 2)
    assert repr(sampler) == ("ShardWindowSampler(<2 shards, 5 samples>, window=3, seed=9, "
                             "num_parts=2, part_index=1, last_part='drop', shuffle=False)")
    description = json.loads(json.dumps(sampler.description))
    assert description.pop('shard_lengths') == ShardWindowSampler(
        [2, 3], window=1).description['shard_lengths']
    # the order of all ranks: the same for any number of them
    assert description == {'sampler': 'ShardWindowSampler', 'shards': 2, 'window': 3}
    assert sampler.description == ShardWindowSampler([2, 3], window=3).description


def test_a_state_of_shards_of_other_lengths_is_refused():
    """The same number of shards and samples, split otherwise: another order, so a state
    of one does not resume the other."""
    saved = SeededBatchSampler(5, 2, seed=1, order=ShardWindowSampler([2, 3], seed=1))
    next(iter(saved))
    state = saved.state_after(1)
    other = SeededBatchSampler(5, 2, seed=1, order=ShardWindowSampler([3, 2], seed=1))
    with pytest.raises(ValueError, match="state\\['order'\\] is"):
        other.load_state_dict(state)
    SeededBatchSampler(5, 2, seed=1, order=ShardWindowSampler([2, 3], seed=1)).load_state_dict(
        state)


# --------------------------------------------------------------------------- bad arguments

BAD = [
    (dict(window=0), ValueError, 'window must be an integer >= 1, got 0'),
    (dict(window=2.0), TypeError, 'window must be an integer, got 2.0 (float)'),
    (dict(window=None), TypeError, 'window must be an integer, got None'),
    (dict(seed=-1), ValueError, 'seed must be an integer in [0, 2**64), got -1'),
    (dict(seed=2 ** 64), ValueError,
     'seed must be an integer in [0, 2**64), got %d' % 2 ** 64),
    (dict(seed='1'), TypeError, "seed must be an integer, got '1' (str)"),
    (dict(num_parts=0), ValueError, 'num_parts must be an integer >= 1, got 0'),
    (dict(num_parts=2, part_index=2), ValueError,
     'part_index must be in [0, num_parts); got part_index 2 with num_parts 2'),
    (dict(part_index=-1), ValueError, 'part_index must be an integer >= 0, got -1'),
    (dict(last_part='keep'), ValueError, "last_part must be one of pad, drop, got 'keep'"),
    (dict(last_part=1), TypeError, 'last_part must be one of pad, drop, got 1 (int)'),
    (dict(dataset=[3, -1]), ValueError,
     'shard_lengths[1] must be an integer >= 0 (the samples of shard 1), got -1'),
    (dict(dataset=[3, 1.5]), TypeError,
     'shard_lengths[1] must be an integer (the samples of shard 1), got 1.5 (float)'),
    (dict(dataset=[3, True]), TypeError, 'shard_lengths[1] must be an integer'),
    (dict(dataset='33'), TypeError, 'dataset must have shard_lengths or be a sequence of '
                                    'shard lengths (ints >= 0, one per shard), got a str'),
    (dict(dataset=np.ones((2, 2), int)), TypeError, 'got a numpy.ndarray of shape (2, 2)'),
    (dict(dataset=mx.gluon.data.SimpleDataset([1, 2])), TypeError,
     'dataset must have shard_lengths or be a sequence of shard lengths (ints >= 0, one per '
     'shard), got a mxnet.SimpleDataset'),
]


@pytest.mark.parametrize('kwargs, error, message', BAD,
                         ids=[str(i) for i in range(len(BAD))])
def test_bad_arguments_raise_naming_what_was_seen(kwargs, error, message):
    kwargs = dict({'dataset': [2, 3]}, **kwargs)
    with pytest.raises(error, match=re.escape(message)):
        ShardWindowSampler(**kwargs)


def test_a_dataset_whose_shards_do_not_add_up_and_bad_epochs():
    class Wrong(mx.gluon.data.SimpleDataset):
        shard_lengths = (3, 1)

    with pytest.raises(ValueError, match=re.escape(
            'Wrong has 5 samples, but its shard_lengths add up to 4')):
        ShardWindowSampler(Wrong(list(range(5))))
    Wrong.shard_lengths = (1, -1)
    with pytest.raises(ValueError, match=re.escape(
            'Wrong.shard_lengths[1] must be an integer >= 0 (the samples of shard 1), '
            'got -1')):
        ShardWindowSampler(Wrong([0]))
    Wrong.shard_lengths = 3
    with pytest.raises(TypeError, match=re.escape(
            'got a test_samplers_shard_window.Wrong whose shard_lengths is an int')):
        ShardWindowSampler(Wrong([0]))
    sampler = ShardWindowSampler([2, 3])
    with pytest.raises(ValueError, match=re.escape('epoch must be an integer >= 0, got -1')):
        sampler.set_epoch(-1)
    with pytest.raises(TypeError, match=re.escape('epoch must be an integer, got 1.0')):
        sampler.indices(1.0)
    assert sampler.epoch == 0


# --------------------------------------------------------------------------- loaders

@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_mxnets_dataloader_loads_the_window_order_with_any_number_of_workers(num_workers):
    data = Shards(LENGTHS)
    sampler = ShardWindowSampler(data, window=2, seed=SEED, num_parts=2, part_index=1)
    loader = mx.gluon.data.DataLoader(data, batch_size=BATCH, sampler=sampler,
                                      num_workers=num_workers)
    passes = [[batch.asnumpy().astype(int).tolist() for batch in loader] for _ in range(2)]
    for epoch, batches in enumerate(passes):
        order = sampler.indices(epoch).tolist()
        assert batches == [order[start:start + BATCH]
                           for start in range(0, len(order), BATCH)]
    assert passes[0] != passes[1]


def test_an_image_text_dataset_has_the_lengths_of_its_shards(data):
    path, _ = data  # shards of 3, 2 and 4 records
    whole = ImageTextPairDataset.from_webdataset(path, ID)
    assert whole.shard_lengths == (3, 2, 4)
    ranks = [ShardWindowSampler(whole, window=1, seed=1, num_parts=2, part_index=rank)
             for rank in (0, 1)]
    order = ranks[0].order(0).tolist()
    assert sorted(order) == list(range(len(whole))) == list(range(9))
    assert fewest_runs(shards_of(order, whole.shard_lengths), 1) == 3
    shares = [rank.indices(0).tolist() for rank in ranks]  # 5 each, the last one again
    assert round_robin(shares) == order + order[:1]
    assert all(isinstance(whole[i][1], str) for i in shares[1][:2])


# --------------------------------------------------------------------------- seeded loaders

def noisy(index):
    """The sample and a draw from Python's generator, seeded per sample by the loader."""
    return index, random.random()


def window_loader(last_batch, num_workers, part_index=0, num_parts=2, window=2, seed=SEED,
                  batch_size=BATCH):
    data = Shards(LENGTHS)
    sampler = ShardWindowSampler(data, window=window, seed=seed, num_parts=num_parts,
                                 part_index=part_index)
    return sampler, DataLoader(data.transform(noisy), batch_size=batch_size, sampler=sampler,
                                 seed=seed, last_batch=last_batch, batchify_fn=list,
                                 num_workers=num_workers)


@pytest.mark.parametrize('last_batch, workers', zip(LAST_BATCHES, [(0, 2), (2, 1), (1, 0),
                                                                  (0, 2)]))
def test_a_seeded_loader_follows_the_window_order_and_resumes_at_any_batch(last_batch,
                                                                          workers):
    num_parts = 1 if last_batch == 'keep' else 2  # 'keep' on two ranks: whole global batches
    rank = num_parts - 1
    sampler, loader = window_loader(last_batch, workers[0], rank, num_parts)
    start = loader.state_dict()
    reference = [(batch, loader.state_dict()) for _ in range(3) for batch in loader]
    loader.close()
    # the batches are the rank's part of the window order, dealt a batch at a time
    stream = [index for batch, _ in reference for index, _ in batch]
    orders = [sampler.order(epoch).tolist() for epoch in range(4)]
    length, size = len(orders[0]), BATCH * num_parts
    assert length % size  # an epoch ends in a short global batch
    if last_batch == 'rollover':  # the epochs' orders one after the other
        rounds = 3 * length // size
        assert stream == dealt(sum(orders, []), num_parts, rank, BATCH, 'drop')[
            :rounds * BATCH]
    else:
        last = 'drop' if last_batch == 'discard' else 'pad'
        kept = {'keep': length}.get(last_batch)  # one rank: the last batch short
        assert stream == sum((dealt(order, num_parts, rank, BATCH, last)[:kept]
                              for order in orders[:3]), [])
    draws = [draw for batch, _ in reference for _, draw in batch]
    assert len(set(draws)) == len(draws)  # every sample its own draws, repeats too
    resuming = window_loader(last_batch, workers[1], rank, num_parts)[1]
    states = [start] + [state for _, state in reference]
    for delivered, state in enumerate(states):
        assert state['order'] == sampler.description
        resuming.load_state_dict(json.loads(json.dumps(state)))
        rest = [batch for _ in range(3 - state['epoch']) for batch in resuming]
        assert rest == [batch for batch, _ in reference[delivered:]], delivered
    resuming.close()


@settings(max_examples=examples(60), deadline=None)
@given(lengths=lengths_lists, window=st.integers(1, 6), seed=seeds,
       num_parts=st.integers(1, 4), batch_size=st.integers(1, 4),
       last_batch=st.sampled_from(LAST_BATCHES), epoch=st.integers(0, 3))
def test_the_ranks_keys_follow_the_dealt_order_and_never_share_a_position(
        lengths, window, seed, num_parts, batch_size, last_batch, epoch):
    length, positions = sum(lengths), []
    if last_batch == 'keep' and num_parts > 1 and length % (batch_size * num_parts):
        with pytest.raises(ValueError, match="last_batch='keep' with num_parts=%d" % num_parts):
            SeededBatchSampler(length, batch_size, seed, last_batch=last_batch,
                               order=ShardWindowSampler(lengths, window, seed, num_parts))
        return
    for rank in range(num_parts):
        order = ShardWindowSampler(lengths, window, seed, num_parts, rank)
        sampler = SeededBatchSampler(length, batch_size, seed, last_batch=last_batch,
                                     order=order)
        assert (sampler.num_parts, sampler.part_index) == (num_parts, rank)
        keys = [key for batch in sampler.batches(epoch) for key in batch]
        if last_batch != 'rollover':
            indices = dealt(order.order(epoch), num_parts, rank, batch_size,
                            'drop' if last_batch == 'discard' else 'pad')
            if last_batch == 'keep':  # one rank, or whole global batches: no padding
                indices = indices[:length]
            assert [key.index for key in keys] == indices
            assert all(key.epoch == epoch for key in keys)
        positions += [(key.epoch, key.position) for key in keys]
    assert len(set(positions)) == len(positions)


def test_the_loader_checks_the_window_sampler_it_is_given():
    data = Shards(LENGTHS)
    with pytest.raises(ValueError, match=re.escape(
            'seed=%d but the ShardWindowSampler has seed=3: give both the same seed' % SEED)):
        DataLoader(data, batch_size=2, sampler=ShardWindowSampler(data, seed=3), seed=SEED)
    with pytest.raises(ValueError, match=re.escape(
            'the ShardWindowSampler is for 5 samples, but length is 19')):
        DataLoader(data, batch_size=2, sampler=ShardWindowSampler([2, 3], seed=SEED),
                     seed=SEED)
    with pytest.raises(ValueError, match=re.escape(
            'shuffle=True with a sampler: the ShardWindowSampler says whether to shuffle')):
        DataLoader(data, batch_size=2, shuffle=True, seed=SEED,
                     sampler=ShardWindowSampler(data, seed=SEED))
    with pytest.raises(ValueError, match='takes a SplitSampler .* or another RankSampler, '
                       'such as a ShardWindowSampler .*, not SequentialSampler'):
        DataLoader(data, batch_size=2, seed=SEED,
                     sampler=mx.gluon.data.SequentialSampler(len(data)))
    third = ShardWindowSampler(data, seed=SEED, shuffle=False, num_parts=3, part_index=2)
    with pytest.raises(ValueError, match=re.escape(
            "last_batch='keep' with num_parts=3 needs length to be a multiple of the global "
            'batch (12 = batch_size 4 x num_parts 3), got length 19')):
        DataLoader(data, batch_size=4, seed=SEED, sampler=third)
    unshuffled = DataLoader(data, batch_size=4, seed=SEED, sampler=third, last_batch='pad',
                            batchify_fn=list)
    # the third batch of each global batch of 12, the last one run on from the start
    assert [list(batch) for batch in unshuffled] == [[8, 9, 10, 11], [1, 2, 3, 4]]
    assert unshuffled.state_dict()['shuffle'] is False


def test_a_state_resumes_only_with_the_order_it_was_saved_with():
    _, loader = window_loader('discard', 0)
    batches = iter(loader)
    next(batches)
    state = loader.state_dict()
    assert (state['epoch'], state['batch']) == (0, 1)
    resuming = window_loader('discard', 0, window=3)[1]
    with pytest.raises(ValueError, match=r"state\['order'\] is \{'sampler': "
                       r"'ShardWindowSampler', 'shards': 7, 'shard_lengths': '\w+', 'window': "
                       r"2\}, but this sampler's order is \{.*'window': 3"):
        resuming.load_state_dict(state)
    assert resuming.state_dict()['batch'] == 0
    # one rank with the same global batch resumes it: the order is of all ranks
    whole = window_loader('discard', 0, num_parts=1, batch_size=2 * BATCH)[1]
    whole.load_state_dict(state)
    ranks = [window_loader('discard', 0, rank)[1] for rank in (0, 1)]
    for rank in ranks:
        rank.load_state_dict(state)
    assert [list(batch) for batch in whole] == [
        list(first) + list(second) for first, second in zip(*ranks)]
    plain = DataLoader(Shards(LENGTHS), batch_size=2 * BATCH, shuffle=True, seed=SEED,
                         last_batch='discard')
    with pytest.raises(ValueError, match=re.escape("but this sampler has no order")):
        plain.load_state_dict(state)
    plain_state = plain.state_dict()
    with pytest.raises(ValueError, match=re.escape("the state has no 'order', but this "
                                                   "sampler's order is")):
        window_loader('discard', 0)[1].load_state_dict(plain_state)
    order = ShardWindowSampler(LENGTHS, window=2, seed=SEED, num_parts=2)
    sampler = SeededBatchSampler(sum(LENGTHS), BATCH, SEED, last_batch='discard', order=order)
    sampler.load_state_dict({'epoch': 0, 'batch': 1})  # a state of epoch and batch alone
    assert dict(sampler.state_dict(), format=state['format']) == state


def test_the_batch_sampler_checks_its_order():
    order = ShardWindowSampler(LENGTHS, seed=SEED, num_parts=2, part_index=1)
    length = sum(LENGTHS)
    sampler = SeededBatchSampler(length, 2, SEED, last_batch='pad', order=order, num_parts=2,
                                 part_index=1)
    assert repr(sampler).endswith('num_parts=2, part_index=1, order=%r)' % order)
    assert sampler.state_dict()['global_batch_size'] == 4
    for kwargs, error, message in [
            (dict(order=[1, 2]), TypeError,
             'order must be a RankSampler (an epoch order of all ranks, such as a '
             'ShardWindowSampler), got a list'),
            (dict(seed=1), ValueError, 'seed=1 but the ShardWindowSampler has seed=%d' % SEED),
            (dict(length=length + 1), ValueError,
             'the ShardWindowSampler is for 19 samples, but length is 20'),
            (dict(num_parts=3, part_index=1), ValueError,
             'num_parts=3, part_index=1, but the order is part 1 of 2'),
            (dict(shuffle=False), ValueError, 'shuffle=False, but the order shuffles')]:
        arguments = dict(dict(length=length, batch_size=2, seed=SEED, last_batch='pad',
                              order=order), **kwargs)
        with pytest.raises(error, match=re.escape(message)):
            SeededBatchSampler(**arguments)
