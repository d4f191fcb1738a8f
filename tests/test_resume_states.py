"""A SeededBatchSampler's state cannot be taken or loaded wrong.

``state_dict()`` while a pass is under way raises (MXNet's DataLoader reads the sampler
ahead of what it delivers, so the sampler cannot know the next batch) and points to
``state_after(i + 1)``, which resumes a DataLoader's pass with exactly the batches left.
A pass is under way from ``iter()`` until the next ``load_state_dict()`` or
``set_epoch()``, even once its iterator is exhausted: one with workers reads the pass's
end a few batches before it delivers them. Before any pass, and after those two,
``state_dict()`` names the next pass's start. ``load_state_dict`` refuses absurd states --
negative, beyond 2**63, booleans, another order -- naming the field, and a sampler's state
and a loader's load into each other.
"""
import gc
import json
import re

import mxnet as mx
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch import DataLoader
from gluonbatch.dataloader.resume import FORMAT, KEYS, checked_state
from gluonbatch.samplers import SeededBatchSampler, SeededBucketSampler
from gluonbatch.seeded import SeededDataset
from gluonbatch.samplers import ShardWindowSampler
from helpers import examples

SEED = 20240611
LENGTH, BATCH = 11, 3
LAST_BATCHES = ['keep', 'discard', 'pad', 'rollover']
#: The keys of a sampler's state without an order (a loader's adds ``format``).
SAMPLER_KEYS = {'seed', 'epoch', 'batch', 'global_batch_size', 'length', 'shuffle',
                'last_batch'}
UNDER_WAY = "the pass of epoch %d is under way"


def sampler(last_batch='rollover', **kwargs):
    return SeededBatchSampler(LENGTH, BATCH, SEED, last_batch=last_batch, **kwargs)


def where(state):
    return state['epoch'], state['batch']


def keys(batches):
    """Each batch's epoch, number and keys: what tells two batches apart."""
    return [(batch.epoch, batch.number, list(batch)) for batch in batches]


def raises_under_way(sampler_, epoch):
    with pytest.raises(ValueError, match=re.escape(UNDER_WAY % epoch)) as raised:
        sampler_.state_dict()
    return str(raised.value)


# --------------------------------------------------------------------------- during a pass

def test_state_dict_during_a_pass_raises_and_names_state_after():
    one = sampler()
    one.load_state_dict({'epoch': 3, 'batch': 1})
    batches = iter(one)
    next(batches)
    message = raises_under_way(one, 3)
    assert 'state_after(i + 1)' in message and 'after batch i of the pass' in message
    assert 'until load_state_dict() or set_epoch()' in message
    assert 'between passes' not in message  # no such time: an exhausted pass goes on
    assert where(one.state_after(1)) == (3, 2)  # state_after says, during the pass


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_an_exhausted_pass_stays_under_way_and_state_after_names_the_next_epoch(last_batch):
    one = sampler(last_batch)
    assert where(one.state_dict()) == (0, 0)
    for epoch in range(4):
        batches = iter(one)
        raises_under_way(one, epoch)  # begun, not a batch taken yet
        count = len(list(batches))
        assert count == one.batches_in(epoch)
        raises_under_way(one, epoch)  # exhausted, and still under way
        # state_after names positions in the pass, its end the next epoch's first batch
        assert where(one.state_after(count)) == (epoch + 1, 0)
        assert where(one.state_after(count - 1)) == (epoch, count - 1)
        raises_under_way(one, epoch)  # state_after ends nothing
        if epoch % 2:
            one.set_epoch(epoch + 1)
        else:
            one.load_state_dict(one.state_after(count))
        assert where(one.state_dict()) == (epoch + 1, 0)  # either ends the pass


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_a_new_iter_starts_the_next_epoch_by_itself_over_an_exhausted_pass(last_batch):
    one = sampler(last_batch)
    first, second = list(one), list(one)  # never ended: each iter() a new pass
    assert [batch.epoch for batch in first + second] == [0] * len(first) + [1] * len(second)
    raises_under_way(one, 1)
    assert where(one.state_after(len(second))) == (2, 0)
    assert where(one.state_after(0)) == (1, 0)  # the last pass begun's
    with pytest.raises(ValueError, match=re.escape(
            'delivered is %d, but the pass of epoch 1' % (len(second) + 1))):
        one.state_after(len(second) + 1)


def test_a_pass_of_no_batches_stays_under_way_and_state_after_names_the_next_epoch():
    empty = SeededBatchSampler(2, 5, SEED, last_batch='rollover')  # epoch 0 has no batch
    assert empty.batches_in(0) == 0 and empty.batches_in(2) == 1
    batches = iter(empty)
    raises_under_way(empty, 0)
    assert list(batches) == []
    raises_under_way(empty, 0)
    state = empty.state_after(0)  # all the pass has: the next epoch's first batch
    assert where(state) == (1, 0)
    empty.load_state_dict(state)
    assert where(empty.state_dict()) == (1, 0)
    assert list(empty) == []  # epoch 1, no batch either
    empty.set_epoch(2)
    assert where(empty.state_dict()) == (2, 0)
    assert [batch.epoch for batch in empty] == [2]


def test_a_pass_left_early_stays_under_way_even_once_collected():
    one = sampler()
    batches = iter(one)
    next(batches)
    del batches
    gc.collect()
    raises_under_way(one, 0)
    assert where(one.state_after(1)) == (0, 1)


@pytest.mark.parametrize('end, expected', [
    (lambda one: one.set_epoch(5), (5, 0)),
    (lambda one: one.load_state_dict({'epoch': 2, 'batch': 1}), (2, 1)),
], ids=['set_epoch', 'load_state_dict'])
def test_set_epoch_and_load_state_dict_end_a_pass_left_early(end, expected):
    one = sampler()
    batches = iter(one)
    next(batches)
    end(one)
    assert where(one.state_dict()) == expected


def test_a_new_pass_is_under_way_until_load_state_dict_or_set_epoch():
    one = sampler()
    first = iter(one)
    next(first)
    second = iter(one)  # the first is left early: the second is the pass under way
    raises_under_way(one, 1)
    list(first)  # the older pass's end does not end the newer one
    raises_under_way(one, 1)
    count = len(list(second))
    raises_under_way(one, 1)  # nor does its own end
    assert where(one.state_after(count)) == (2, 0)  # state_after counts in the newer one
    one.load_state_dict(one.state_after(count))
    assert where(one.state_dict()) == (2, 0)


def test_a_failed_load_leaves_the_pass_under_way():
    one = sampler()
    batches = iter(one)
    next(batches)
    with pytest.raises(ValueError):
        one.load_state_dict({'epoch': -1, 'batch': 0})
    raises_under_way(one, 0)
    assert one.epoch == 1


def test_a_bucket_sampler_raises_during_a_pass_too():
    buckets = SeededBucketSampler([0.5, 2.0] * 6, 2, SEED, mult=2)
    batches = iter(buckets)
    next(batches)
    raises_under_way(buckets, 0)
    count = 1 + len(list(batches))
    assert count == buckets.batches_in(0)
    raises_under_way(buckets, 0)  # exhausted, still under way, as a SeededBatchSampler's
    assert where(buckets.state_after(count)) == (1, 0)
    buckets.load_state_dict(buckets.state_after(count))
    assert where(buckets.state_dict()) == (1, 0)
    list(buckets)
    raises_under_way(buckets, 1)
    buckets.set_epoch(4)
    assert where(buckets.state_dict()) == (4, 0)


# --------------------------------------------------------------------------- MXNet's DataLoader

def mxnet_loader(last_batch):
    data = mx.gluon.data.SimpleDataset(list(range(LENGTH)))
    one = sampler(last_batch)
    return one, mx.gluon.data.DataLoader(SeededDataset(data), batch_sampler=one,
                                         batchify_fn=list, num_workers=0)


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_a_dataloaders_pass_resumes_from_state_after_with_exactly_the_batches_left(last_batch):
    one, loader = mxnet_loader(last_batch)
    reference = [list(loader) for _ in range(2)]  # epochs 0 and 1, uninterrupted
    count = len(reference[0])
    assert count >= 3
    for i in range(count):
        one, loader = mxnet_loader(last_batch)
        for number, batch in enumerate(loader):
            if number == i:
                raises_under_way(one, 0)
                state = json.loads(json.dumps(one.state_after(i + 1)))
        assert where(state) == ((0, i + 1) if i + 1 < count else (1, 0))
        resumed, loader = mxnet_loader(last_batch)
        resumed.load_state_dict(state)
        rest = list(loader)
        assert rest == (reference[0][i + 1:] if i + 1 < count else reference[1]), i


MX_BATCHES = 10  # batches of an epoch of the loader with workers


class ReadCounting(SeededBatchSampler):
    """A SeededBatchSampler that records how far its passes were read (``read``: the
    highest batch number made, plus one), to show the loader reading ahead."""

    read = 0

    def batch(self, epoch, number):
        self.read = max(self.read, number + 1)
        return super().batch(epoch, number)


@pytest.mark.parametrize('thread_pool', [False, True], ids=['processes', 'threads'])
def test_a_loader_with_workers_reads_the_end_early_and_state_dict_never_names_a_position(
        thread_pool):
    """The reason a pass stays under way once its iterator is exhausted: MXNet's DataLoader
    with workers reads the sampler's end a few batches (its prefetch) before it delivers
    them, so after batch 6 here the sampler is exhausted with batches still to come. A
    ``state_dict()`` naming the next epoch then would skip them: it raises instead, after
    every batch, and ``state_after(i + 1)`` resumes with exactly the batches left."""
    data = mx.gluon.data.SimpleDataset(list(range(MX_BATCHES * BATCH)))

    def plain(sampler_):
        return mx.gluon.data.DataLoader(SeededDataset(data), batch_sampler=sampler_)

    def values(loader):
        return [batch.asnumpy().tolist() for batch in loader]

    reference = plain(SeededBatchSampler(len(data), BATCH, SEED))
    reference = [values(reference) for _ in range(2)]  # epochs 0 and 1, uninterrupted
    assert len(reference[0]) == MX_BATCHES
    one = ReadCounting(len(data), BATCH, SEED)
    loader = mx.gluon.data.DataLoader(SeededDataset(data), batch_sampler=one, num_workers=2,
                                      thread_pool=thread_pool)
    try:
        received, read, states = [], [], []
        for i, batch in enumerate(loader):
            received.append(batch.asnumpy().tolist())
            read.append(one.read)
            raises_under_way(one, 0)  # whatever the loader has read of the sampler
            states.append(json.loads(json.dumps(one.state_after(i + 1))))
        raises_under_way(one, 0)  # the pass delivered, still under way
        assert received == reference[0]
        # the loader read the sampler to its end with batches 7, 8 and 9 still to come
        assert all(read[i] == MX_BATCHES for i in (6, 7, 8, 9)), read
        for i in range(MX_BATCHES):
            assert where(states[i]) == ((0, i + 1) if i + 1 < MX_BATCHES else (1, 0))
            resumed = SeededBatchSampler(len(data), BATCH, SEED)
            resumed.load_state_dict(states[i])
            assert where(resumed.state_dict()) == where(states[i])
            assert values(plain(resumed)) == (reference[0][i + 1:] if i + 1 < MX_BATCHES
                                              else reference[1]), i
        one.load_state_dict(states[-1])  # ends the pass: the next epoch's first batch
        assert where(one.state_dict()) == (1, 0)
        assert values(loader) == reference[1]
    finally:
        del loader  # closes its worker pool
        gc.collect()


@settings(max_examples=examples(60), deadline=None)
@given(length=st.integers(1, 25), batch_size=st.integers(1, 5),
       last_batch=st.sampled_from(LAST_BATCHES),
       epoch=st.one_of(st.integers(0, 6), st.integers(2 ** 63 - 3, 2 ** 63 - 2)),
       data=st.data())
def test_state_after_roundtrips_to_the_next_batch_of_an_uninterrupted_pass(
        length, batch_size, last_batch, epoch, data):
    def fresh():
        return SeededBatchSampler(length, batch_size, SEED, last_batch=last_batch)

    running = fresh()
    running.set_epoch(epoch)
    count = running.batches_in(epoch)
    delivered = data.draw(st.integers(0, count), label='delivered')
    batches = iter(running)
    for _ in range(delivered):
        next(batches)
    state = json.loads(json.dumps(running.state_after(delivered)))
    assert set(state) == SAMPLER_KEYS
    assert where(state) == ((epoch, delivered) if delivered < count else (epoch + 1, 0))
    # the uninterrupted run: the rest of this pass, then the next pass
    uninterrupted = keys(batches) + keys(running)
    resumed = fresh()
    resumed.load_state_dict(state)
    passes = 2 if where(state)[0] == epoch else 1
    assert sum((keys(resumed) for _ in range(passes)), []) == uninterrupted


# --------------------------------------------------------------------------- absurd states

ABSURD = {
    'negative epoch': ({'epoch': -1, 'batch': 0}, ValueError,
                       "state['epoch'] must be an integer >= 0, got -1"),
    'negative batch': ({'epoch': 0, 'batch': -1}, ValueError,
                       "state['batch'] must be an integer >= 0, got -1"),
    'epoch 2**63': ({'epoch': 2 ** 63, 'batch': 0}, ValueError,
                    "state['epoch'] must be below 2**63, got 9223372036854775808"),
    'epoch 10**30': ({'epoch': 10 ** 30, 'batch': 0}, ValueError,
                     "state['epoch'] must be below 2**63, got 1%s" % ('0' * 30)),
    'batch 10**30': ({'epoch': 0, 'batch': 10 ** 30}, ValueError,
                     "state['batch'] is 1%s, but epoch 0 has 3 batches" % ('0' * 30)),
    'batch past the epoch': ({'epoch': 0, 'batch': 4}, ValueError,
                             "state['batch'] is 4, but epoch 0 has 3 batches"),
    'epoch a bool': ({'epoch': True, 'batch': 0}, TypeError,
                     "state['epoch'] must be an integer, got True (bool)"),
    'batch a bool': ({'epoch': 0, 'batch': False}, TypeError,
                     "state['batch'] must be an integer, got False (bool)"),
    'epoch a float': ({'epoch': 1.0, 'batch': 0}, TypeError,
                      "state['epoch'] must be an integer, got 1.0 (float)"),
    'seed a bool': ({'epoch': 0, 'batch': 0, 'seed': True}, TypeError,
                    "state['seed'] must be an integer, got True (bool)"),
    'global batch a bool': ({'epoch': 0, 'batch': 0, 'global_batch_size': True}, TypeError,
                            "state['global_batch_size'] must be an integer, got True"),
    'length 10**30': ({'epoch': 0, 'batch': 0, 'length': 10 ** 30}, ValueError,
                      "state['length'] is 1%s, but this sampler's length is 11" % ('0' * 30)),
    'other format': ({'epoch': 0, 'batch': 0, 'format': 'gluonbatch.loader/2'}, ValueError,
                     "state has format 'gluonbatch.loader/2', but this sampler reads states "
                     "of format 'gluonbatch.loader/1'"),
    'format not a str': ({'epoch': 0, 'batch': 0, 'format': 1}, TypeError,
                         "state['format'] must be the str 'gluonbatch.loader/1' or absent, "
                         "got 1 (int)"),
}


@pytest.mark.parametrize('name', ABSURD)
def test_an_absurd_state_raises_naming_the_field_and_changes_nothing(name):
    state, error, message = ABSURD[name]
    one = sampler('discard')  # 3 batches an epoch
    one.load_state_dict({'epoch': 1, 'batch': 2})
    with pytest.raises(error, match=re.escape(message)):
        one.load_state_dict(state)
    assert where(one.state_dict()) == (1, 2)


@settings(max_examples=examples(40), deadline=None)
@given(epoch=st.one_of(st.integers(max_value=-1), st.integers(min_value=2 ** 63)),
       last_batch=st.sampled_from(LAST_BATCHES))
def test_no_epoch_outside_0_to_2_63_loads_or_is_counted(epoch, last_batch):
    one = sampler(last_batch)
    with pytest.raises(ValueError, match=re.escape("state['epoch'] must be")):
        one.load_state_dict({'epoch': epoch, 'batch': 0})
    for call in (one.set_epoch, one.batches_in, lambda e: one.batch(e, 0),
                 lambda e: one.batches(e)):
        with pytest.raises(ValueError, match=r'^epoch must be an integer >= 0|^epoch must '
                                             r'be below 2\*\*63'):
            call(epoch)
    assert where(one.state_dict()) == (0, 0)


def test_the_last_epochs_batches_are_made_with_rollover():
    """Positions through all epochs are past int64 there: the batch is made all the same,
    its last keys from the next epoch."""
    one = SeededBatchSampler(LENGTH, 4, SEED, last_batch='rollover')
    epoch = 2 ** 63 - 2
    batch = one.batch(epoch, one.batches_in(epoch) - 1)
    assert {key.epoch for key in batch} <= {epoch, epoch + 1} and len(batch) == 4
    one.load_state_dict({'epoch': epoch, 'batch': 1})
    assert keys([next(iter(one))]) == keys([one.batch(epoch, 1)])


def window_sampler(window=1, num_parts=1, part_index=0, lengths=(2, 3, 4, 3)):
    order = ShardWindowSampler(list(lengths), window=window, seed=SEED, num_parts=num_parts,
                               part_index=part_index)
    return SeededBatchSampler(sum(lengths), 4 // num_parts, SEED, last_batch='discard',
                              order=order)


def test_an_order_that_differs_is_refused_naming_the_entry():
    state = window_sampler(window=1).state_dict()
    with pytest.raises(ValueError, match=re.escape(
            "state['order']['window'] is 1, but this sampler's order has 2")):
        window_sampler(window=2).load_state_dict(state)
    edited = dict(state, order=dict(state['order'], window=8, shards=9))
    with pytest.raises(ValueError) as raised:
        window_sampler().load_state_dict(edited)
    assert ("state['order']['shards'] is 9, but this sampler's order has 4"
            in str(raised.value))
    assert ("state['order']['window'] is 8, but this sampler's order has 1"
            in str(raised.value))
    lacking = dict(state, order={k: v for k, v in state['order'].items() if k != 'window'})
    with pytest.raises(ValueError, match=re.escape(
            "state['order'] has no 'window', but this sampler's order has 1")):
        window_sampler().load_state_dict(lacking)
    extra = dict(state, order=dict(state['order'], ratio=0.5))
    with pytest.raises(ValueError, match=re.escape(
            "state['order']['ratio'] is 0.5, but this sampler's order has none")):
        window_sampler().load_state_dict(extra)
    with pytest.raises(TypeError, match=re.escape(
            "state['order'] must be a dict, the description of the order the state was saved "
            "with, got 3 (int)")):
        window_sampler().load_state_dict(dict(state, order=3))
    same = window_sampler()
    same.load_state_dict(dict(state, batch=2))
    assert where(same.state_dict()) == (0, 2)
    # the order is of all ranks: two ranks with the same global batch resume it too
    ranks = [window_sampler(num_parts=2, part_index=rank) for rank in (0, 1)]
    for rank in ranks:
        rank.load_state_dict(dict(state, batch=2))
    assert [list(batch) for batch in same] == [
        list(first) + list(second) for first, second in zip(*ranks)]


# --------------------------------------------------------------------------- interop

def pooled(last_batch):
    data = mx.gluon.data.SimpleDataset(list(range(LENGTH)))
    return DataLoader(data, batch_size=BATCH, shuffle=True, last_batch=last_batch,
                        batchify_fn=list, seed=SEED)


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_a_samplers_state_loads_into_a_loader_and_resumes_the_same_batches(last_batch):
    one, loader = mxnet_loader(last_batch)
    reference = list(loader)
    assert reference == list(pooled(last_batch))  # the loader makes the same batches
    one, loader = mxnet_loader(last_batch)
    for number, _ in enumerate(loader):
        if number == 0:
            state = one.state_after(1)
    assert 'format' not in state and checked_state(state) is state
    resuming = pooled(last_batch)
    resuming.load_state_dict(state)
    assert resuming.state_dict() == dict(state, format=FORMAT)
    assert list(resuming) == reference[1:]


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_a_loaders_state_loads_into_a_sampler_and_resumes_the_same_batches(last_batch):
    reference = list(pooled(last_batch))
    loader = pooled(last_batch)
    batches = iter(loader)
    next(batches)
    state = json.loads(json.dumps(loader.state_dict()))
    list(batches)  # the pass goes on to its end
    assert state['format'] == FORMAT and set(state) == set(KEYS)
    one, resuming = mxnet_loader(last_batch)
    one.load_state_dict(state)
    assert where(one.state_dict()) == (0, 1)
    assert list(resuming) == reference[1:]
    raises_under_way(one, 0)  # MXNet's loader exhausted the pass: it is still under way
    after = one.state_after(len(reference) - 1)
    assert dict(after, format=FORMAT) == dict(pooled(last_batch).state_dict(), epoch=1,
                                              batch=0)
    one.load_state_dict(after)
    assert dict(one.state_dict(), format=FORMAT) == dict(pooled(last_batch).state_dict(),
                                                         epoch=1, batch=0)


def test_a_loader_still_refuses_what_is_no_state_of_its_own():
    loader = pooled('discard')
    with pytest.raises(ValueError, match=re.escape(
            'state lacks seed, global_batch_size, length, shuffle, last_batch')):
        loader.load_state_dict({'epoch': 1, 'batch': 0})
    with pytest.raises(ValueError, match=re.escape("state has format 'other/1', but this "
                                                   'loader reads states of format')):
        loader.load_state_dict(dict(sampler('discard').state_dict(), format='other/1'))
    with pytest.raises(ValueError, match=re.escape("state['global_batch_size'] is 4")):
        loader.load_state_dict(dict(sampler('discard').state_dict(), global_batch_size=4))
    assert where(loader.state_dict()) == (0, 0)


def test_states_stay_json_with_the_same_keys():
    one = sampler()
    batches = iter(one)
    next(batches)
    during = one.state_after(1)
    count = 1 + len(list(batches))
    after = one.state_after(count)
    one.load_state_dict(after)
    for state in (during, after, one.state_dict()):
        assert set(state) == SAMPLER_KEYS and json.loads(json.dumps(state)) == state
    ordered = window_sampler().state_dict()
    assert set(ordered) == SAMPLER_KEYS | {'order'}
    assert json.loads(json.dumps(ordered)) == ordered
