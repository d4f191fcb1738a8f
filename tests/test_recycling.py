"""Recycled shared memory in DataLoader workers: batches are written into segments a worker
already owns, and no batch is ever overwritten while anyone can still see it.

Every sample's content is a function of its id, so a batch is checked against the ids it
carries (in a small field that is never recycled) when it arrives and again when it is let
go of; a reused segment serving stale or foreign data fails these checks.
"""
import collections
import gc
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
from handles import left_behind, loader_handles
from helpers import open_fds
from tiers import each_value

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


#: Batches made by the workers of the current test (inherited by the forked workers).
PRODUCED = multiprocessing.get_context('fork').Value('i', 0)


class CountsBatches(WithStats):
    """:class:`WithStats` that also counts the batches made in :data:`PRODUCED`."""

    def __call__(self, samples):
        with PRODUCED.get_lock():
            PRODUCED.value += 1
        return super().__call__(samples)


def wait_for_batches(count):
    """Wait until the workers have made ``count`` batches (a guard fails a stuck worker)."""
    for _ in range(6000):
        if PRODUCED.value >= count:
            return
        time.sleep(0.01)
    raise AssertionError('the workers made %d batches, not %d' % (PRODUCED.value, count))


def make_loader(kind, dataset, num_workers, batch_size, pin_memory=False, last_batch='keep',
                prefetch=None, batchify_fn=BATCHIFY, counting=False, thread_pool=False,
                shuffle=True):
    """MXNet's DataLoader or gluonbatch's pooled one, returning ``(batch, worker stats)``
    (and counting the batches made in :data:`PRODUCED`, if ``counting``)."""
    options = dict(batch_size=batch_size, shuffle=shuffle, last_batch=last_batch,
                   batchify_fn=(CountsBatches if counting else WithStats)(batchify_fn),
                   num_workers=num_workers, pin_memory=pin_memory, prefetch=prefetch,
                   timeout=TIMEOUT)
    if kind == 'mxnet':
        return mx.gluon.data.DataLoader(dataset, thread_pool=thread_pool, **options)
    return gbdl.RandomTransformDataLoader([lambda *fields: fields], dataset, **options)


def receive_all(loader, epochs, on_batch):
    """Run ``epochs`` passes; returns every worker stats dict seen."""
    seen = []
    for _ in range(epochs):
        for batch, stats in loader:
            on_batch(batch)
            seen.append(stats)
    return seen


# --------------------------------------------------------------------- a. integrity

@pytest.mark.parametrize(*each_value(kind=['mxnet', 'pooled'],
                                      options={'keep': (False, 'keep'),
                                               'rollover': (False, 'rollover'),
                                               'pinned': (True, 'keep')}))
def test_held_batches_and_views_never_change(kind, options):
    """2 workers, 240+ batches of three dtypes and varying sizes; the main process holds a
    random subset of batches, of views of them, and of views alone (the batch dropped), for
    random numbers of iterations."""
    pin_memory, last_batch = options
    rng = random.Random(20261130)
    held = []  # (iteration to let go at, batch or None, [(view, its values when received)])
    iteration = 0

    def on_batch(batch):
        nonlocal iteration
        iteration += 1
        check_batch(batch)
        if rng.random() < 0.3:
            views = [(batch[1][0:2], None), (batch[3].reshape((-1,)), None),
                     (batch[2][len(batch[0]) - 1], None)]
            views = [(view, view.asnumpy()) for view, _ in views]
            keep = batch if rng.random() < 0.5 else None
            held.append((iteration + rng.randint(1, 25), keep, views))
        for entry in [entry for entry in held if entry[0] <= iteration]:
            let_go(entry)
            held.remove(entry)

    def let_go(entry):
        _, batch, views = entry
        if batch is not None:
            check_batch(batch)
        for view, values in views:
            np.testing.assert_array_equal(view.asnumpy(), values)

    loader = make_loader(kind, Samples(7 * 62 + 3), 2, batch_size=7, pin_memory=pin_memory,
                         last_batch=last_batch)
    seen = receive_all(loader, 4, on_batch)
    for entry in held:
        let_go(entry)
    assert len(seen) >= 240
    assert max(stats['reused'] for stats in seen) > 0  # segments were recycled
    assert all(stats['segments'] <= stats['limit'] for stats in seen)


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_a_batch_waiting_to_be_received_is_never_reused(kind):
    """A slow consumer: before taking each batch, the main process waits until the worker
    has sent the next 12, so every batch waits in the queue while later ones are made."""
    PRODUCED.value = 0
    batches = 45
    loader = make_loader(kind, Samples(4 * batches), 1, batch_size=4, prefetch=12,
                         counting=True)
    seen = []
    for batch, stats in loader:
        wait_for_batches(min(len(seen) + 13, batches))
        check_batch(batch)
        seen.append(stats)
    assert len(seen) == batches
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
    loader = make_loader(kind, Samples(5 * 30), 1, batch_size=5, batchify_fn=keeps_views,
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
    loader = make_loader('mxnet', Samples(40), num_workers, batch_size=5,
                         thread_pool=thread_pool)
    seen = receive_all(loader, 2, check_batch)
    assert all(stats['allocated'] == stats['segments'] == 0 for stats in seen)
    assert memory.get_recycling()


def _train_at_home(results):
    """A training process started by multiprocessing, batching in-process."""
    seen = []
    for num_workers, thread_pool in ((0, False), (2, True)):
        loader = make_loader('mxnet', Samples(40), num_workers, batch_size=5,
                             thread_pool=thread_pool)
        seen += receive_all(loader, 2, check_batch)
    results.put([stats['allocated'] for stats in seen])


def test_a_training_process_started_by_multiprocessing_allocates_fresh_memory():
    """Started by multiprocessing, as one training process per device often is, it sends
    no batches anywhere, so it does not recycle."""
    context = multiprocessing.get_context('fork')
    results = context.Queue()
    trainer = context.Process(target=_train_at_home, args=(results,))
    trainer.start()
    allocated = results.get(timeout=TIMEOUT)
    trainer.join(TIMEOUT)
    assert trainer.exitcode == 0
    assert len(allocated) == 32 and not any(allocated)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_set_recycling_off_allocates_every_batch_fresh(num_workers):
    with memory.use_recycling(False):
        assert not memory.get_recycling()
        loader = make_loader('mxnet', Samples(40), num_workers, batch_size=5)
        seen = receive_all(loader, 2, check_batch)
    assert memory.get_recycling()
    assert all(stats['allocated'] == stats['segments'] == 0 for stats in seen)


def test_the_recycling_setting_is_checked():
    with pytest.raises(TypeError, match='recycling setting'):
        memory.set_recycling(1)
    assert memory.get_recycling()


def _collect_in_child():
    gc.collect()
    mx.nd.waitall()  # MXNet frees on its engine


class Uniform(mx.gluon.data.Dataset):
    """Sample i: its id and 32x48x48 float32 values i (288 KiB): every batch of one sample
    fits every segment."""

    def __len__(self):
        return 45

    def __getitem__(self, idx):
        return np.int64(idx), np.full((32, 48, 48), idx, np.float32)


def check_uniform(batch):
    ids, values = batch
    assert (values.asnumpy() == ids.asnumpy()[:, None, None, None]).all()


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_a_fork_while_a_dropped_batch_awaits_collection_changes_no_held_batch(kind):
    """The training process drops a batch inside a reference cycle, then forks (a new
    loader's workers, say) before collecting it. A child that collected its inherited copy
    would lower the count the worker relies on, and the worker would reuse segments the
    training process still holds."""
    loader = make_loader(kind, Uniform(), 1, batch_size=1, prefetch=1,
                         batchify_fn=Tuple(Stack(), Stack()))
    gc.disable()  # the cycle must still await collection when the child starts
    try:
        batches = iter(loader)
        for _ in range(3):  # a worker recycles once it has sent a batch
            next(batches)
        cycle = [next(batches)]
        cycle.append(cycle)
        next(batches)  # MXNet's loader holds a batch until the next one arrives
        del cycle
        child = multiprocessing.get_context('fork').Process(target=_collect_in_child)
        child.start()
        child.join(TIMEOUT)
        held = []
        for batch, _ in batches:
            held.append(batch)
            check_uniform(batch)
            if len(held) == 5:
                _collect_in_child()  # the training process collects the cycle
    finally:
        gc.enable()
    assert child.exitcode == 0
    for batch in held:
        check_uniform(batch)


# --------------------------------------------------------------------- b. bounds and leaks

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


ONE_PER_FIELD = Tuple(Stack(), Pad(pad_val=0))  # batches of one ManySizes sample


def check_sample(ids, values):
    np.testing.assert_array_equal(values.asnumpy()[0], ManySizes()[int(ids.asscalar())][1])


@pytest.mark.parametrize('kind', ['mxnet', 'pooled'])
def test_more_batches_in_flight_than_the_pool_keeps(kind):
    """One worker sends 80 batches before the main process takes the second: the pool stays
    within its bound by forgetting busy segments, and every batch arrives intact."""
    PRODUCED.value = 0
    loader = make_loader(kind, ManySizes(), 1, batch_size=1, prefetch=120,
                         batchify_fn=ONE_PER_FIELD, counting=True)
    seen = []
    for epoch in range(2):
        for (ids, values), stats in loader:
            if epoch == 0 and not seen:
                wait_for_batches(80)  # the worker runs ahead
            check_sample(ids, values)
            seen.append(stats)
    assert all(stats['segments'] <= stats['limit'] for stats in seen)
    assert max(stats['evicted'] for stats in seen) > 0
    assert max(stats['reused'] for stats in seen) > 0


def test_batches_sent_but_never_received_do_not_stop_recycling():
    """Breaking out of every epoch after two batches leaves the batches already sent
    unreceived: their segments stay busy for good, age out of the pool, and reuse goes on."""
    loader = make_loader('mxnet', Samples(60), 1, batch_size=3)
    seen = []
    for _ in range(30):
        for _, (batch, stats) in zip(range(2), loader):
            check_batch(batch)
            seen.append(stats)
    assert max(stats['segments'] for stats in seen) == seen[0]['limit']  # full of stuck ones
    # Of each epoch's four batches two are received: once the pool is full, about half
    # the outputs still go into reused segments.
    late, last = seen[-20], seen[-1]
    reused, allocated = last['reused'] - late['reused'], last['allocated'] - late['allocated']
    assert reused >= allocated / 2 > 0


class Growing(mx.gluon.data.Dataset):
    """Sample i has 16 + 4 i rows of 64x64 float32: every batch is larger than the last."""

    def __len__(self):
        return 60

    def __getitem__(self, idx):
        return np.int64(idx), np.full((16 + 4 * idx, 64, 64), idx, np.float32)


def test_segments_of_sizes_not_seen_again_are_dropped():
    loader = make_loader('mxnet', Growing(), 1, batch_size=1, prefetch=2,
                         batchify_fn=ONE_PER_FIELD, shuffle=False)
    seen = []
    for (ids, values), stats in loader:
        np.testing.assert_array_equal(values.asnumpy()[0], Growing()[int(ids.asscalar())][1])
        seen.append(stats)
    # About five batches are in flight; smaller free segments, never reusable, go.
    assert max(stats['segments'] for stats in seen) <= 12
    assert seen[-1]['evicted'] > 0


@pytest.mark.parametrize('kind', [pytest.param('mxnet', marks=pytest.mark.slow), 'pooled'])
def test_twenty_epochs_leave_nothing_behind(kind):
    """Once the loader is gone, this process holds none of the pipes, sockets and /dev/shm
    segments that appeared in its life (its workers, which held the pools, are gone)."""
    before = loader_handles()
    children = set(multiprocessing.active_children())
    loader = make_loader(kind, ManySizes(42), 2, batch_size=1, batchify_fn=ONE_PER_FIELD)
    workers = [p.pid for p in multiprocessing.active_children() if p not in children]
    assert len(workers) == 2
    worker_fds = [open_fds(worker) for worker in workers]
    seen = []
    for _ in range(20):
        for (ids, values), stats in loader:
            check_sample(ids, values)
            seen.append(stats)
    assert all(stats['segments'] <= stats['limit'] for stats in seen)
    assert max(stats['reused'] for stats in seen) > 0
    # A worker's descriptors: one per segment of its pool, and a few in flight.
    assert all(open_fds(worker) <= start + seen[0]['limit'] + 4
               for worker, start in zip(workers, worker_fds))
    assert loader_handles() - before  # the loader's own pipes, at least, while it lives
    del loader, ids, values  # and the last batch
    assert left_behind(before) == set()


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
    print(json.dumps([memory.get_recycling(), memory.recycling_unavailable(),
                      max(s['allocated'] for s in stats)]))
'''


def _report(result):
    return json.loads(result.stdout.splitlines()[-1])


def test_a_build_whose_counts_differ_turns_recycling_off():
    """Another MXNet build is simulated by an export that counts twice: the check at
    import sees it, recycling stays off (and says why), and batches are still right."""
    code = '''
        import logging, warnings
        logging.basicConfig(level=logging.DEBUG)
        import mxnet as mx
        export = mx.nd.NDArray._to_shared_mem

        def export_counting_twice(self):
            export(self)
            return export(self)

        mx.nd.NDArray._to_shared_mem = export_counting_twice
        from gluonbatch import memory
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            memory.set_recycling(True)
        print('warned:', caught[0].message)
    '''
    result = _run_python(code, AFTER_IMPORT)
    why = 'the shared count went [1, 3, 3, 2]'
    assert _report(result) == [False, why + ' (created, exported, mapped, mapping freed); '
                               'expected [1, 2, 2, 1]', 0]
    assert 'shared-memory recycling is off: ' + why in result.stderr
    assert 'warned: shared-memory recycling is unavailable: ' + why in result.stdout


def test_the_check_runs_when_first_needed_not_at_import():
    """Importing gluonbatch exports no shared memory (the check's first step), nor does a
    batch of the main process beyond its own array (reserving its pages); asking whether
    recycling is available runs the check, once, with the answer a check at import gave."""
    code = '''
        import json
        import mxnet as mx
        export = mx.nd.NDArray._to_shared_mem
        exports = []

        def recording_export(self):
            exports.append(list(self.shape))
            return export(self)

        mx.nd.NDArray._to_shared_mem = recording_export
        import gluonbatch, gluonbatch.batchify, gluonbatch.dataloader
        from gluonbatch import memory
        report = {'import': list(exports)}
        gluonbatch.Stack()([[1, 2], [3, 4]])
        report['batch'] = exports[len(report['import']):]
        report['unavailable'] = memory.recycling_unavailable()
        report['recycling'] = memory.get_recycling()
        report['check'] = exports[len(report['import']) + len(report['batch']):]
        print(json.dumps(report))
    '''
    report = _report(_run_python(code))
    assert report == {'import': [], 'batch': [[2, 2]], 'unavailable': None,
                      'recycling': True, 'check': [[4096]]}


@pytest.mark.parametrize('value,recycling', [('0', False),
                                             pytest.param('1', True, marks=pytest.mark.slow)])
def test_the_environment_variable_sets_recycling(value, recycling):
    enabled, unavailable, allocated = _report(_run_python(AFTER_IMPORT,
                                                          GLUONBATCH_RECYCLE=value))
    assert enabled == recycling and unavailable is None
    assert (allocated > 0) == recycling


def test_a_bad_environment_variable_is_named():
    result = subprocess.run([sys.executable, '-c', 'from gluonbatch import memory; '
                             'memory.get_recycling()'], text=True, capture_output=True,
                            env=dict(os.environ, GLUONBATCH_RECYCLE='yes'), timeout=300)
    assert result.returncode != 0
    assert 'ValueError: the environment variable GLUONBATCH_RECYCLE must be one of 1, 0' \
        in result.stderr


# ----------------------------------------------------------- the worker's heap, kept too

_REFAULTS_SCRIPT = """
import json, resource, sys
import mxnet as mx
import numpy as np
from gluonbatch import memory
from gluonbatch.batchify import Stack


def refaulted_pages():
    # minor faults to allocate, fill and free 48 MiB of 4 MiB arrays, the third time in a
    # row: a batch's intermediate images, freed together
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        arrays = [np.ones(1 << 19) for _ in range(12)]
        del arrays
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    return faults


class ReportsRefaults:
    def __call__(self, samples):
        return Stack()(samples), refaulted_pages()


class Images(mx.gluon.data.Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, idx):
        return np.full((64, 1024), idx, np.float32)  # 256 KiB: batches are recycled


runs = {}
for run in sys.argv[1:]:  # NUM_WORKERS:on|off, in turn
    num_workers, recycling = run.split(':')
    memory.set_recycling(recycling == 'on')
    loader = mx.gluon.data.DataLoader(Images(), batch_size=2, batchify_fn=ReportsRefaults(),
                                      num_workers=int(num_workers))
    runs[run] = [faults for _, faults in loader]
print(json.dumps(runs))
"""

#: The runs in the order one interpreter makes them: each worker is forked from a training
#: process that has not yet allocated large arrays itself (its own runs come last), so it
#: starts from glibc's own settings; the training process's third round of the first of its
#: runs is already the one measured, so its second run starts where that one ends.
REFAULT_RUNS = ['1:on', '1:off', '2:on', '2:off', '0:on', '0:off']


@pytest.fixture(scope='module')
def refaults():
    """``{'NUM_WORKERS:on|off': [faults of each batch's third round]}``, from one fresh
    interpreter, whose allocator starts from glibc's own settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith('MALLOC_')}
    result = subprocess.run([sys.executable, '-c', _REFAULTS_SCRIPT] + REFAULT_RUNS,
                            capture_output=True, text=True, env=env, timeout=TIMEOUT * 3)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_recycling_worker_keeps_the_memory_its_batches_free(num_workers, refaults):
    """12 MiB pages a 48 MiB round; kept, the third round faults in next to none of them.
    A worker keeps its heap once it recycles (from its second batch); the training process
    (num_workers=0) and a worker with recycling off are left as glibc makes them."""
    kept, unkept = refaults['%d:on' % num_workers], refaults['%d:off' % num_workers]
    assert len(kept) == len(unkept) == 6
    assert min(unkept) > 6000  # every round maps and faults its 12288 pages afresh
    if num_workers == 0:
        assert min(kept) > 6000
    else:
        assert max(kept[-2:]) < 1000
