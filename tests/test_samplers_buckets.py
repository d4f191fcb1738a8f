"""SeededBucketSampler: aspect-ratio buckets from the seed, elastic and resumable."""
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.samplers import SeededBucketSampler
from helpers import examples


@st.composite
def buckets(draw):
    length = draw(st.integers(0, 60))
    keys = draw(st.lists(st.floats(0.25, 4.0), min_size=length, max_size=length))
    return dict(sort_keys=keys, batch_size=draw(st.integers(1, 4)),
                seed=draw(st.integers(0, 2 ** 64 - 1)), mult=draw(st.integers(1, 4)),
                shuffle=draw(st.booleans()),
                last_batch=draw(st.sampled_from(['keep', 'discard', 'pad'])))


def _passes(sampler, epochs=2):
    return [[list(batch) for batch in sampler] for _ in range(epochs)]


@settings(max_examples=examples(200), deadline=None)
@given(buckets(), st.sampled_from([2, 3]))
def test_every_position_once_sorted_in_buckets_and_elastic(args, ranks):
    sampler = SeededBucketSampler(**args)
    length, size = len(args['sort_keys']), args['batch_size']
    for epoch, batches in enumerate(_passes(sampler)):
        assert len(batches) == sampler.batches_in(epoch)
        positions = sorted(key.position for batch in batches for key in batch)
        stop = {'keep': length, 'discard': length // size * size,
                'pad': -(-length // size) * size}[args['last_batch']]
        assert positions == list(range(stop))  # each position once: draws of its own
        assert {key.epoch for batch in batches for key in batch} <= {epoch}
        assert batches == [list(sampler.batch(epoch, n)) for n in range(len(batches))]
        for bucket in range(0, len(batches), args['mult']):  # batches of a bucket do
            ranges = sorted((min(values), max(values)) for values in (  # not interleave
                [args['sort_keys'][key.index] for key in batch]
                for batch in batches[bucket:bucket + args['mult']]))
            assert all(high <= low for (_, high), (low, _) in zip(ranges, ranges[1:]))
    if args['last_batch'] == 'keep' and length % (size * ranks):
        with pytest.raises(ValueError, match="last_batch='keep' with num_parts"):
            SeededBucketSampler(**args, num_parts=ranks, part_index=0)
        return
    parts = [SeededBucketSampler(**dict(args, batch_size=size), num_parts=ranks,
                                 part_index=rank) for rank in range(ranks)]
    whole = SeededBucketSampler(**dict(args, batch_size=size * ranks))
    for epoch, global_batches in enumerate(_passes(whole)):
        per_rank = [[list(batch) for batch in part] for part in parts]
        assert all(len(batches) == len(global_batches) for batches in per_rank)
        assert [sum((batches[n] for batches in per_rank), []) for n in
                range(len(global_batches))] == global_batches


def test_the_same_batches_for_the_same_seed_and_others_for_another():
    keys = np.random.RandomState(0).uniform(0.3, 3, 50)
    first = _passes(SeededBucketSampler(keys, 4, seed=9, mult=3))
    assert first == _passes(SeededBucketSampler(keys, 4, seed=9, mult=3))
    assert first != _passes(SeededBucketSampler(keys, 4, seed=10, mult=3))
    assert first[0] != first[1]  # epochs differ


def test_resuming_gives_the_rest_of_the_epoch():
    keys = np.random.RandomState(1).uniform(0.3, 3, 41)
    sampler = SeededBucketSampler(keys, 3, seed=2, mult=2)
    epoch = [list(batch) for batch in sampler]
    sampler.load_state_dict({'epoch': 0, 'batch': 5})
    assert [list(batch) for batch in sampler] == epoch[5:]


def test_bad_arguments_say_what_was_expected():
    with pytest.raises(TypeError, match='sort_keys must be a sequence of numbers'):
        SeededBucketSampler(['wide', 'tall'], 2, seed=1)
    with pytest.raises(ValueError, match='last_batch must be one of keep, discard, pad'):
        SeededBucketSampler([1.0, 2.0], 2, seed=1, last_batch='rollover')
    with pytest.raises(ValueError, match='mult must be an integer >= 1'):
        SeededBucketSampler([1.0, 2.0], 2, seed=1, mult=0)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_seeded_loader_takes_it_as_its_batch_sampler(num_workers):
    values = np.random.RandomState(2).uniform(0.5, 2, 12)
    data = mx.gluon.data.SimpleDataset(values.astype('float32')).transform(
        lambda x: x + np.float32(np.random.uniform()))
    sampler = SeededBucketSampler(values, 3, seed=4, mult=2)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loader = DetectionDataLoader(data, batch_sampler=sampler, num_workers=num_workers,
                                     batchify_fn=np.stack, seed=4)
    batches = [batch.tolist() for _ in range(2) for batch in loader]
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        again = DetectionDataLoader(data, batch_sampler=SeededBucketSampler(values, 3, seed=4,
                                                                            mult=2),
                                    batchify_fn=np.stack, seed=4)
    assert batches == [batch.tolist() for _ in range(2) for batch in again]
    assert len(batches) == 8 and len({value for batch in batches for value in batch}) == 24
