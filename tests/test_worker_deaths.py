"""gluonbatch.DataLoader survives its workers: killed, crashed or stopped workers are
replaced, their batches loaded again, and the stream a run sees does not change.

Kills come at seeded random points of the run; the states the campaign's timing cannot
promise (a worker busy, idle, with a batch sent but not received, the loader closing) are
reached through events, never through sleeps that must line up.
"""
import collections
import faulthandler
import gc
import hashlib
import multiprocessing
import os
import random
import re
import signal
import threading
import warnings

import mxnet as mx
import numpy as np
import pytest

from gluonbatch import DataLoader, Stack
from gluonbatch.dataloader.pool import STRIKES
from gluonbatch.samplers import SeededBatchSampler
from helpers import half_made, mxnet_blocks, replacement_warnings, run_in_fork

CTX = multiprocessing.get_context('fork')


class Noisy(mx.gluon.data.Dataset):
    """Samples that draw from numpy's generator: a seeded loader makes them again bit for
    bit, an unseeded one does not."""

    def __init__(self, length=40):
        self._length = length

    def __len__(self):
        return self._length

    def __getitem__(self, index):
        return (np.random.uniform(size=(2, 3)).astype('float32') + index).astype('float32')


def digests(loader, epochs, after_batch=None):
    """The SHA-256 of every batch of ``epochs`` passes; ``after_batch(epoch, number)`` runs
    after each batch is received."""
    out = []
    for epoch in range(epochs):
        for number, batch in enumerate(loader):
            out.append(hashlib.sha256(batch.asnumpy().tobytes()).hexdigest())
            if after_batch is not None:
                after_batch(epoch, number)
    return out


def reference(epochs, **kwargs):
    return digests(DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5, **kwargs), epochs)


def _children():
    """``(pid, state)`` of every child process of this one (zombies included)."""
    mine, left = os.getpid(), []
    for entry in os.listdir('/proc'):
        if entry.isdigit():
            try:
                with open('/proc/%s/stat' % entry) as handle:
                    fields = handle.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == mine:
                left.append((int(entry), fields[0]))
    return left


_before_test = set()


@pytest.fixture(autouse=True)
def _children_before():
    """The children this process had as the test began (other tests' clusters, say)."""
    _before_test.clear()
    _before_test.update(pid for pid, _ in _children())


def children_left():
    """Child processes started during the test that still exist (zombies included)."""
    return [(pid, state) for pid, state in _children() if pid not in _before_test]


def wait_until(predicate, what, limit=20000):
    """Poll ``predicate`` until it holds (a bounded number of looks, no timing assumed)."""
    for _ in range(limit):
        if predicate():
            return
        os.sched_yield()
        multiprocessing.connection.wait([], 0.001)
    raise AssertionError('never happened: %s' % what)


def idle(pid):
    """Whether worker ``pid`` waits for its next task (blocked reading its channel)."""
    try:
        with open('/proc/%d/wchan' % pid) as handle:
            return 'wait_for_more_packets' in handle.read()
    except OSError:
        return False


def campaign(num_workers, epochs, kills, seed, signals=(signal.SIGKILL,)):
    """Run ``epochs`` seeded passes, killing a random worker at random batches; the
    stream's digests, the pids killed, the loader's restarts and its replacement warnings.

    A kill comes only once the loader has seen the last one and delivered every batch that
    could be in flight since (more than ``prefetch + 1``): a batch lost twice would be a
    poison batch. The kills take ``signals`` in turn, so a short campaign sends each."""
    rng = random.Random(seed)
    loader = DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5, num_workers=num_workers,
                        max_restarts=10 ** 6)
    spacing = 2 * num_workers + 2  # the default prefetch, plus the batch awaited, plus one
    per_epoch, made, since = len(Noisy()) // 2, [], [0]

    def maybe_kill(epoch, number):
        since[0] += 1
        if loader.restarts < len(made):  # the last kill is not seen yet
            since[0] = 0
            return
        # a death is seen while the loader waits: none in the run's last batches
        last = epoch == epochs - 1 and number >= per_epoch - spacing
        if len(made) < kills and since[0] >= spacing and not last and rng.random() < 0.6:
            pid = rng.choice(loader.worker_pids)
            os.kill(pid, signals[len(made) % len(signals)])
            made.append(pid)
            since[0] = 0

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with loader:
            stream = digests(loader, epochs, maybe_kill)
            restarts = loader.restarts
    return stream, made, restarts, replacement_warnings(caught)


@pytest.mark.parametrize('num_workers', [1, 2, 4])
def test_a_small_kill_campaign_leaves_the_stream_unchanged(num_workers):
    stream, kills, restarts, replacements = campaign(num_workers, epochs=3, kills=4,
                                                     seed=num_workers)
    assert stream == reference(3)
    assert len(kills) >= 2 and restarts == len(kills) == len(replacements)
    # each kill is named once (two kills may be seen in either order)
    named = [int(said.split()[3]) for said in replacements]
    assert sorted(named) == sorted(kills)
    assert all('killed by signal 9 (SIGKILL)' in said for said in replacements)
    assert children_left() == [] and mxnet_blocks(kills) == []


#: signals whose default action ends the process, SIGKILL's that cannot be caught
CAMPAIGN_SIGNALS = (signal.SIGKILL, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP)


@pytest.mark.slow
def test_a_large_kill_campaign_leaves_the_stream_unchanged():
    # Ten epochs per worker count make some seventy kills in all (four workers, spaced
    # widest, the fewest), every signal at every count: more epochs repeat the same paths.
    want = reference(10)
    total = 0
    for num_workers in (1, 2, 4):
        stream, kills, restarts, replacements = campaign(
            num_workers, epochs=10, kills=40, seed=100 + num_workers, signals=CAMPAIGN_SIGNALS)
        assert stream == want
        assert restarts == len(kills) == len(replacements)
        said = collections.Counter(re.search(r'killed by signal \d+ \((\w+)\)', message)
                                   .group(1) for message in replacements)
        assert set(said) == {s.name for s in CAMPAIGN_SIGNALS}, said
        total += len(kills)
        assert mxnet_blocks(kills) == []  # whatever MXNet was making when they died
    assert total >= 40
    assert children_left() == []


class Gated(Noisy):
    """Sample ``index`` waits for :meth:`release` the first time it is read, after telling
    ``started`` (and its pid). The gate is a pipe, not an Event: setting an Event waits for
    its sleepers to wake, and a sleeper killed never does."""

    def __init__(self, index):
        super().__init__()
        self.index = index
        self.started = CTX.Event()
        self.pid = CTX.Value('i', 0)
        self._gate = os.pipe()

    def release(self):
        os.write(self._gate[1], b'go')

    def __getitem__(self, index):
        if index == self.index and not self.started.is_set():
            self.pid.value = os.getpid()
            self.started.set()
            multiprocessing.connection.wait([self._gate[0]], 60)
        return super().__getitem__(index)


def first_index():
    """The first dataset index of the second batch of epoch 0: a worker holds it from the
    pass's start."""
    return SeededBatchSampler(len(Noisy()), 2, seed=5).batch(0, 1)[0].index


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_busy_worker_killed_is_replaced_and_its_batch_loaded_again(num_workers):
    data = Gated(first_index())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(data, batch_size=2, shuffle=True, seed=5,
                        num_workers=num_workers) as loader:
            batches = iter(loader)
            first = [hashlib.sha256(next(batches).asnumpy().tobytes()).hexdigest()]
            assert data.started.wait(60)
            os.kill(data.pid.value, signal.SIGKILL)
            data.release()
            rest = [hashlib.sha256(b.asnumpy().tobytes()).hexdigest() for b in batches]
    assert first + rest == reference(1)
    (said,) = replacement_warnings(caught)
    assert 'process %d killed by signal 9' % data.pid.value in said
    assert str(data.index) in said
    assert children_left() == []


@pytest.mark.parametrize('num_workers', [1, 2])
def test_idle_workers_killed_between_passes_cost_nothing(num_workers):
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        with DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5,
                        num_workers=num_workers) as loader:
            stream = digests(loader, 1)
            for pid in loader.worker_pids:
                wait_until(lambda: idle(pid), 'worker %d idle' % pid)
                os.kill(pid, signal.SIGKILL)
            stream += digests(loader, 1)
            assert loader.restarts == num_workers
    assert stream == reference(2)


def test_a_batch_sent_by_a_worker_that_died_is_still_received():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5, num_workers=1,
                        prefetch=3) as loader:
            batches = iter(loader)
            stream = [hashlib.sha256(next(batches).asnumpy().tobytes()).hexdigest()]
            (pid,) = loader.worker_pids
            # It answered every task it holds and waits for more: its batches are sent.
            wait_until(lambda: idle(pid), 'the worker sent its batches')
            os.kill(pid, signal.SIGKILL)
            stream += [hashlib.sha256(b.asnumpy().tobytes()).hexdigest() for b in batches]
    assert stream == reference(1)
    (said,) = replacement_warnings(caught)
    # the batches it had sent were received, not loaded again (only one handed to it after
    # it died, before the loader saw it dead, may be)
    sampler = SeededBatchSampler(len(Noisy()), 2, seed=5)
    for number in (1, 2):
        assert str([key.index for key in sampler.batch(0, number)]) not in said


class DiesMakingAnArray(Noisy):
    """The first time a worker reads sample ``index``, it is killed while MXNet makes a
    shared array."""

    def __init__(self, index):
        super().__init__()
        self.index, self.died = index, CTX.Value('i', 0)

    def __getitem__(self, index):
        if index == self.index and not self.died.value:
            self.died.value = os.getpid()
            half_made(os.getpid())
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__getitem__(index)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_worker_killed_making_a_shared_array_leaves_no_file_in_dev_shm(num_workers):
    data = DiesMakingAnArray(first_index())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(data, batch_size=2, shuffle=True, seed=5,
                        num_workers=num_workers) as loader:
            assert digests(loader, 1) == reference(1)
            (said,) = replacement_warnings(caught)
            assert str(data.died.value) in said
            # removed as the worker was reaped, not as the loader closed
            assert mxnet_blocks([data.died.value]) == []


def _open_descriptors():
    """``{descriptor: what it is open on}`` of this process."""
    opened = {}
    for fd in os.listdir('/proc/self/fd'):
        try:
            opened[fd] = os.readlink('/proc/self/fd/' + fd)
        except OSError:  # the listing's own descriptor, closed since
            pass
    return opened


def _close_with_kills(num_workers, report):
    """Kill workers before and during ``close()``, then send through ``report`` what the
    loader left behind in this process: children, descriptors, ``/dev/shm`` files, and
    what iterating after ``close()`` raised."""
    data = Gated(first_index())
    fds = _open_descriptors()
    loader = DataLoader(data, batch_size=2, shuffle=True, seed=5, num_workers=num_workers)
    batches = iter(loader)
    next(batches)
    assert data.started.wait(60)
    gated = data.pid.value
    # MXNet's files of this process and its workers; the other files of /dev/shm are
    # other programs', the tests of another file running beside these among them
    makers = [os.getpid(), gated, *loader.worker_pids]
    shm = set(mxnet_blocks(makers))
    half_made(gated)  # it is killed while making a shared array
    for pid in loader.worker_pids:
        if pid != gated:
            os.kill(pid, signal.SIGKILL)  # dead before close(), not yet seen

    def kill_while_closing():
        # close() has begun once the loader lists no workers; the gated one is busy
        wait_until(lambda: loader.worker_pids == [], 'close() to begin')
        os.kill(gated, signal.SIGKILL)

    killer = threading.Thread(target=kill_while_closing)
    killer.start()
    loader.close()
    killer.join()
    data.release()
    del batches
    gc.collect()
    left = {'children': _children(),
            'descriptors': {fd: on for fd, on in _open_descriptors().items()
                            if fds.get(fd) != on},
            'shm': sorted(set(mxnet_blocks(makers)) - shm)}
    try:
        next(iter(loader))
    except ValueError as error:
        left['after close'] = str(error)
    report.send(left)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_killing_workers_during_close_leaves_nothing_behind(num_workers):
    # in a fresh process: the threads other tests leave behind (a Dask client's, say) are
    # not forked, so no descriptor they open is counted as the loader's
    left, exitcode = run_in_fork(_close_with_kills, num_workers)
    assert exitcode == 0
    assert left['children'] == []
    assert left['descriptors'] == {}
    assert left['shm'] == []
    assert 'closed' in left['after close']


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_stopped_worker_is_killed_after_timeout_and_replaced(num_workers):
    data = Gated(first_index())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(data, batch_size=2, shuffle=True, seed=5, num_workers=num_workers,
                        timeout=1) as loader:
            batches = iter(loader)
            stream = [hashlib.sha256(next(batches).asnumpy().tobytes()).hexdigest()]
            assert data.started.wait(60)
            os.kill(data.pid.value, signal.SIGSTOP)
            data.release()
            stream += [hashlib.sha256(b.asnumpy().tobytes()).hexdigest() for b in batches]
    assert stream == reference(1)
    # only the stopped worker's: another test process may starve a healthy one for a second
    (said,) = [said for said in replacement_warnings(caught)
               if 'process %d ' % data.pid.value in said]
    assert 'process %d stopped answering for 1 s' % data.pid.value in said
    assert children_left() == []


class Poison(Noisy):
    """Sample ``index`` kills the process that reads it, however often."""

    def __init__(self, index, how):
        super().__init__()
        self.index, self.how = index, how

    def __getitem__(self, index):
        if index == self.index:
            if self.how == 'exit':
                os._exit(3)
            if faulthandler.is_enabled():  # still first in line, but not into the log
                faulthandler.enable(open(os.devnull, 'w'))
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().__getitem__(index)


@pytest.mark.parametrize('num_workers', [1, 2])
# MXNet's own handler turns a segfault into exit code 255 unless faulthandler runs first;
# that handler calls exit(), whose clean-up in a crashed process may abort (SIGABRT: seen
# for both strikes in a loaded CI run)
@pytest.mark.parametrize('how, says', [('exit', r'exited with code 3'),
                                       ('segfault', r'killed by signal 11 \(SIGSEGV\)|'
                                                    r'exited with code 255|'
                                                    r'killed by signal 6 \(SIGABRT\)')])
def test_a_poison_sample_raises_naming_its_indices_pids_and_signals(num_workers, how, says):
    index = first_index()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(Poison(index, how), batch_size=2, shuffle=True, seed=5,
                        num_workers=num_workers) as loader:
            with pytest.raises(RuntimeError, match='poison') as raised:
                list(loader)
    message = str(raised.value)
    assert str(index) in message and len(re.findall(says, message)) == STRIKES, message
    pids = [int(pid) for pid in re.findall(r'process (\d+)', message)]  # any size: ids wrap
    assert len(set(pids)) >= STRIKES
    assert len(replacement_warnings(caught)) == STRIKES
    assert children_left() == []


def test_max_restarts_bounds_the_replacements():
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        with DataLoader(Noisy(), batch_size=2, num_workers=2, max_restarts=1) as loader:
            digests(loader, 1)
            for pid in loader.worker_pids:
                wait_until(lambda: idle(pid), 'worker idle')
                os.kill(pid, signal.SIGKILL)
            with pytest.raises(RuntimeError, match='max_restarts'):
                digests(loader, 1)
            with pytest.raises(RuntimeError, match='max_restarts'):
                digests(loader, 1)  # it stays refused, rather than hanging
    assert children_left() == []


@pytest.mark.parametrize('num_workers', [1, 2])
def test_an_unseeded_epoch_loses_no_sample_and_repeats_none(num_workers):
    rng, killed = random.Random(num_workers), []
    data = mx.gluon.data.SimpleDataset(list(range(30)))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter('always')
        with DataLoader(data, batch_size=2, shuffle=True, num_workers=num_workers,
                        batchify_fn=Stack()) as loader:
            for _ in range(2):
                seen = []
                for number, batch in enumerate(loader):
                    seen += batch.asnumpy().astype(int).tolist()
                    # once the last kill was seen, and its batches are delivered
                    if number % 7 == 3 and loader.restarts == len(killed):
                        killed.append(rng.choice(loader.worker_pids))
                        os.kill(killed[-1], signal.SIGKILL)
                assert sorted(seen) == list(range(30))
            assert loader.restarts >= 3


def test_a_replacement_forked_after_training_steps_loads_the_same_batches():
    """The training process has run real steps (MXNet's engine, autograd, a trainer) when
    the replacement is forked from it."""
    from mxnet import autograd, gluon
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, padding=1), gluon.nn.Activation('relu'),
            gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(2))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    class Images(Noisy):
        def __getitem__(self, index):  # MXNet's operators, in the worker
            image = mx.nd.array(super().__getitem__(index)).reshape((1, 2, 3)).tile((3, 2, 2))
            return mx.nd.contrib.BilinearResize2D(image.expand_dims(0), height=8,
                                                  width=8)[0].asnumpy()

    def run(kill):
        stream, losses, killed = [], [], []
        with warnings.catch_warnings(record=True):
            warnings.simplefilter('always')
            with DataLoader(Images(64), batch_size=4, shuffle=True, seed=9,
                            num_workers=2) as loader:
                for number, batch in enumerate(loader):
                    stream.append(hashlib.sha256(batch.asnumpy().tobytes()).hexdigest())
                    batch = batch.as_in_context(mx.cpu())
                    with autograd.record():
                        loss = loss_fn(net(batch), mx.nd.zeros(batch.shape[0]))
                    loss.backward()
                    trainer.step(batch.shape[0])
                    losses.append(float(loss.mean().asscalar()))
                    if kill and number in (2, 6):
                        pid = [pid for pid in loader.worker_pids if pid not in killed][0]
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                restarts = loader.restarts
        return stream, losses, restarts

    clean, _, _ = run(kill=False)
    healed, losses, restarts = run(kill=True)
    assert healed == clean
    assert restarts == 2
    assert all(np.isfinite(losses))
    assert children_left() == []


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_state_after_break_names_the_next_batch_of_the_same_epoch(num_workers):
    full = reference(2)
    with DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5,
                    num_workers=num_workers) as loader:
        for number, _ in enumerate(loader):
            if number == 3:
                break
        state = loader.state_dict()
        assert (state['epoch'], state['batch']) == (0, 4)
        # the next pass goes on where the last one stopped, as the state says
        assert digests(loader, 1) == full[4:20]
    resumed = DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5, num_workers=num_workers)
    resumed.load_state_dict(state)
    assert digests(resumed, 2) == full[4:20] + reference(2)[20:]
    resumed.close()


def test_counts_of_batches_survive_a_with_block_of_any_worker_count():
    counts = collections.Counter()
    for num_workers in (0, 1, 2):
        with DataLoader(Noisy(), batch_size=3, num_workers=num_workers,
                        last_batch='discard') as loader:
            counts[num_workers] = len(list(loader))
    assert set(counts.values()) == {len(Noisy()) // 3}


class Counted(Noisy):
    """Counts the samples read, in every process."""

    def __init__(self):
        super().__init__()
        self.read = CTX.Value('q', 0)

    def __getitem__(self, index):
        with self.read.get_lock():
            self.read.value += 1
        return super().__getitem__(index)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_no_more_than_prefetch_batches_wait_ahead_of_a_slow_consumer(num_workers):
    data, prefetch = Counted(), 3
    with DataLoader(data, batch_size=1, num_workers=num_workers, prefetch=prefetch) as loader:
        batches = iter(loader)
        for delivered in range(1, 12):
            next(batches)
            for pid in loader.worker_pids:  # every batch handed out is loaded
                wait_until(lambda: idle(pid), 'worker %d idle' % pid)
            # the batch awaited next, and prefetch more
            assert data.read.value <= delivered + prefetch + 1


@pytest.mark.parametrize('num_workers', [2, 4])
def test_workers_killed_together_cost_no_batch_a_strike_it_did_not_earn(num_workers):
    """The out-of-memory killer often takes several workers at once: each is replaced,
    and a batch handed to one dead worker is not struck for another's death."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with DataLoader(Noisy(), batch_size=2, shuffle=True, seed=5,
                        num_workers=num_workers) as loader:
            stream = digests(loader, 1)
            for pid in loader.worker_pids:  # all of them, idle between passes
                wait_until(lambda: idle(pid), 'worker %d idle' % pid)
            for pid in loader.worker_pids[:2]:
                os.kill(pid, signal.SIGKILL)
            stream += digests(loader, 1)
            busy = loader.worker_pids[:2]  # and two at once in the middle of a pass
            batches = iter(loader)
            stream.append(hashlib.sha256(next(batches).asnumpy().tobytes()).hexdigest())
            for pid in busy:
                os.kill(pid, signal.SIGKILL)
            stream += [hashlib.sha256(b.asnumpy().tobytes()).hexdigest() for b in batches]
            assert loader.restarts == 4
    assert stream == reference(3)
    assert len(replacement_warnings(caught)) == 4
    assert children_left() == []
