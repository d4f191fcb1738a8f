"""Cases ``seeded_loader`` and ``resume``: what seeded loading costs.

``seeded_loader``: SSD300 end to end, the pipeline of ``transforms_loader_ssd`` (VOC-like
JPEGs decoded in the workers, gluonbatch's train preset with its targets, the training
script's batchify; 2 workers, batch 32), seeded and unseeded, in the same interleaved
rounds: gluonbatch's loader (``DetectionDataLoader``, ``seed=0`` against ``seed=None``)
and MXNet's DataLoader (a :class:`~gluonbatch.seeded.SeededDataset` with a
:class:`~gluonbatch.samplers.SeededBatchSampler` against the plain dataset and
``batch_size``). The goal: seeding costs at most 2%. Measured as CPU seconds per batch of
all the loader's processes (every thread), the ratio of each round's seeded epoch to the
unseeded one of the same round, median over rounds; on a shared machine these ratios
still vary by several percent from round to round (and the augmentations an epoch draws
by about 2%), so the work seeding adds to a batch is also timed alone, in this process,
and set against the unseeded batch: the precise measure. Wall-clock images/s are reported
beside.

``resume``: a seeded loader over 10,000 samples (batch 32, no workers, small samples made
beforehand, so the loader's own work shows): ``load_state_dict`` and the first batch after
it, at the epoch's first batch and at its last (the goal: the same time, within 10%), and
``state_dict()`` during a pass (the goal: under 1 ms; its JSON's size is reported).

The case functions take ``(rng, rounds, quick)`` and return the case's row with its checks.
This module imports gluoncv (through the transforms cases): the runner imports it only to
run a case.
"""
import functools
import json
import os
import pickle
import resource
import statistics
import time
import warnings

import mxnet as mx
import numpy as np

from gluonbatch import batchify as gb
from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.seeded import SeededDataset
from gluonbatch.seeded.keys import read_seeded

from .cases_loader import WORKERS, data_loader
from .cases_transforms import BATCH_SIZE, QUICK_LOADER, preset_pair, script_batchify
from .harness import interleave, time_call, time_epoch
from .rows import ms_fields, percent_check, ratio_check, value_check
from .voc_like import VOCLike, voc_like_samples

__all__ = ['case_seeded_loader', 'case_resume', 'children_cpu_seconds', 'epoch_costs',
           'SEED', 'SEEDED_COST', 'SEEDING_PERCENT', 'RESUME_SAMPLES']

#: The seed of the seeded contenders.
SEED = 0
#: The goals: seeded time per batch over unseeded, and the work seeding adds to a batch
#: in percent of an unseeded batch's.
SEEDED_COST, SEEDING_PERCENT = 1.02, 2.0
#: Batches per epoch of the seeded loader case (more than ``transforms_loader_ssd``'s 4:
#: a 2% goal needs epochs whose start and end weigh little).
SEEDED_BATCHES = 8
#: Samples of the resume case's epoch, and the goals: resuming at the last batch over the
#: first; ``state_dict()`` in ms.
RESUME_SAMPLES, RESUME_COST, STATE_DICT_MS = 10000, 1.1, 1.0
#: ``state_dict()`` calls per timed round (one takes microseconds).
STATE_DICT_CALLS = 100


def _detection_loader(dataset, batchify, batch_size, seed):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DetectionDataLoader is deprecated, as in gluoncv
        return DetectionDataLoader(dataset, batch_size=batch_size, shuffle=False,
                                   last_batch='keep', batchify_fn=batchify,
                                   num_workers=WORKERS, seed=seed)


def _mxnet_seeded_loader(dataset, batchify, batch_size):
    sampler = SeededBatchSampler(len(dataset), batch_size, SEED, shuffle=False)
    return mx.gluon.data.DataLoader(SeededDataset(dataset), batch_sampler=sampler,
                                    batchify_fn=batchify, num_workers=WORKERS)


def _threads_cpu_seconds(pid):
    """CPU seconds every thread of process ``pid`` has run (scheduler nanoseconds)."""
    total = 0
    for task in os.listdir('/proc/%d/task' % pid):
        with open('/proc/%d/task/%s/schedstat' % (pid, task)) as handle:
            total += int(handle.read().split()[0])
    return total / 1e9


def _children(pid):
    """The child processes of ``pid``: from its threads' ``children`` lists (a few files,
    where scanning every process's ``stat`` costs milliseconds), else from that scan."""
    tasks = '/proc/%d/task' % pid
    found = set()
    try:
        for task in os.listdir(tasks):
            with open('%s/%s/children' % (tasks, task)) as handle:
                found.update(int(child) for child in handle.read().split())
        return tuple(found)
    except OSError:  # a kernel without the lists, or a thread gone meanwhile: scan
        pass
    for name in os.listdir('/proc'):
        try:
            with open('/proc/%s/stat' % name) as handle:
                if int(handle.read().rsplit(')', 1)[1].split()[1]) == pid:
                    found.add(int(name))
        except (OSError, ValueError, IndexError):  # not a process, gone, or not ours
            continue
    return tuple(found)


def children_cpu_seconds():
    """CPU seconds the child processes of this process (a loader's workers) have run, every
    thread counted (MXNet's engine threads too): the live ones' from ``/proc``, the reaped
    ones' from ``getrusage``, so that a child ending between two readings counts once.
    Linux only.

    >>> import subprocess, sys
    >>> before = children_cpu_seconds()
    >>> _ = subprocess.run([sys.executable, '-c', 'sum(range(10 ** 7))'], check=True)
    >>> children_cpu_seconds() > before
    True
    """
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = reaped.ru_utime + reaped.ru_stime
    for pid in _children(os.getpid()):
        try:
            total += _threads_cpu_seconds(pid)
        except (OSError, ValueError, IndexError):  # gone, or not ours to read
            continue
    return total


def epoch_costs(loader, batches, walls):
    """CPU seconds per batch of one epoch of ``loader``, all its processes counted; its
    wall seconds per batch appended to ``walls``.

    The children's counters are read outside this process's counted interval (before its
    start, after its end): reading them takes milliseconds when a run holds many loaders'
    workers, and that is the benchmark's work, not the loader's."""
    children = children_cpu_seconds()
    start = time.process_time()
    walls.append(time_epoch(loader))
    spent = time.process_time() - start
    return (spent + children_cpu_seconds() - children) / batches


def _seeding_cpu_per_batch(batch_size, batches=64):
    """CPU seconds of the work seeding adds to a batch, MXNet's engine threads included:
    its keys made and pickled to a worker, and each read with its generators seeded
    (:func:`~gluonbatch.seeded.keys.read_seeded`, of a dataset that costs nothing)."""
    sampler = SeededBatchSampler(batch_size * batches, batch_size, SEED)
    nothing = [None] * (batch_size * batches)
    start = time.process_time()
    for number in range(batches):
        for key in pickle.loads(pickle.dumps(sampler.batch(0, number))):
            read_seeded(nothing, key)
    mx.nd.waitall()
    return (time.process_time() - start) / batches


def _paired_ratio(times, name, other):
    """The median over rounds of ``name``'s time over ``other``'s in the same round."""
    return statistics.median(mine / theirs for mine, theirs in zip(times[name], times[other]))


def case_seeded_loader(rng, rounds, quick):
    """SSD300 end to end, seeded and unseeded: a 2-worker loader, batch 32."""
    title, _, ours, _ = preset_pair('ssd', quick)
    batch_size, batches = QUICK_LOADER if quick else (BATCH_SIZE, SEEDED_BATCHES)
    dataset = VOCLike(voc_like_samples(rng, batch_size * batches)).transform(ours)
    batchify = script_batchify('ssd', gb)
    loaders = {'gluonbatch': _detection_loader(dataset, batchify, batch_size, None),
               'seeded': _detection_loader(dataset, batchify, batch_size, SEED),
               'mxnet': data_loader(dataset, batchify, batch_size),
               'mxnet seeded': _mxnet_seeded_loader(dataset, batchify, batch_size)}
    walls = {name: [] for name in loaders}
    medians, times = interleave({name: functools.partial(epoch_costs, loader, batches,
                                                         walls[name])
                                 for name, loader in loaders.items()}, rounds)
    # Paired: each round's seeded epoch against the unseeded one of the same round (run
    # next to it), so what the machine's load does to every contender cancels.
    ratios = {'seeded/gluonbatch': _paired_ratio(times, 'seeded', 'gluonbatch'),
              'mxnet seeded/mxnet': _paired_ratio(times, 'mxnet seeded', 'mxnet')}
    seeding = statistics.median(_seeding_cpu_per_batch(batch_size) for _ in range(rounds))
    share = 100 * seeding / min(medians['gluonbatch'], medians['mxnet'])
    wall = {name: statistics.median(values[1:]) for name, values in walls.items()}
    return {'case': 'seeded_loader', 'rounds': rounds,
            'title': '%s, %d-worker loader, B=%d, seeded' % (title.split(' +')[0], WORKERS,
                                                             batch_size),
            'unit': 'CPU ms per batch (all processes); rounds are epochs of %d batches'
                    % batches,
            'outputs': [], 'out_bytes': 0,
            'images_per_s': {name: batch_size / seconds for name, seconds in wall.items()},
            'images_per_cpu_s': {name: batch_size / seconds
                                 for name, seconds in medians.items()},
            **ms_fields(medians, times), 'ratios': ratios, 'seeding_ms': seeding * 1e3,
            'checks': [ratio_check('SSD loader seeded / unseeded', ratios['seeded/gluonbatch'],
                                   ('<=', SEEDED_COST)),
                       ratio_check('MXNet loader seeded / unseeded',
                                   ratios['mxnet seeded/mxnet'], ('<=', SEEDED_COST)),
                       percent_check('seeding work / a batch', share,
                                     ('<=', SEEDING_PERCENT))]}


def _first_batch_from(loader, state):
    """Load ``state`` and take the first batch of the pass it starts (the pass closed)."""
    loader.load_state_dict(state)
    batches = iter(loader)
    batch = next(batches)
    batches.close()
    return batch


def _state_dicts(loader):
    """Seconds per ``loader.state_dict()`` (called during a pass)."""
    start = time.perf_counter()
    for _ in range(STATE_DICT_CALLS):
        loader.state_dict()
    return (time.perf_counter() - start) / STATE_DICT_CALLS


def case_resume(rng, rounds, quick):
    """Resuming a seeded loader at the first and the last batch of a 10,000-sample epoch,
    and ``state_dict()``."""
    samples = mx.gluon.data.SimpleDataset(
        [(rng.random((3, 8, 8), dtype=np.float32), rng.random((2, 6), dtype=np.float32))
         for _ in range(RESUME_SAMPLES)])

    def seeded_loader():
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return DetectionDataLoader(samples, batch_size=32, shuffle=True,
                                       last_batch='discard', seed=SEED)

    loader, live = seeded_loader(), seeded_loader()
    first = loader.state_dict()
    last = dict(first, batch=SeededBatchSampler(RESUME_SAMPLES, 32, SEED,
                                                last_batch='discard').batches_in(0) - 1)
    pass_under_way = iter(live)
    for _ in range(last['batch'] // 2):
        next(pass_under_way)
    medians, times = interleave(
        {'first batch': functools.partial(time_call, lambda: _first_batch_from(loader, first)),
         'last batch': functools.partial(time_call, lambda: _first_batch_from(loader, last))},
        rounds, follow={'state_dict': functools.partial(_state_dicts, live)})
    state_bytes = len(json.dumps(live.state_dict()))
    pass_under_way.close()
    ratios = {'last/first': medians['last batch'] / medians['first batch']}
    return {'case': 'resume', 'rounds': rounds,
            'title': 'Resume: %d samples, B=32, no workers' % RESUME_SAMPLES,
            'unit': 'ms: load_state_dict + the first batch; state_dict() per call',
            'outputs': [], 'out_bytes': 0, 'state_bytes': state_bytes,
            **ms_fields(medians, times), 'ratios': ratios,
            'checks': [ratio_check('resume at last / first batch', ratios['last/first'],
                                   ('<=', RESUME_COST)),
                       value_check('state_dict()', medians['state_dict'] * 1e3, 'ms',
                                   ('<=', STATE_DICT_MS))]}
