"""Resuming seeded loaders: ``state_dict()`` is a few hundred bytes of JSON, and a loader
that loads it -- in another process, with other ``num_workers`` -- delivers exactly the
batches the uninterrupted run delivers next, at any batch, without reading or computing
the batches before it; a training loop killed with SIGKILL again and again and resumed
from its log each time consumes the uninterrupted run's batches, none lost, none repeated.

The loaders run SSD's train augmentation on small synthetic detection samples (from
``resume_child.py``, the killed training loop), so a batch's hash covers its samples'
order and their random draws.
"""
import copy
import gc
import io
import itertools
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import tempfile
import traceback
import warnings

import mxnet as mx
import numpy as np
import pytest

import resume_child
from gluonbatch.batchify import Pad, Stack, Tuple
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader
from gluonbatch.samplers.split import SplitSampler
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.seeded import SeededDataset
from resume_child import (BATCH_SIZE, SAMPLES, SEED, augmentation, batch_digest, dataset,
                          logged, samples)
from tiers import pairwise

#: Passes of the runs compared.
EPOCHS = 3
#: (num_workers of the run that saves, num_workers of the one that resumes).
WORKER_PAIRS = {'0to2': (0, 2), '2to1': (2, 1), '1to0': (1, 0)}
LAST_BATCHES = ['keep', 'discard', 'pad', 'rollover']
CHILD = str(pathlib.Path(resume_child.__file__).resolve())
ROOT = pathlib.Path(__file__).resolve().parents[1]


def make_loader(kind, last_batch, num_workers, seed=SEED):
    """A seeded DetectionDataLoader, or a RandomTransformDataLoader drawing one of two
    output sizes for every batch."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DetectionDataLoader is deprecated (as in gluoncv)
        if kind == 'detection':
            return DetectionDataLoader(dataset(), batch_size=BATCH_SIZE, shuffle=True,
                                       last_batch=last_batch, num_workers=num_workers,
                                       seed=seed)
        return RandomTransformDataLoader(
            [augmentation(16), augmentation(24)], samples(), interval=1,
            batch_size=BATCH_SIZE, shuffle=True, last_batch=last_batch,
            batchify_fn=Tuple(Stack(), Pad(pad_val=-1)), num_workers=num_workers, seed=seed)


def run(loader, passes):
    """``(digest, state_dict() once it was delivered, image side)`` of every batch of
    ``passes`` passes."""
    return [(batch_digest(batch), loader.state_dict(), batch[0].shape[-1])
            for _ in range(passes) for batch in loader]


def resumed_runs(loader, states, epochs):
    """For each state: the run of ``loader`` resumed from it to the end of ``epochs``."""
    for state in states:
        loader.load_state_dict(state)
        yield run(loader, epochs - state['epoch'])


@pytest.mark.parametrize(*pairwise(kind=['detection', 'random_transform'],
                                   last_batch=LAST_BATCHES, workers=WORKER_PAIRS))
def test_a_state_from_any_batch_resumes_with_the_batches_that_follow_it(kind, last_batch,
                                                                        workers):
    saving = make_loader(kind, last_batch, workers[0])
    start = saving.state_dict()
    reference = run(saving, EPOCHS)
    if kind == 'random_transform':  # batches of both sizes, each drawn again on resume
        assert {side for _, _, side in reference} == {16, 24}
    states = [start] + [state for _, state, _ in reference]
    for state in states:
        assert json.loads(json.dumps(state)) == state and len(json.dumps(state)) < 1024
    # every epoch's first batch (the state after a pass's last) and second (mid-epoch)
    chosen = sorted({min(delivered + step, len(states) - 1)
                     for delivered, state in enumerate(states) if state['batch'] == 0
                     for step in (0, 1)})
    assert len(chosen) >= 2 * EPOCHS
    resuming = make_loader(kind, last_batch, workers[1])
    rests = resumed_runs(resuming, [states[delivered] for delivered in chosen], EPOCHS)
    for delivered, rest in zip(chosen, rests):
        assert rest == reference[delivered:], (kind, last_batch, workers, delivered)


@pytest.mark.parametrize('last_batch', LAST_BATCHES)
def test_after_a_finished_pass_the_state_names_the_next_epochs_first_batch(last_batch):
    loader = make_loader('detection', last_batch, 0)
    assert (loader.state_dict()['epoch'], loader.state_dict()['batch']) == (0, 0)
    for epoch in range(EPOCHS):
        inside = [loader.state_dict() for _ in loader][-1]  # after the pass's last batch
        after = loader.state_dict()
        assert inside == after and (after['epoch'], after['batch']) == (epoch + 1, 0)


def test_set_epoch_starts_that_epoch_and_its_states_resume_within_it():
    uninterrupted = make_loader('detection', 'rollover', 0)
    run(uninterrupted, 2)
    third = run(uninterrupted, 1)
    loader = make_loader('detection', 'rollover', 2)
    loader.set_epoch(2)
    assert (loader.state_dict()['epoch'], loader.state_dict()['batch']) == (2, 0)
    batches = iter(loader)
    first = batch_digest(next(batches))
    state = loader.state_dict()
    batches.close()
    assert first == third[0][0] and (state['epoch'], state['batch']) == (2, 1)
    other = make_loader('detection', 'rollover', 1)
    other.load_state_dict(state)
    assert run(other, 1) == third[1:]


@pytest.mark.parametrize('workers', [(0, 2), (2, 1), (1, 0), ('threads', 0)],
                         ids=['0to2', '2to1', '1to0', 'threadsto0'])
def test_mxnets_dataloader_resumes_from_its_samplers_state_after(workers):
    def mxnet_loader(num_workers):
        sampler = SeededBatchSampler(SAMPLES, BATCH_SIZE, SEED, last_batch='rollover')
        threads = num_workers == 'threads'
        return sampler, mx.gluon.data.DataLoader(
            SeededDataset(dataset()), batch_sampler=sampler, thread_pool=threads,
            batchify_fn=Tuple(Stack(), Pad(pad_val=-1)),
            num_workers=2 if threads else num_workers)

    def passes(sampler, loader, count):
        return [(batch_digest(batch), sampler.state_after(number + 1))
                for _ in range(count) for number, batch in enumerate(loader)]

    sampler, loader = mxnet_loader(workers[0])
    reference = passes(sampler, loader, EPOCHS)
    sampler, loader = mxnet_loader(workers[1])
    for delivered, (_, state) in enumerate(reference):
        sampler.load_state_dict(json.loads(json.dumps(state)))
        assert len(loader) == sampler.batches_in(state['epoch'])
        assert passes(sampler, loader, EPOCHS - state['epoch']) == reference[delivered + 1:]


def test_a_state_resumes_on_another_number_of_ranks_with_the_same_global_batch():
    def ranks(num_parts):
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return [DetectionDataLoader(
                dataset(), batch_size=4 // num_parts, last_batch='rollover', seed=SEED,
                sampler=SplitSampler(SAMPLES, num_parts, part, shuffle=True))
                for part in range(num_parts)]

    def global_batches(loaders, passes):
        """Every global batch: each sample's image and unpadded boxes, ranks in order."""
        made = []
        for _ in range(passes):
            for batches in zip(*loaders):
                made.append([(image.tobytes(), boxes[boxes[:, 0] >= 0].tobytes())
                             for images, labels in batches
                             for image, boxes in zip(images.asnumpy(), labels.asnumpy())])
        return made

    reference = global_batches(ranks(2), 1)
    assert reference == global_batches(ranks(1), 1)
    two = ranks(2)
    batches = [iter(loader) for loader in two]
    for rank_batches in batches:
        next(rank_batches)
    states = [loader.state_dict() for loader in two]
    assert states[0] == states[1]
    one = ranks(1)
    one[0].load_state_dict(states[0])
    assert global_batches(one, 1) == reference[1:]
    again = ranks(2)
    for loader in again:
        loader.load_state_dict(states[0])
    assert global_batches(again, 1) == reference[1:]


class CountingReads(mx.gluon.data.Dataset):
    """Samples ``float32([index])``; remembers every index read (in this process)."""

    def __init__(self, length):
        self.length, self.read = length, []

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        self.read.append(index)
        return np.array([index], np.float32)


def python_calls(action):
    """How many Python function calls ``action()`` makes (generators resumed included)."""
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(1) if event == 'call' else None)
    try:
        action()
    finally:
        sys.setprofile(None)
    return len(calls)


def first_batch_from(loader, state):
    """Load ``state`` and take the first batch of the next pass, closing the pass."""
    loader.load_state_dict(state)
    batches = iter(loader)
    batch = next(batches)
    batches.close()
    return batch


@pytest.mark.parametrize('last_batch', ['discard', 'rollover'])
def test_resuming_reads_and_computes_only_the_batches_from_there(last_batch):
    length, batch_size = 10000, 32
    reference = SeededBatchSampler(length, batch_size, SEED, last_batch=last_batch)
    count = reference.batches_in(1)
    loaders, calls = {}, {}
    for number in (0, count // 2, count - 1):
        data = CountingReads(length)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            loader = DetectionDataLoader(data, batch_size=batch_size, shuffle=True,
                                         last_batch=last_batch, batchify_fn=Stack(), seed=SEED)
        state = dict(loader.state_dict(), epoch=1, batch=number)
        first_batch_from(loader, state)  # the epochs' orders computed, as for any batch
        data.read.clear()
        loaders[number] = loader, data
        batch = []
        calls[number] = python_calls(lambda: batch.append(first_batch_from(loader, state)))
        want = [key.index for key in reference.batch(1, number)]
        assert data.read == want == batch[0].asnumpy().ravel().astype(int).tolist()
    # The same work at the first, middle and last batch, within a few calls (of branches
    # taken or not): a replay would make a call or more per batch skipped, hundreds here.
    assert max(calls.values()) - min(calls.values()) <= 10, calls
    loader, data = loaders[count // 2]
    data.read.clear()
    loader.load_state_dict(dict(loader.state_dict(), epoch=1, batch=count - 3))
    rest = [batch.asnumpy().ravel().astype(int).tolist() for batch in loader]
    assert data.read == sum(rest, []) == [key.index for number in range(count - 3, count)
                                          for key in reference.batch(1, number)]


def _edited(**changes):
    return lambda state: dict(state, **changes)


def _without(key):
    return lambda state: {name: value for name, value in state.items() if name != key}


#: A bad state, made from a good one, and what loading it raises.
BAD_STATES = {
    'a list': (lambda state: list(state.items()), TypeError, 'state must be the dict'),
    'json text': (json.dumps, TypeError, 'got str'),
    'no batch': (_without('batch'), ValueError, 'state lacks batch'),
    'no seed': (_without('seed'), ValueError, 'state lacks seed'),
    'other format': (_edited(format='gluonbatch.loader/0'), ValueError,
                     "format 'gluonbatch.loader/0'"),
    'other seed': (_edited(seed=SEED + 1), ValueError, "state['seed'] is %d" % (SEED + 1)),
    'seed as text': (_edited(seed=str(SEED)), TypeError, "state['seed'] must be an integer"),
    'seed too large': (_edited(seed=2 ** 64), ValueError, "state['seed'] must be an integer in"),
    'other length': (_edited(length=SAMPLES + 1), ValueError, "state['length'] is 11"),
    'other global batch': (_edited(global_batch_size=4), ValueError,
                           "state['global_batch_size'] is 4"),
    'unshuffled': (_edited(shuffle=False), ValueError, "state['shuffle'] is False"),
    'shuffle as text': (_edited(shuffle='yes'), TypeError, "state['shuffle'] must be True or"),
    'other last batch': (_edited(last_batch='keep'), ValueError,
                         "state['last_batch'] is 'keep'"),
    'unknown last batch': (_edited(last_batch='drop'), ValueError,
                           "state['last_batch'] must be one of keep, discard, pad, rollover"),
    'batch beyond the epoch': (_edited(epoch=1, batch=5), ValueError,
                               "state['batch'] is 5, but epoch 1 has 3 batches"),
    'negative batch': (_edited(batch=-1), ValueError, "state['batch'] must be an integer >= 0"),
    'epoch as float': (_edited(epoch=1.0), TypeError, "state['epoch'] must be an integer"),
}


@pytest.mark.parametrize('name', BAD_STATES)
def test_a_bad_state_raises_naming_what_is_wrong_and_changes_nothing(name):
    make_bad, error, message = BAD_STATES[name]
    loader = make_loader('detection', 'rollover', 0)
    batches = iter(loader)
    next(batches)
    batches.close()
    before = loader.state_dict()  # epoch 1, after the broken-off pass
    bad = make_bad(copy.deepcopy(before))
    kept = copy.deepcopy(bad)
    with pytest.raises(error, match=re.escape(message)):
        loader.load_state_dict(bad)
    assert bad == kept and loader.state_dict() == before


def test_an_unseeded_loader_has_no_state():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loader = DetectionDataLoader(dataset(), batch_size=BATCH_SIZE)
    for method, args in (('state_dict', ()), ('load_state_dict', ({},))):
        with pytest.raises(ValueError, match=r'%s\(\) needs a seeded loader \(seed=' % method):
            getattr(loader, method)(*args)


def test_the_samplers_state_after_counts_from_where_its_pass_began():
    sampler = SeededBatchSampler(SAMPLES, BATCH_SIZE, SEED, last_batch='pad')
    with pytest.raises(ValueError, match='no pass has begun'):
        sampler.state_after(0)
    sampler.load_state_dict({'epoch': 2, 'batch': 1})
    assert len(sampler) == 4
    batches = iter(sampler)
    assert [(sampler.state_after(n)['epoch'], sampler.state_after(n)['batch'])
            for n in range(4)] == [(2, 1), (2, 2), (2, 3), (3, 0)]
    with pytest.raises(ValueError, match='delivered is 4, but the pass of epoch 2 began at '
                                         'batch 1 of 4: it delivers at most 3'):
        sampler.state_after(4)
    with pytest.raises(TypeError, match='delivered must be an integer'):
        sampler.state_after(1.0)
    assert len(list(batches)) == 3


def test_a_sampler_checks_what_a_state_says_of_its_sampler():
    one = SeededBatchSampler(SAMPLES, 3, SEED, last_batch='pad')
    one.load_state_dict({'epoch': 1, 'batch': 2})
    state = one.state_dict()
    rank = SeededBatchSampler(SAMPLES, 1, SEED, last_batch='pad', num_parts=3, part_index=1)
    rank.load_state_dict(state)  # the same global batch on three ranks
    assert rank.state_dict() == state
    other = SeededBatchSampler(SAMPLES, 2, SEED, last_batch='pad')
    with pytest.raises(ValueError, match=re.escape(
            "state['global_batch_size'] is 3, but this sampler's global_batch_size is 2")):
        other.load_state_dict(state)
    assert (other.state_dict()['epoch'], other.state_dict()['batch']) == (0, 0)


class Huge(mx.gluon.data.Dataset):
    """A dataset of a trillion samples (none of which is read)."""

    def __len__(self):
        return 10 ** 12


def test_a_state_is_small_json_whatever_its_numbers():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        loader = DetectionDataLoader(Huge(), batch_size=4096, last_batch='rollover',
                                     seed=2 ** 64 - 1)
    loader.set_epoch(10 ** 9)
    state = loader.state_dict()
    assert (state['seed'], state['epoch'], state['length']) == (2 ** 64 - 1, 10 ** 9, 10 ** 12)
    assert json.loads(json.dumps(state)) == state and len(json.dumps(state)) < 1024


# --------------------------------------------------------------------------- SIGKILL

#: Lines the log of the killed runs reaches; kills come after 1 to MAX_GAP new lines each.
STEPS, MAX_GAP = 48, 4
#: The num_workers of successive starts of the training loop.
WORKER_CYCLE = (2, 0, 1)


class ForkedLoop:
    """The training loop in a fork of this process, its ``step N`` lines on a pipe."""

    def __init__(self, log, num_workers, steps, tmp):
        read, write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child never returns into the test run
            code = 1
            try:
                os.close(read)
                gc.freeze()  # MXNet's DataLoader collects as it starts: not the test run's heap
                tempfile.tempdir = tmp  # what multiprocessing leaves behind, if anything
                with os.fdopen(write, 'w') as out:
                    try:
                        resume_child.train(log, num_workers, steps, out)
                        code = 0
                    except BaseException:
                        traceback.print_exc(file=out)
            finally:
                os._exit(code)
        os.close(write)
        self.lines = os.fdopen(read)

    def kill(self):
        os.kill(self.pid, signal.SIGKILL)

    def wait(self):
        """The exit code (minus the signal that ended it); the rest of its output."""
        code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        rest = self.lines.read()
        self.lines.close()
        return code, rest


class FreshLoop:
    """The training loop as ``python resume_child.py`` in a fresh interpreter."""

    def __init__(self, log, num_workers, steps, tmp):
        paths = [str(ROOT)] + [path for path in os.environ.get('PYTHONPATH', '').split(
            os.pathsep) if path]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), TMPDIR=tmp)
        self.errors = tempfile.TemporaryFile(dir=tmp)
        self.process = subprocess.Popen(
            [sys.executable, CHILD, log, str(num_workers), str(steps)], env=env, text=True,
            stdout=subprocess.PIPE, stderr=self.errors)
        self.lines = self.process.stdout

    def kill(self):
        self.process.kill()

    def wait(self):
        code = self.process.wait()
        rest = self.lines.read()
        self.lines.close()
        self.errors.seek(0)
        rest += self.errors.read().decode(errors='replace')
        self.errors.close()
        return code, rest


def kill_and_resume(start, tmp_path, kills, seed):
    """Run the training loop to :data:`STEPS` batches, killing it with SIGKILL ``kills``
    times (each after a random 1 to :data:`MAX_GAP` of its steps) and starting it again
    each time, with the next of :data:`WORKER_CYCLE`; after the second kill, the log ends
    in a line cut short. The log's lines and each killed start's last step."""
    log, tmp = str(tmp_path / 'log'), str(tmp_path)
    rng = random.Random(seed)
    workers = itertools.cycle(WORKER_CYCLE)
    killed_after = []
    for kill in range(kills):
        loop = start(log, next(workers), STEPS, tmp)
        for _ in range(rng.randint(1, MAX_GAP)):
            line = loop.lines.readline()
            if not line.startswith('step '):
                loop.kill()
                raise AssertionError('the training loop stopped: %s%s' % (line, loop.wait()))
        loop.kill()
        code, _ = loop.wait()
        assert code == -signal.SIGKILL
        killed_after.append(int(line.split()[1]))
        if kill == 1:
            with open(log, 'rb') as handle:
                last = handle.read().splitlines()[-1]
            with open(log, 'ab') as handle:  # as if the kill cut the next write short
                handle.write(last[:len(last) // 2])
    loop = start(log, next(workers), STEPS, tmp)
    code, rest = loop.wait()
    assert code == 0, rest
    return logged(log), killed_after


def uninterrupted(tmp_path):
    log = str(tmp_path / 'uninterrupted')
    resume_child.train(log, 0, STEPS, io.StringIO())
    return logged(log)


def check_killed_run(run, killed_after, reference, kills):
    assert len(killed_after) == kills and killed_after == sorted(killed_after)
    assert killed_after[-1] < STEPS
    # None lost, none repeated: the batches the loop logged are the uninterrupted run's.
    assert [digest for digest, _ in run] == [digest for digest, _ in reference]
    assert [state for _, state in run] == [state for _, state in reference]
    assert len({state['epoch'] for _, state in run}) > 5  # the run crosses many epochs


def test_a_training_loop_killed_ten_times_consumes_the_uninterrupted_batches(tmp_path):
    run, killed_after = kill_and_resume(ForkedLoop, tmp_path, 10, seed=1)
    check_killed_run(run, killed_after, uninterrupted(tmp_path), 10)


@pytest.mark.slow  # fresh interpreters, ~2 s a start; the forked loop above is killed
def test_a_fresh_process_killed_four_times_consumes_the_uninterrupted_batches(tmp_path):
    # ten times every day: four kills here start each worker count of the cycle afresh
    run, killed_after = kill_and_resume(FreshLoop, tmp_path, 4, seed=2)
    check_killed_run(run, killed_after, uninterrupted(tmp_path), 4)
