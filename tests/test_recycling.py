"""Recycled shared memory in DataLoader workers: batches are written into segments a worker
already owns, and no batch is ever overwritten while anyone can still see it.

Every sample's content is a function of its id, so a batch is checked against the ids it
carries (in a small field that is never recycled) when it arrives and again when it is let
go of; a reused segment serving stale or foreign data fails these checks.
"""
import collections
import json
import multiprocessing
import os
import random
import subprocess
import sys
import textwrap
import time

import mxnet as mx
import numpy as np
import pytest

from gluonbatch import dataloader as gbdl
from gluonbatch import memory
from gluonbatch.batchify import Pad, Stack, Tuple

TIMEOUT = 60
FIELDS = (('float32', -1), ('uint8', 0), ('int32', -7))  # (dtype, pad value)


def content(sample_id, dtype, rows):
    """Sample ``sample_id``'s field of ``dtype``: ``rows`` rows of 48x48 values."""
    value = (sample_id * 7 + len(dtype)) % 200 + 1
    return np.full((rows, 48, 48), value, dtype)


def rows_of(sample_id):
    return 1 + sample_id * 13 % 24  # 1..24 rows: about 9 KiB to 221 KiB a sample


def sample(sample_id):
    fields = tuple(content(sample_id, dtype, rows_of(sample_id)) for dtype, _ in FIELDS)
    return (np.int64(sample_id),) + fields


class Samples(mx.gluon.data.Dataset):
    def __init__(self, length):
        self._length = length

    def __len__(self):
        return self._length

    def __getitem__(self, idx):
        return sample(idx)


class WithStats:
    """A batchify function that also returns its worker's recycling stats."""

    def __init__(self, fn):
        self._fn = fn

    def __call__(self, samples):
        return self._fn(samples), memory.recycling_stats()


#: ids (never recycled: 8 bytes a sample), then one padded field per dtype.
BATCHIFY = Tuple([Stack()] + [Pad(axis=0, pad_val=pad) for _, pad in FIELDS])


def check_batch(batch):
    """Raise unless every field of ``batch`` holds exactly its samples' content."""
    ids = [int(i) for i in batch[0].asnumpy()]
    longest = max(rows_of(i) for i in ids)
    for (dtype, pad), field in zip(FIELDS, batch[1:]):
        values = field.asnumpy()
        assert values.dtype == np.dtype(dtype) and values.shape[:2] == (len(ids), longest)
        for row, sample_id in enumerate(ids):
            rows = rows_of(sample_id)
            np.testing.assert_array_equal(values[row, :rows], content(sample_id, dtype, rows))
            assert (values[row, rows:] == pad).all()
    return ids


def make_loader(kind, num_workers, batch_size, length, pin_memory=False,
                last_batch='keep', prefetch=None, batchify_fn=BATCHIFY, thread_pool=False):
    """MXNet's DataLoader or gluonbatch's pooled one, returning ``(batch, worker stats)``."""
    options = dict(batch_size=batch_size, shuffle=True, last_batch=last_batch,
                   batchify_fn=WithStats(batchify_fn), num_workers=num_workers,
                   pin_memory=pin_memory, prefetch=prefetch, timeout=TIMEOUT)
    if kind == 'mxnet':
        return mx.gluon.data.DataLoader(Samples(length), thread_pool=thread_pool, **options)
    return gbdl.RandomTransformDataLoader([lambda *fields: fields], Samples(length),
                                          **options)


def receive_all(loader, epochs, on_batch):
    """Run ``epochs`` passes; returns every worker stats dict seen."""
    seen = []
    for _ in range(epochs):
        for batch, stats in loader:
            on_batch(batch)
            seen.append(stats)
    return seen


# --------------------------------------------------------------------- a. integrity

@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
@pytest.mark.parametrize('pin_memory,last_batch', [(False, 'keep'), (False, 'rollover'),
                                                   (True, 'keep')])
def test_held_batches_and_views_never_change(kind, pin_memory, last_batch):
    """2 workers, 240+ batches of three dtypes and varying sizes; the main process holds a
    random subset of batches and of views of them for random numbers of iterations."""
    rng = random.Random(20261130)
    held = []  # (iteration to let go at, batch, [(view, its values when received)])
    iteration = 0

    def on_batch(batch):
        nonlocal iteration
        iteration += 1
        check_batch(batch)
        if rng.random() < 0.3:
            views = [(batch[1][0:2], None), (batch[3].reshape((-1,)), None),
                     (batch[2][len(batch[0]) - 1], None)]
            views = [(view, view.asnumpy()) for view, _ in views]
            held.append((iteration + rng.randint(1, 25), batch, views))
        for entry in [entry for entry in held if entry[0] <= iteration]:
            let_go(entry)
            held.remove(entry)

    def let_go(entry):
        _, batch, views = entry
        check_batch(batch)
        for view, values in views:
            np.testing.assert_array_equal(view.asnumpy(), values)

    loader = make_loader(kind, 2, batch_size=7, length=7 * 62 + 3, pin_memory=pin_memory,
                         last_batch=last_batch)
    seen = receive_all(loader, 4, on_batch)
    for entry in held:
        let_go(entry)
    assert len(seen) >= 240
    assert max(stats['reused'] for stats in seen) > 0  # segments were recycled
    assert all(stats['segments'] <= stats['limit'] for stats in seen)


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_a_batch_waiting_to_be_received_is_never_reused(kind):
    """A slow consumer: the worker runs up to 12 batches ahead, all sent and not yet
    received; each must arrive as it was written."""
    loader = make_loader(kind, 1, batch_size=4, length=4 * 45, prefetch=12)

    def slowly(batch):
        time.sleep(0.02)  # the worker sends on meanwhile
        check_batch(batch)

    seen = receive_all(loader, 1, slowly)
    assert seen[-1]['reused'] > 0


#: Views a worker keeps of its last two outputs (per process: MXNet's DataLoader sends the
#: batchify function anew with every batch, so the function cannot hold them).
KEPT = collections.deque(maxlen=2)


def keeps_views(samples):
    """Batchify, keeping views of the last two outputs in the worker; raise if one of them
    changed."""
    batch = BATCHIFY(samples)
    for view, values in KEPT:
        if not (view.asnumpy() == values).all():
            raise AssertionError('a view the worker kept was overwritten')
    view = batch[1][0:1]
    KEPT.append((view, view.asnumpy()))
    return batch


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_views_the_worker_keeps_are_never_overwritten(kind):
    """The main process lets go of each batch before the worker makes the one after next,
    so only the worker's own views keep those segments from being reused."""
    loader = make_loader(kind, 1, batch_size=5, length=5 * 30, batchify_fn=keeps_views,
                         prefetch=0 if kind == 'mxnet' else 1)
    reused = 0
    for _ in range(2):
        for batch, stats in loader:
            check_batch(batch)
            reused = stats['reused']
            del batch
    assert reused > 0


@pytest.mark.parametrize('num_workers,thread_pool', [(0, False), (2, True)],
                         ids=['main', '2threads'])
def test_the_main_process_allocates_fresh_memory(num_workers, thread_pool):
    loader = make_loader('mxnet', num_workers, batch_size=5, length=40,
                         thread_pool=thread_pool)
    seen = receive_all(loader, 2, check_batch)
    assert all(stats['allocated'] == stats['segments'] == 0 for stats in seen)
    assert memory.get_recycling()


@pytest.mark.parametrize('num_workers', [1, 2])
def test_set_recycling_off_allocates_every_batch_fresh(num_workers):
    with memory.use_recycling(False):
        assert not memory.get_recycling()
        loader = make_loader('mxnet', num_workers, batch_size=5, length=40)
        seen = receive_all(loader, 2, check_batch)
    assert memory.get_recycling()
    assert all(stats['allocated'] == stats['segments'] == 0 for stats in seen)


def test_the_recycling_setting_is_checked():
    with pytest.raises(TypeError, match='recycling setting'):
        memory.set_recycling(1)
    assert memory.get_recycling()


# --------------------------------------------------------------------- b. bounds and leaks

def _open_fds(pid='self'):
    return len(os.listdir('/proc/%s/fd' % pid))


def _own_shm_blocks(pids):
    prefixes = tuple('mx_%d_' % pid for pid in pids)
    return len([name for name in os.listdir('/dev/shm') if name.startswith(prefixes)])


def _settled(read):
    """``read()`` once MXNet freed what it was asked to and two readings agree."""
    import gc
    counts = None
    for _ in range(100):
        gc.collect()
        mx.nd.waitall()
        counts, previous = read(), counts
        if counts == previous:
            break
        time.sleep(0.02)
    return counts


DTYPES = ('uint8', 'int8', 'int32', 'int64', 'float16', 'float32', 'float64')


class ManySizes(mx.gluon.data.Dataset):
    """Samples of 16..63 rows of 64x64 values in seven dtypes (64 KiB to 2 MiB)."""

    def __init__(self, length=150):
        self._length = length

    def __len__(self):
        return self._length

    def __getitem__(self, idx):
        rows = 16 + idx * 37 % 48
        return np.int64(idx), np.full((rows, 64, 64), idx % 100 + 1, DTYPES[idx % 7])


#: Batches made by the workers of the test below (inherited by the forked workers).
PRODUCED = multiprocessing.get_context('fork').Value('i', 0)


class CountsBatches(WithStats):
    def __call__(self, samples):
        with PRODUCED.get_lock():
            PRODUCED.value += 1
        return super().__call__(samples)


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_more_batches_in_flight_than_the_pool_keeps(kind):
    """One worker sends 80 batches before the main process takes the second: the pool stays
    within its bound by forgetting busy segments, and every batch arrives intact."""
    PRODUCED.value = 0
    fn = CountsBatches(Tuple(Stack(), Pad(pad_val=0)))
    options = dict(batch_size=1, batchify_fn=fn, num_workers=1, prefetch=120,
                   timeout=TIMEOUT)
    if kind == 'mxnet':
        loader = mx.gluon.data.DataLoader(ManySizes(), **options)
    else:
        loader = gbdl.RandomTransformDataLoader([lambda *fields: fields], ManySizes(),
                                                **options)
    seen = []
    for epoch in range(2):
        for (ids, values), stats in loader:
            while epoch == 0 and not seen and PRODUCED.value < 80:
                time.sleep(0.01)  # the worker runs ahead
            np.testing.assert_array_equal(values.asnumpy()[0],
                                          ManySizes()[int(ids.asscalar())][1])
            seen.append(stats)
    assert all(stats['segments'] <= stats['limit'] for stats in seen)
    assert max(stats['evicted'] for stats in seen) > 0
    assert max(stats['reused'] for stats in seen) > 0


def test_twenty_epochs_leave_nothing_behind():
    pid = os.getpid()
    before = _settled(lambda: (_open_fds(), _own_shm_blocks([pid])))
    children = set(multiprocessing.active_children())
    loader = mx.gluon.data.DataLoader(ManySizes(42), batch_size=1, shuffle=True,
                                      batchify_fn=WithStats(Tuple(Stack(), Pad(pad_val=0))),
                                      num_workers=2, timeout=TIMEOUT)
    workers = [p.pid for p in multiprocessing.active_children() if p not in children]
    assert len(workers) == 2
    worker_fds = [_open_fds(worker) for worker in workers]
    seen = []
    for _ in range(20):
        for (ids, values), stats in loader:
            np.testing.assert_array_equal(values.asnumpy()[0],
                                          ManySizes()[int(ids.asscalar())][1])
            seen.append(stats)
    assert all(stats['segments'] <= stats['limit'] for stats in seen)
    assert max(stats['reused'] for stats in seen) > 0
    # A worker's descriptors: one per segment of its pool, and a few in flight.
    assert all(_open_fds(worker) <= start + seen[0]['limit'] + 4
               for worker, start in zip(workers, worker_fds))
    shm_blocks = _own_shm_blocks([pid] + workers)
    del loader, ids, values  # and the last batch
    assert _settled(lambda: (_open_fds(), _own_shm_blocks([pid]))) == before
    assert shm_blocks == 0  # MXNet unlinks every segment's name as it creates it


# --------------------------------------------------------------------- c. the self-check

def _run_python(*parts, **env):
    code = ''.join(textwrap.dedent(part) for part in parts)
    result = subprocess.run([sys.executable, '-c', code], text=True,
                            capture_output=True, timeout=300,
                            env=dict(os.environ, **env))
    assert result.returncode == 0, result.stderr[-3000:]
    return result


AFTER_IMPORT = '''
    import json, mxnet as mx, numpy as np
    from gluonbatch import memory
    from gluonbatch.batchify import Stack

    def with_stats(samples):
        return Stack()(samples), memory.recycling_stats()

    data = mx.gluon.data.SimpleDataset([np.full((64, 64, 8), i, 'float32') for i in range(24)])
    loader = mx.gluon.data.DataLoader(data, batch_size=4, batchify_fn=with_stats,
                                      num_workers=2)
    stats = []
    for _ in range(3):
        for batch, worker in loader:
            assert (batch.asnumpy()[:, 0, 0, 0] % 4 == [0, 1, 2, 3]).all()
            stats.append(worker)
    print(json.dumps([memory.get_recycling(), max(s['allocated'] for s in stats)]))
'''


def test_a_build_whose_counts_differ_turns_recycling_off():
    """Another MXNet build is simulated by an export that counts twice: the check at
    import sees it, recycling stays off, and batches are still right."""
    code = '''
        import logging
        logging.basicConfig(level=logging.DEBUG)
        import mxnet as mx
        export = mx.nd.NDArray._to_shared_mem

        def export_counting_twice(self):
            export(self)
            return export(self)

        mx.nd.NDArray._to_shared_mem = export_counting_twice
    '''
    result = _run_python(code, AFTER_IMPORT)
    assert json.loads(result.stdout.splitlines()[-1]) == [False, 0]
    assert ('shared-memory recycling is off: the shared count went [1, 3, 3, 2]'
            in result.stderr)


@pytest.mark.parametrize('value,expected', [('0', [False, 0]), ('1', [True, 2])])
def test_the_environment_variable_turns_recycling_off(value, expected):
    result = _run_python(AFTER_IMPORT, GLUONBATCH_RECYCLE=value)
    recycling, allocated = json.loads(result.stdout.splitlines()[-1])
    assert recycling == expected[0]
    assert (allocated > 0) == (expected[1] > 0)


def test_a_bad_environment_variable_is_named():
    result = subprocess.run([sys.executable, '-c', 'from gluonbatch import memory; '
                             'memory.get_recycling()'], text=True, capture_output=True,
                            env=dict(os.environ, GLUONBATCH_RECYCLE='yes'), timeout=300)
    assert result.returncode != 0
    assert 'ValueError: the environment variable GLUONBATCH_RECYCLE must be one of 1, 0' \
        in result.stderr
