"""Shutting down gluonbatch's loaders (DetectionDataLoader, RandomTransformDataLoader):
close(), the with block and garbage collection; what is left in the temp directory and
/dev/shm; passes left early whose batches are stuck; workers that die."""
import gc
import json
import multiprocessing
import multiprocessing.util
import os
import signal
import subprocess
import sys
import tempfile
import time
import warnings

import mxnet as mx
import numpy as np
import pytest

import gluonbatch
from gluonbatch.batchify import Stack
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader
from helpers import (half_made, mxnet_blocks, replacement_warnings, run_in_fork, settled,
                     shm_bytes)

LOADERS = ['detection', 'random']


class Samples(mx.gluon.data.Dataset):
    """Sample i: a 2-vector filled with i."""

    def __init__(self, length=8):
        self.main, self.length = os.getpid(), length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        return np.full(2, idx, 'float32')

    def in_worker(self):
        return os.getpid() != self.main


def make(which, dataset, **kwargs):
    """One of the two pooled loaders, batches of two, samples as they are."""
    if which == 'detection':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)  # deprecated, still supported
            return DetectionDataLoader(dataset, batch_size=2, batchify_fn=Stack(), **kwargs)
    return RandomTransformDataLoader([lambda x: x], dataset, batch_size=2,
                                     batchify_fn=Stack(), **kwargs)


def with_workers(which, dataset, **kwargs):
    """A loader, and its worker processes (``multiprocessing.Process`` objects)."""
    before = set(multiprocessing.active_children())
    loader = make(which, dataset, **kwargs)
    workers = [child for child in multiprocessing.active_children() if child not in before]
    assert len(workers) == kwargs.get('num_workers', 0)
    return loader, workers


def firsts(batches):
    return [batch.asnumpy()[:, 0].tolist() for batch in batches]


EVERY_BATCH = [[0, 1], [2, 3], [4, 5], [6, 7]]


def break_off(loader):
    """A pass broken off after its first batch, others in flight."""
    for batch in loader:
        assert firsts([batch]) == [[0, 1]]
        break


# --------------------------------------------------------------------------- close()

@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_close_stops_the_workers_gracefully_and_iterating_then_raises(which, num_workers):
    baseline = settled(lambda: shm_bytes([os.getpid()]))
    loader, workers = with_workers(which, Samples(), num_workers=num_workers)
    break_off(loader)
    assert firsts(loader) == EVERY_BATCH
    break_off(loader)
    loader.close()
    # They left on their own (a terminated worker's exit code is -15), and the batches
    # that were in flight hold no shared memory here.
    assert [worker.exitcode for worker in workers] == [0] * num_workers
    assert settled(lambda: shm_bytes([os.getpid()])) == baseline
    with pytest.raises(ValueError, match='is closed'):
        list(loader)
    loader.close()  # again: nothing happens
    with pytest.raises(ValueError, match='is closed'):
        next(iter(loader))


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_pass_running_when_the_loader_closes_raises_at_its_next_batch(num_workers):
    loader, workers = with_workers('detection', Samples(), num_workers=num_workers)
    batches = iter(loader)
    assert firsts([next(batches)]) == [[0, 1]]
    loader.close()
    assert [worker.exitcode for worker in workers] == [0] * num_workers
    with pytest.raises(ValueError, match='DetectionDataLoader is closed'):
        next(batches)


@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_with_block_closes_the_loader(which, num_workers):
    loader, workers = with_workers(which, Samples(), num_workers=num_workers)
    with loader as entered:
        assert entered is loader
        break_off(loader)
        assert firsts(loader) == EVERY_BATCH
    assert [worker.exitcode for worker in workers] == [0] * num_workers
    with pytest.raises(ValueError, match='is closed'):
        list(loader)
    with pytest.raises(ValueError, match='is closed'):
        with loader:
            pass


@pytest.mark.parametrize('num_workers', [1, 2])
def test_an_error_in_a_with_block_still_closes_the_loader(num_workers):
    loader, workers = with_workers('random', Samples(), num_workers=num_workers)
    with pytest.raises(KeyError):
        with loader:
            break_off(loader)
            raise KeyError('raised by the loop')
    assert [worker.exitcode for worker in workers] == [0] * num_workers


@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_garbage_collected_loader_stops_its_workers_gracefully(which, num_workers):
    loader, workers = with_workers(which, Samples(), num_workers=num_workers)
    break_off(loader)
    del loader
    gc.collect()
    assert [worker.exitcode for worker in workers] == [0] * num_workers


# --------------------------------------------------------------------------- leftovers

# A fresh interpreter whose temp directory is the test's own: loaders of every worker count
# are closed, left to the garbage collector, lose a worker, or stay open until the end.
LEFTOVERS = r"""
import gc, json, multiprocessing, os, sys, tempfile, warnings
import numpy as np, mxnet as mx
from gluonbatch.batchify import Stack
from gluonbatch.dataloader import DetectionDataLoader

class Samples(mx.gluon.data.Dataset):
    def __init__(self, exit_at=-1):
        self.main, self.exit_at = os.getpid(), exit_at
    def __len__(self):
        return 12
    def __getitem__(self, idx):
        if idx == self.exit_at and os.getpid() != self.main:
            os._exit(1)
        return np.full(4096, idx, 'float32')

warnings.simplefilter('ignore')
workers = []

def make(num_workers, exit_at=-1):
    before = set(multiprocessing.active_children())
    loader = DetectionDataLoader(Samples(exit_at), batch_size=2, batchify_fn=Stack(),
                                 num_workers=num_workers)
    workers.extend(p.pid for p in multiprocessing.active_children() if p not in before)
    return loader

def break_off(loader):
    for batch in loader:
        return

def in_temp_dir():
    found = []
    for root, dirs, files in os.walk(tempfile.gettempdir()):
        found.extend(os.path.relpath(os.path.join(root, name), tempfile.gettempdir())
                     for name in dirs + files)
    return sorted(found)

for num_workers in (0, 1, 2):
    loader = make(num_workers)
    break_off(loader)
    list(loader)
    break_off(loader)
    loader.close()
    with make(num_workers) as loader:
        break_off(loader)
    loader = make(num_workers)
    break_off(loader)
    del loader
    gc.collect()
closed = in_temp_dir()
dying = make(2, exit_at=5)
try:
    list(dying)
except RuntimeError:
    pass
dying.close()
left_open = make(2)
batches = iter(left_open)
next(batches)
# what a worker killed while MXNet makes a shared array leaves
open('/dev/shm/mx_%x_%x' % (workers[-1], 2 ** 40 + 1), 'wb').close()
print(json.dumps(dict(pid=os.getpid(), workers=workers, closed=closed)))
"""


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_workers_that_leave_gracefully_leave_nothing_in_the_temp_directory(
        num_workers, tmp_path, monkeypatch):
    # A worker that sent a batch listens on a socket in multiprocessing's temp directory,
    # which its exit handlers remove; a terminated worker's stayed.
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    own = multiprocessing.util.get_temp_dir()  # the workers' too (they inherit it)

    def entries():
        return set(os.listdir(tmp_path)), set(os.listdir(own))

    before = entries()
    loader, workers = with_workers('detection', Samples(), num_workers=num_workers)
    break_off(loader)
    loader.close()
    with make('random', Samples(), num_workers=num_workers) as loader:
        assert firsts(loader) == EVERY_BATCH
    loader, more = with_workers('detection', Samples(), num_workers=num_workers)
    break_off(loader)
    del loader
    gc.collect()
    assert entries() == before
    assert mxnet_blocks([worker.pid for worker in workers + more]) == []


@pytest.mark.slow  # a fresh interpreter, from start to exit; the test above is in-process
def test_nothing_is_left_in_the_temp_directory_or_dev_shm(tmp_path):
    # Each worker that sent a batch listens on a socket in multiprocessing's temp
    # directory; before, every worker terminated or killed left its own pymp-* directory
    # behind for good.
    temp = tmp_path / 'temp'
    temp.mkdir()
    source = os.path.dirname(os.path.dirname(gluonbatch.__file__))
    environment = dict(os.environ, TMPDIR=str(temp), PYTHONPATH=os.pathsep.join(
        [source] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]))
    result = subprocess.run([sys.executable, '-c', LEFTOVERS], capture_output=True,
                            text=True, env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert len(report['workers']) == 3 * (1 + 2) + 2 + 2
    # While the program ran, once its loaders were closed: at most the directory its
    # workers shared, empty.
    assert len(report['closed']) <= 1 and all(
        name.startswith('pymp-') for name in report['closed']), report['closed']
    # Once it ended: nothing, though one worker died and others were closed at exit, one of
    # them as if killed while making a shared array.
    assert sorted(os.listdir(temp)) == []
    assert mxnet_blocks([report['pid']] + report['workers']) == []


_KEPT = []  # what a child keeps alive until it exits


def _leave_a_loader_open(which, report):
    """In a multiprocessing child: a loader left open (and alive) as the child exits, one
    of its workers as if killed while making a shared array (see test_worker_deaths)."""
    loader, workers = with_workers(which, Samples(), num_workers=2)
    _KEPT.append(loader)
    next(iter(loader))
    pids = [worker.pid for worker in workers]
    half_made(pids[0])
    report.send(pids)


@pytest.mark.parametrize('which', LOADERS)
def test_a_loader_left_open_in_a_multiprocessing_child_is_closed_as_the_child_exits(which):
    # a child leaves through os._exit, not the interpreter's exit: multiprocessing's exit
    # handler runs the pool's finalizer before it would terminate the workers
    pids, exitcode = run_in_fork(_leave_a_loader_open, which)
    assert exitcode == 0
    assert all(gone(pid) for pid in pids)
    assert mxnet_blocks(pids) == []


def _close_a_copy(loader):
    loader.close()  # the copy a fork inherited


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_fork_closing_its_copy_of_a_loader_leaves_the_workers_to_their_process(
        num_workers):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with make('random', Samples(), num_workers=num_workers) as loader:
            assert firsts(loader) == EVERY_BATCH
            pids = loader.worker_pids
            child = multiprocessing.get_context('fork').Process(target=_close_a_copy,
                                                                args=(loader,))
            child.start()
            child.join()
            assert child.exitcode == 0
            assert loader.worker_pids == pids and not any(gone(pid) for pid in pids)
            assert firsts(loader) == EVERY_BATCH
    assert replacement_warnings(caught) == []


# --------------------------------------------------------------------------- stuck batches

class BlocksOnce(Samples):
    """In a worker process, sample ``block_at`` blocks the first time: it notes its worker's
    pid in ``blocked``, sets ``entered`` and waits for ``release`` (for two minutes at most,
    so that a loader waiting for it without limit fails the test rather than hang it);
    ``finished`` tells whether it stopped waiting.

    ``release`` is a semaphore, not an Event: setting an Event waits for every process
    waiting on it to wake, and the worker waiting on it is terminated."""

    def __init__(self, block_at, length=8):
        super().__init__(length)
        self.block_at = block_at
        self.entered, self.release = multiprocessing.Event(), multiprocessing.Semaphore(0)
        self.blocked = multiprocessing.Value('q', 0, lock=False)
        self.finished = multiprocessing.Value('q', 0, lock=False)

    def __getitem__(self, idx):
        if idx == self.block_at and self.in_worker() and not self.blocked.value:
            self.blocked.value = os.getpid()
            self.entered.set()
            self.release.acquire(timeout=120)
            self.finished.value = 1
        return super().__getitem__(idx)


def gone(pid):
    """Whether process ``pid`` has ended (a zombie, not yet reaped by the pool, has)."""
    try:
        with open('/proc/%d/stat' % pid) as stat:
            return stat.read().rpartition(')')[2].split()[0] in ('Z', 'X')
    except FileNotFoundError:
        return True


def check_stuck_batch_does_not_hold_up_the_next_pass(num_workers, timeout):
    dataset = BlocksOnce(block_at=2)  # batch 1, in flight when the pass breaks off
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = make('detection', dataset, num_workers=num_workers, timeout=timeout)
        try:
            with loader:
                break_off(loader)
                dataset.entered.wait()
                # Nobody waits for the stuck batch: the next passes deliver every batch,
                # its worker killed if the batches behind it are wanted.
                assert firsts(loader) == EVERY_BATCH
                assert firsts(loader) == EVERY_BATCH
                if num_workers == 1:
                    assert gone(dataset.blocked.value)
                assert not dataset.finished.value
        finally:
            dataset.release.release()
    # the stuck worker's: another test process may starve a healthy one for a second
    replaced = [said for said in replacement_warnings(caught)
                if 'process %d ' % dataset.blocked.value in said]
    assert len(replaced) <= 1 and all('stopped answering' in said for said in replaced)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_stuck_batch_of_a_pass_left_early_does_not_hold_up_the_next(num_workers):
    check_stuck_batch_does_not_hold_up_the_next_pass(num_workers, timeout=1)


@pytest.mark.slow  # waits the ten seconds' bound; the test above covers shorter ones
def test_a_stuck_batch_of_a_pass_left_early_is_given_up_without_timeout():
    # With timeout=None too, a batch nobody waits for is given up after ten seconds.
    check_stuck_batch_does_not_hold_up_the_next_pass(num_workers=1, timeout=None)


def test_closing_gives_up_a_stuck_batch():
    dataset = BlocksOnce(block_at=2)
    loader, workers = with_workers('random', dataset, num_workers=2, timeout=1)
    try:
        break_off(loader)
        dataset.entered.wait()
        loader.close()
        # The stuck worker could not leave on its own: it was killed, its batch
        # unfinished; the idle one left on its own.
        stuck = [worker for worker in workers if worker.pid == dataset.blocked.value]
        assert [worker.exitcode for worker in stuck] == [-signal.SIGKILL]
        assert all(worker.exitcode in (0, -signal.SIGKILL) for worker in workers)
        assert not dataset.finished.value
    finally:
        dataset.release.release()


# --------------------------------------------------------------------------- dead workers

class ExitsAt(Samples):
    """Sample ``exit_at`` ends the worker process loading it (``os._exit``), once, after
    noting its pid in ``exited``."""

    def __init__(self, exit_at, length=10):
        super().__init__(length)
        self.exit_at = multiprocessing.Value('q', exit_at, lock=False)
        self.exited = multiprocessing.Value('q', 0, lock=False)

    def __getitem__(self, idx):
        if idx == self.exit_at.value and self.in_worker():
            self.exit_at.value = -1
            self.exited.value = os.getpid()
            os._exit(1)
        return super().__getitem__(idx)


@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_worker_that_exits_is_replaced_and_named_with_the_batch_it_was_loading(which,
                                                                                 num_workers):
    dataset = ExitsAt(exit_at=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with make(which, dataset, num_workers=num_workers) as loader:
            assert firsts(loader) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    pid = dataset.exited.value
    assert pid > 0 and gone(pid)
    (said,) = replacement_warnings(caught)
    assert said.startswith('DataLoader worker process %d exited with code 1 while loading '
                           'dataset samples [4, 5]' % pid), said
