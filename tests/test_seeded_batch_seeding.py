"""MXNet's generator in seeded loading: seeded once per batch (``mx.random.seed`` costs
about 1.4 ms of CPU, reseeding MXNet's 1024 parallel generators), from the key of the
batch's first sample, its samples then drawing from it in turn -- the same draws in
gluonbatch's loaders and MXNet's, in worker processes and in a thread pool, whose threads
each draw from their own MXNet generator.
"""
import pickle
import random
import threading
import time
import warnings

import mxnet as mx
import numpy as np
import pytest

from gluonbatch.batchify import Stack
from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.samplers import KeyBatch, SeededBatchSampler
from gluonbatch.seeded import SampleKey, SeededDataset
from gluonbatch.seeded.keys import BatchStart, read_seeded, seed_batch

SEED, SAMPLES, BATCH = 3, 16, 4


class Draws(mx.gluon.data.Dataset):
    """Each sample: one draw of Python's, numpy's and MXNet's generators."""

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        return np.array([random.random(), np.random.random(),
                         mx.nd.random.uniform().asscalar()], np.float32)


def mxnet_loader(num_workers, thread_pool=False):
    return mx.gluon.data.DataLoader(
        SeededDataset(Draws()), batch_sampler=SeededBatchSampler(SAMPLES, BATCH, SEED),
        batchify_fn=Stack(), num_workers=num_workers, thread_pool=thread_pool)


def our_loader(num_workers):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return DetectionDataLoader(Draws(), batch_size=BATCH, shuffle=True, seed=SEED,
                                   batchify_fn=Stack(), num_workers=num_workers)


def epochs(loader, count=2):
    return [np.concatenate([batch.asnumpy() for batch in loader]) for _ in range(count)]


def mxnet_streams(count=2):
    """MXNet's draws of every batch as defined: the batch's stream, from its first key."""
    sampler = SeededBatchSampler(SAMPLES, BATCH, SEED)
    draws = []
    for _ in range(count):
        epoch = []
        for batch in sampler:
            seed_batch(batch[0].seed, batch[0].epoch, batch[0].position)
            epoch += [mx.nd.random.uniform().asscalar() for _ in batch]
        draws.append(np.array(epoch, np.float32))
    return draws


@pytest.mark.parametrize('make', [
    lambda: mxnet_loader(0), lambda: mxnet_loader(2), lambda: mxnet_loader(2, True),
    lambda: our_loader(0), lambda: our_loader(1), lambda: our_loader(2)],
    ids=['mxnet-0', 'mxnet-2', 'mxnet-threads', 'ours-0', 'ours-1', 'ours-2'])
def test_mxnet_draws_are_one_stream_per_batch_in_every_loader(make):
    got = epochs(make())
    for epoch, want in zip(got, mxnet_streams()):
        np.testing.assert_array_equal(epoch[:, 2], want)
        for generator in range(3):  # no two samples of an epoch share a draw
            assert len(np.unique(epoch[:, generator])) == SAMPLES
    for epoch, want in zip(got, epochs(our_loader(0))):
        np.testing.assert_array_equal(epoch, want)


class CountedSeeds:
    """Stands in for ``mx.random.seed``, counting its calls."""

    def __init__(self, seed):
        self.seed, self.calls = seed, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.seed(*args, **kwargs)


@pytest.mark.parametrize('make', [lambda: mxnet_loader(0), lambda: our_loader(0)],
                         ids=['mxnet', 'ours'])
def test_mxnet_is_seeded_once_per_batch_and_once_per_key_read_alone(make, monkeypatch):
    counted = CountedSeeds(mx.random.seed)
    monkeypatch.setattr(mx.random, 'seed', counted)
    epochs(make(), count=1)
    assert counted.calls == SAMPLES // BATCH
    SeededDataset(Draws())[SampleKey(SEED, 0, 5, 5)]
    assert counted.calls == SAMPLES // BATCH + 1


def test_a_batch_starts_with_a_batch_start_equal_to_its_plain_key():
    batch = SeededBatchSampler(SAMPLES, BATCH, SEED).batch(1, 2)
    again = pickle.loads(pickle.dumps(batch))
    for keys in (batch, again):
        assert type(keys) is KeyBatch and (keys.epoch, keys.number) == (1, 2)
        assert type(keys[0]) is BatchStart and keys[0].size == BATCH
        assert all(type(key) is SampleKey for key in keys[1:])
    assert again == batch and again[0] == SampleKey(*batch[0]) and again[0].size == BATCH


class FailsAt(mx.gluon.data.Dataset):
    """Index ``bad`` raises."""

    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return SAMPLES

    def __getitem__(self, index):
        if index == self.bad:
            raise KeyError(index)
        return index


def test_after_a_batch_fails_a_key_read_alone_seeds_mxnet_itself(monkeypatch):
    counted = CountedSeeds(mx.random.seed)
    monkeypatch.setattr(mx.random, 'seed', counted)
    batch = SeededBatchSampler(SAMPLES, BATCH, SEED, shuffle=False).batch(0, 0)
    dataset = FailsAt(bad=1)
    assert read_seeded(dataset, batch[0]) == 0 and counted.calls == 1
    with pytest.raises(KeyError):
        read_seeded(dataset, batch[1])
    assert counted.calls == 1  # the batch's own key: MXNet's batch stream goes on
    assert read_seeded(dataset, batch[2]) == 2 and counted.calls == 2  # on its own now


def test_threads_reading_batches_at_once_each_draw_their_batchs_stream():
    """Two threads read batches key by key, yielding to each other between keys: MXNet's
    generator is each thread's, so no batch's first key reseeds it under another's."""
    sampler = SeededBatchSampler(SAMPLES * 8, BATCH, SEED)
    batches = [sampler.batch(0, number) for number in range(sampler.batches_in(0))]
    dataset, drawn = mx.gluon.data.SimpleDataset(list(range(SAMPLES * 8))).transform(
        lambda index: mx.nd.random.uniform().asscalar()), {}

    def read(mine):
        for batch in mine:
            drawn[batch.number] = []
            for key in batch:
                drawn[batch.number].append(read_seeded(dataset, key))
                time.sleep(0)  # let the other thread in, if it may

    threads = [threading.Thread(target=read, args=(batches[part::2],)) for part in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for batch in batches:
        seed_batch(batch[0].seed, batch[0].epoch, batch[0].position)
        want = [mx.nd.random.uniform().asscalar() for _ in batch]
        assert drawn[batch.number] == want, batch.number
