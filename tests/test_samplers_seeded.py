"""SeededBatchSampler and the key derivations of seeded loading (gluonbatch.seeded).

The sampler is checked against a model built on MXNet's own ``BatchSampler`` over the
``(epoch, position)`` pairs of every pass: ``'keep'``, ``'discard'`` and ``'rollover'``
exactly as MXNet groups samples (rollover carrying the remainder into the next pass), and
``'pad'`` as ``'keep'`` with the last batch filled by the positions past the end, which
read the epoch's order from its start. Every rank's batch is its slice of the global
batch. The keys of neighbouring counters draw independently, and the generators a preset
owns (CenterNet's) are found and seeded too.
"""
import json
import pickle
import random

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data.transforms.presets.center_net import (
    CenterNetDefaultTrainTransform as GluoncvCenterNet)
from hypothesis import given, settings, strategies as st

from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.samplers import KeyBatch, SeededBatchSampler
from gluonbatch.seeded import SampleKey, SeededDataset
from gluonbatch.seeded.keys import (batch_choice, epoch_order, owned_generators,
                                    seed_sample)
from gluonbatch.transforms.presets.center_net import CenterNetDefaultTrainTransform
from helpers import examples

LAST_BATCH = ['keep', 'discard', 'pad', 'rollover']


# --------------------------------------------------------------------------- the model

class EpochPositions(mx.gluon.data.Sampler):
    """``(epoch, position)`` for every position of an epoch; each pass the next epoch."""

    def __init__(self, length):
        self.length, self.epoch = length, 0

    def __iter__(self):
        epoch, self.epoch = self.epoch, self.epoch + 1
        return iter([(epoch, position) for position in range(self.length)])

    def __len__(self):
        return self.length


def model_passes(length, global_batch, last_batch, passes):
    """The global batches of the first ``passes`` passes, each a list of
    ``(epoch, position)``: MXNet's BatchSampler's, the last of a ``'pad'`` pass filled
    with the positions after the end."""
    grouping = 'keep' if last_batch == 'pad' else last_batch
    batches = mx.gluon.data.BatchSampler(EpochPositions(length), global_batch, grouping)
    result = []
    for _ in range(passes):
        batch_list = [list(batch) for batch in batches]
        if last_batch == 'pad' and batch_list and len(batch_list[-1]) < global_batch:
            epoch, short = batch_list[-1][0][0], len(batch_list[-1])
            batch_list[-1] += [(epoch, position) for position in
                               range(length, length + global_batch - short)]
        result.append(batch_list)
    return result


def order(seed, epoch, length, shuffle):
    return epoch_order(seed, epoch, length) if shuffle else np.arange(length)


def positions(batch):
    return [(key.epoch, key.position) for key in batch]


@settings(max_examples=examples(150), deadline=None)
@given(length=st.integers(0, 30), batch_size=st.integers(1, 6), num_parts=st.integers(1, 4),
       shuffle=st.booleans(), last_batch=st.sampled_from(LAST_BATCH),
       seed=st.integers(0, 2 ** 64 - 1), data=st.data())
def test_batches_follow_the_model(length, batch_size, num_parts, shuffle, last_batch, seed,
                                  data):
    part_index = data.draw(st.integers(0, num_parts - 1), label='part_index')
    global_batch = batch_size * num_parts
    if last_batch == 'keep' and num_parts > 1 and length % global_batch:
        with pytest.raises(ValueError, match=r"last_batch='keep' with num_parts=%d .* got "
                           r'length %d' % (num_parts, length)):
            SeededBatchSampler(length, batch_size, seed, shuffle, last_batch, num_parts,
                               part_index)
        return
    ranks = [SeededBatchSampler(length, batch_size, seed, shuffle, last_batch, num_parts, rank)
             for rank in range(num_parts)]
    one = SeededBatchSampler(length, global_batch, seed, shuffle, last_batch)
    passes = 4  # with rollover and a global batch above the length, some passes are empty
    for epoch, want in enumerate(model_passes(length, global_batch, last_batch, passes)):
        counts = {len(sampler) for sampler in ranks} | {ranks[0].batches_in(epoch)}
        assert counts == {len(want)}  # every rank runs the same number of batches
        per_rank = [list(sampler) for sampler in ranks]
        whole = list(one)
        for number, global_keys in enumerate(want):
            for batches in per_rank + [whole]:
                assert (batches[number].epoch, batches[number].number) == (epoch, number)
            assert [positions(batches[number]) for batches in per_rank] == [
                global_keys[rank * batch_size:(rank + 1) * batch_size]
                for rank in range(num_parts)]
            concatenated = [key for batches in per_rank for key in batches[number]]
            assert concatenated == list(whole[number])
            for key in concatenated:
                assert key.seed == seed
                assert key.index == order(seed, key.epoch, length, shuffle)[
                    key.position % length]
        assert [sampler.epoch for sampler in ranks] == [epoch + 1] * num_parts
    mine = ranks[part_index]
    assert [list(mine.batch(e, n)) for e in range(passes)
            for n in range(mine.batches_in(e))] == [
        list(batch) for e in range(passes) for batch in mine.batches(e)]


def test_an_epoch_covers_the_dataset_in_its_order():
    for last_batch in LAST_BATCH:
        sampler = SeededBatchSampler(10, 4, seed=3, last_batch=last_batch)
        indices = [key.index for batch in sampler.batches(2) for key in batch]
        want = epoch_order(3, 2, 10).tolist()
        if last_batch == 'discard':
            assert indices == want[:8]
        elif last_batch == 'pad':
            assert indices == want + want[:2]
        elif last_batch == 'keep':
            assert indices == want
        else:  # epoch 2 starts at stream position 20: it runs 20..27, 28 and 29 roll over
            assert indices == want[:8]
            assert [key.index for key in sampler.batch(3, 0)] == want[8:] + \
                epoch_order(3, 3, 10).tolist()[:2]


def test_padding_wraps_the_order_more_than_once():
    keys = SeededBatchSampler(3, 8, seed=1, shuffle=False, last_batch='pad').batch(0, 0)
    assert [key.index for key in keys] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert [key.position for key in keys] == list(range(8))  # draws of their own


def test_the_order_is_a_permutation_of_seed_and_epoch():
    first = epoch_order(7, 0, 50)
    assert sorted(first.tolist()) == list(range(50)) and first.dtype == np.int64
    assert first.tolist() == epoch_order(7, 0, 50).tolist()
    others = [epoch_order(7, 1, 50), epoch_order(8, 0, 50), epoch_order(6, 1, 50)]
    assert all(other.tolist() != first.tolist() for other in others)
    # the derivation is part of a run's identity: a saved run resumes with the same order
    assert epoch_order(7, 0, 10).tolist() == GOLDEN_ORDER


GOLDEN_ORDER = [1, 6, 4, 3, 8, 7, 9, 0, 2, 5]


# --------------------------------------------------------------------------- state

def position(sampler):
    """``(epoch, batch)`` of the sampler's state: where its next pass starts."""
    state = sampler.state_dict()
    return state['epoch'], state['batch']


@settings(max_examples=examples(60), deadline=None)
@given(length=st.integers(1, 25), batch_size=st.integers(1, 5),
       last_batch=st.sampled_from(LAST_BATCH), epoch=st.integers(0, 6), data=st.data())
def test_load_state_dict_resumes_at_any_batch(length, batch_size, last_batch, epoch, data):
    sampler = SeededBatchSampler(length, batch_size, seed=11, last_batch=last_batch)
    count = sampler.batches_in(epoch)
    every = [list(batch) for batch in sampler.batches(epoch)]
    assert len(every) == count
    if not count:  # rollover: a pass with no batch
        return
    start = data.draw(st.integers(0, count - 1), label='batch')
    sampler.load_state_dict({'epoch': epoch, 'batch': start})
    assert position(sampler) == (epoch, start)
    assert len(sampler) == count
    assert [list(batch) for batch in sampler] == every[start:]
    # exhausted, the pass is still under way (a DataLoader with workers reads the pass's
    # end before it delivers it): state_after names the next epoch, and loading it ends
    # the pass
    with pytest.raises(ValueError, match='under way'):
        sampler.state_dict()
    after = sampler.state_after(count - start)
    assert (after['epoch'], after['batch']) == (epoch + 1, 0)
    sampler.load_state_dict(after)
    assert position(sampler) == (epoch + 1, 0)
    assert [list(batch) for batch in sampler] == [list(b) for b in sampler.batches(epoch + 1)]


def test_passes_advance_the_epoch_and_set_epoch_sets_the_next():
    sampler = SeededBatchSampler(12, 5, seed=4)
    assert sampler.epoch == 0 and position(sampler) == (0, 0)
    first, second = list(sampler), list(sampler)
    assert sampler.epoch == 2 and first != second
    assert [batch.epoch for batch in first + second] == [0] * 3 + [1] * 3
    sampler.set_epoch(1)
    assert position(sampler) == (1, 0)
    assert list(sampler) == second
    sampler.load_state_dict({'epoch': 0, 'batch': 2})
    sampler.set_epoch(0)  # restarts the epoch at its first batch
    assert list(sampler) == first
    with pytest.raises(ValueError, match='under way'):  # exhausted, still under way
        sampler.state_dict()
    state = sampler.state_after(len(first))
    assert json.loads(json.dumps(state)) == state
    assert (state['epoch'], state['batch']) == (1, 0) and sampler.epoch == 1
    sampler.load_state_dict(state)
    assert sampler.state_dict() == state
    assert list(sampler) == second
    sampler.set_epoch(3)  # set_epoch ends the exhausted pass too
    assert position(sampler) == (3, 0)


def test_a_key_batch_pickles_with_its_epoch_and_number():
    batch = SeededBatchSampler(9, 4, seed=5).batch(3, 1)
    again = pickle.loads(pickle.dumps(batch))
    assert type(again) is KeyBatch and again == batch
    assert (again.epoch, again.number) == (3, 1)
    assert [type(key) for key in again] == [type(key) for key in batch]  # BatchStart first
    assert all(isinstance(key, SampleKey) for key in again)


BAD_ARGUMENTS = [
    (dict(length=-1), ValueError, 'length must be an integer >= 0, got -1'),
    (dict(length=2.5), TypeError, 'length must be an integer, got 2.5'),
    (dict(batch_size=0), ValueError, 'batch_size must be an integer >= 1, got 0'),
    (dict(batch_size='4'), TypeError, "batch_size must be an integer, got '4'"),
    (dict(seed=-1), ValueError, r'seed must be an integer in \[0, 2\*\*64\), got -1'),
    (dict(seed=2 ** 64), ValueError, r'seed must be an integer in \[0, 2\*\*64\), got 1844'),
    (dict(seed=1.0), TypeError, 'seed must be an integer, got 1.0'),
    (dict(seed=None), TypeError, 'seed must be an integer, got None'),
    (dict(last_batch='roll'), ValueError, "last_batch must be one of keep, .*, got 'roll'"),
    (dict(last_batch=None), TypeError, 'last_batch must be one of .*, got None'),
    (dict(num_parts=0), ValueError, 'num_parts must be an integer >= 1, got 0'),
    (dict(num_parts=2, part_index=2, last_batch='pad'), ValueError,
     'got part_index 2 with num_parts 2'),
    (dict(part_index=-1), ValueError, 'part_index must be an integer >= 0, got -1'),
    (dict(length=10, batch_size=3, num_parts=2), ValueError,
     r"global batch \(6 = batch_size 3 x num_parts 2\), got length 10"),
]


@pytest.mark.parametrize('changes, error, message', BAD_ARGUMENTS,
                         ids=[' '.join('%s=%r' % item for item in case[0].items())
                              for case in BAD_ARGUMENTS])
def test_bad_arguments_name_what_was_seen(changes, error, message):
    arguments = dict(length=12, batch_size=3, seed=1)
    arguments.update(changes)
    with pytest.raises(error, match=message):
        SeededBatchSampler(**arguments)


BAD_STATES = [
    ([('epoch', 0), ('batch', 0)], TypeError, 'state must be a dict with epoch and batch, '
     'got list'),
    ({'epoch': 0}, ValueError, r"state lacks batch; it has \['epoch'\]"),
    ({'epoch': -1, 'batch': 0}, ValueError, r"state\['epoch'\] must be an integer >= 0, got -1"),
    ({'epoch': 0, 'batch': '1'}, TypeError, r"state\['batch'\] must be an integer, got '1'"),
    ({'epoch': 0, 'batch': 5}, ValueError, r"state\['batch'\] is 5, but epoch 0 has 4 batches"),
]


@pytest.mark.parametrize('state, error, message', BAD_STATES)
def test_bad_states_name_what_was_seen(state, error, message):
    sampler = SeededBatchSampler(12, 3, seed=1)
    with pytest.raises(error, match=message):
        sampler.load_state_dict(state)
    assert position(sampler) == (0, 0)  # unchanged


def test_bad_epochs_and_batch_numbers_name_what_was_seen():
    sampler = SeededBatchSampler(12, 3, seed=1)
    with pytest.raises(ValueError, match='epoch must be an integer >= 0, got -2'):
        sampler.set_epoch(-2)
    with pytest.raises(TypeError, match='epoch must be an integer, got True'):
        sampler.set_epoch(True)
    with pytest.raises(ValueError, match='epoch must be an integer >= 0, got -1'):
        sampler.batches_in(-1)
    with pytest.raises(ValueError, match='batch number 4 of epoch 0, which has 4 batches'):
        sampler.batch(0, 4)
    with pytest.raises(ValueError, match='number must be an integer >= 0, got -1'):
        sampler.batch(0, -1)
    with pytest.raises(ValueError, match='start 5 of epoch 1, which has 4 batches'):
        list(sampler.batches(1, 5))
    assert position(sampler) == (0, 0)


# --------------------------------------------------------------------------- the keys

def draws():
    """Two draws of each generator seed_sample sets."""
    return [(random.random(), random.random()), tuple(np.random.random(2)),
            tuple(mx.nd.random.uniform(shape=2).asnumpy().tolist())]


def test_neighbouring_keys_draw_independently():
    """Every (seed, epoch, position) of a small cube draws its own numbers from every
    generator: no key is another's shifted (as with ``seed + index``), no stream another's
    continuation."""
    owned = np.random.RandomState(0)
    seen = [[], [], [], []]
    for seed in range(3):
        for epoch in range(3):
            for position in range(12):
                seed_sample(seed, epoch, position, [owned])
                for values, drawn in zip(seen, draws() + [tuple(owned.random_sample(2))]):
                    values.extend(drawn)
    for name, values in zip(['random', 'numpy', 'mxnet', 'owned'], seen):
        assert len(set(values)) == len(values) == 3 * 3 * 12 * 2, name
        assert 0.4 < np.mean(values) < 0.6, name  # uniform draws, not a degenerate stream


def test_a_key_sets_every_generator_alike():
    seed_sample(7, 1, 4)
    first = draws()
    random.random(), np.random.random(), mx.nd.random.uniform().asscalar()
    seed_sample(7, 1, 4)
    assert draws() == first
    assert first[1][0] == pytest.approx(GOLDEN_NUMPY_DRAW, abs=0)


GOLDEN_NUMPY_DRAW = 0.3639651051163848


def test_batch_choices_are_functions_of_the_batch():
    picks = [batch_choice(5, 2, number, 3) for number in range(60)]
    assert picks == [batch_choice(5, 2, number, 3) for number in range(60)]
    assert set(picks) == {0, 1, 2}
    assert picks != [batch_choice(5, 3, number, 3) for number in range(60)]


# --------------------------------------------------------------------------- owned generators

def center_nets():
    """gluonbatch's and gluoncv's CenterNet presets: each owns a RandomState."""
    rng = np.random.RandomState(123)
    return {'gluonbatch': (CenterNetDefaultTrainTransform(32, 32, 20, data_rng=rng), rng),
            'gluoncv': (GluoncvCenterNet(32, 32, 20), None)}


@pytest.mark.parametrize('source', ['gluonbatch', 'gluoncv'])
@pytest.mark.parametrize('wrapping', ['transform', 'transform_first', 'lambda', 'method'])
def test_owned_generators_are_found_and_seeded(source, wrapping):
    preset, rng = center_nets()[source]
    base = SyntheticDetection(4, size_range=((40, 60), (50, 80)))
    if wrapping == 'transform':
        dataset = base.transform(preset)
    elif wrapping == 'transform_first':  # the image alone, the label passed on
        dataset = base.transform_first(ImageOnly(preset))
    elif wrapping == 'lambda':
        dataset = base.transform(lambda image, label: preset(image, label))
    else:
        dataset = base.transform(preset.__call__)
    found = owned_generators(dataset)
    assert len(found) == 1 and isinstance(found[0], np.random.RandomState)
    if rng is not None:
        assert found[0] is rng
    seeded = SeededDataset(dataset)
    key = SampleKey(3, 0, 2, 1)
    first = seeded[key]
    for position in range(3):  # other samples move every generator on
        seeded[SampleKey(3, 0, position, 0)]
    for _ in range(2):
        dataset[0]
    again = seeded[key]
    assert digests(first) == digests(again)


class ImageOnly:
    """The preset on the image alone (for ``transform_first``)."""

    def __init__(self, preset):
        self.preset = preset

    def __call__(self, image):
        return self.preset(image, np.array([[4., 4., 20., 20., 1.]]))[0]


def digests(sample):
    values = sample if isinstance(sample, tuple) else (sample,)
    return [np.asarray(value.asnumpy() if isinstance(value, mx.nd.NDArray) else value).tobytes()
            for value in values]
