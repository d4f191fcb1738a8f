"""Generators seeded loading cannot reach are warned about: once per process, never per sample.

A transform holding a ``random.Random`` or a ``numpy.random.Generator`` draws outside the
key's reach; :func:`~gluonbatch.seeded.keys.owned_generators` says so with a
``RuntimeWarning`` naming the holder's type, the generator's path and its type. Each test
makes its own classes: the warning is given once per process for each holder type, path and
generator type, so a class another test used may have been warned about already.
"""
import functools
import os
import random
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluonbatch
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.seeded import SeededDataset
from gluonbatch.seeded.keys import owned_generators

GENERATORS = {'random.Random': lambda: random.Random(3),
              'numpy.random.Generator': lambda: np.random.default_rng(3)}


def holder_class():
    """A new transform class (a new type for the warning's bookkeeping) whose instances
    keep what they are given as ``rng`` and draw from it."""

    class Jitter:
        def __init__(self, rng):
            self.rng = rng

        def __call__(self, x):
            draw = self.rng.random() if hasattr(self.rng, 'random') else 0.0
            return np.array([x, draw], np.float32)

    return Jitter


def unreachable_warnings(record):
    return [w for w in record if issubclass(w.category, RuntimeWarning)
            and 'cannot reseed' in str(w.message)]


@pytest.mark.parametrize('kind', sorted(GENERATORS))
def test_a_generator_that_cannot_be_reseeded_is_named_once(kind):
    Jitter = holder_class()
    first, second = Jitter(GENERATORS[kind]()), Jitter(GENERATORS[kind]())
    with pytest.warns(RuntimeWarning) as record:
        assert owned_generators(first) == []
    [warning] = unreachable_warnings(record)
    message = str(warning.message)
    assert message.startswith('Jitter holds a %s at Jitter.rng, ' % kind)
    assert 'numpy.random.RandomState' in message and 'numpy.random' in message
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # another instance, another search: silent
        owned_generators(second)
        owned_generators(first)


def test_the_warning_names_the_holder_and_the_path():
    Jitter = holder_class()
    rng = random.Random(0)

    def closure(x):
        return rng.random() + x

    class Pipeline:
        def __init__(self):
            self.steps = [Jitter(np.random.RandomState(1)), {'noise': Jitter(rng)}]

    expected = [
        (Pipeline(), "Jitter holds a random.Random at Pipeline.steps[1]['noise'].rng, "),
        (functools.partial(Jitter(np.random.default_rng(0)).__call__),
         'Jitter holds a numpy.random.Generator at partial.func.__self__.rng, '),
        (closure, 'function closure holds a random.Random at closure.<closure rng>, ')]
    for root, start in expected:
        with pytest.warns(RuntimeWarning) as record:
            owned_generators(root)
        [warning] = unreachable_warnings(record)
        assert str(warning.message).startswith(start)


@pytest.mark.parametrize('held', ['RandomState', 'nothing', 'global functions',
                                  'random module instance'])
def test_no_warning_for_what_seeding_reaches(held):
    Jitter = holder_class()
    values = {'RandomState': np.random.RandomState(5), 'nothing': None,
              'global functions': [random.uniform, np.random.uniform, random, np.random],
              'random module instance': random.uniform.__self__}
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        found = owned_generators(Jitter(values[held]))
    assert found == ([values[held]] if held == 'RandomState' else [])


def loader_of(data, kind, num_workers):
    if kind == 'mxnet':
        return mx.gluon.data.DataLoader(
            SeededDataset(data), num_workers=num_workers,
            batch_sampler=SeededBatchSampler(len(data), 2, seed=7))
    return gluonbatch.DataLoader(data, batch_size=2, seed=7, num_workers=num_workers,
                                 thread_pool=kind == 'threads')


@pytest.mark.parametrize('kind, num_workers', [('ours', 0), ('ours', 1), ('ours', 2),
                                               ('threads', 2), ('mxnet', 0), ('mxnet', 2)])
def test_a_loader_warns_once_per_process_not_per_sample(kind, num_workers, tmp_path):
    """Two loaders in turn, two epochs each: every process that reads samples warns at
    most once, however many it reads (the training process once for both loaders); worker
    processes tell what they warned through a file they append to."""
    shown = tmp_path / 'shown'

    def show(message, category, filename, lineno, file=None, line=None):
        if 'cannot reseed' in str(message):
            with open(shown, 'a') as out:
                out.write('%d\n' % os.getpid())

    data = mx.gluon.data.SimpleDataset(list(range(12))).transform(
        holder_class()(random.Random(0)))
    batches = 0
    with warnings.catch_warnings():
        warnings.simplefilter('always')  # Python's own once-per-place registry is off
        warnings.showwarning = show  # forked workers inherit it
        for _ in range(2):
            loader = loader_of(data, kind, num_workers)
            batches += sum(1 for _ in range(2) for batch in loader)
            if kind != 'mxnet':
                loader.close()
    assert batches == 2 * 2 * 6
    pids = shown.read_text().split()
    assert len(pids) == len(set(pids)), 'a process warned twice'
    in_workers = kind in ('ours', 'mxnet') and num_workers > 0
    assert pids == [str(os.getpid())] if not in_workers else 1 <= len(pids) <= 2 * num_workers
