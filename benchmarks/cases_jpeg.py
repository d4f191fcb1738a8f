"""Cases ``jpeg_loader_ssd``, ``_yolo`` and ``_center_net``: training from JPEG files.

The bench writes VOC-like 500x375 JPEGs in gluoncv's layout
(:func:`~gluonbatch.detection.make_voc_example`) and times, in interleaved rounds, a
2-worker loader (batch 32, shuffled, the last batch kept) reading them, decode included:

- ``gluonbatch``: :class:`gluonbatch.DataLoader` (seeded; its workers run OpenCV on one
  thread) over :class:`gluonbatch.detection.gluoncv_datasets.VOCDetection` (libjpeg-turbo's
  decode with MXNet's pixels), gluonbatch's preset without targets, its image deferred to
  the batch, and the batchify function that computes the batch's targets;
- ``gluoncv``: gluoncv's ``VOCDetection``, preset (with its targets) and training script's
  batchify on MXNet's ``DataLoader``: what gluoncv's users run;
- ``floor``: decoding alone (the fast ``VOCDetection``, each sample reduced to its image's
  height) on the same :class:`gluonbatch.DataLoader`.

There is no column of gluonbatch's pipeline on MXNet's decode: it measured the JPEG path
against presets that have changed since.

After the contenders, in the same rounds, every kind measures the CPU time per image of a
1-worker :class:`gluonbatch.DataLoader` running the same pipeline, and of one decoding
alone (the floor's pipeline, 1 worker too): every process and thread counted (the worker
does all of a sample's work; this process only receives the batches), but not the
benchmark's reading of those counters (:func:`~benchmarks.cases_seeded.epoch_costs`). For
SSD300 a third 1-worker loader does the same work split into public steps and times each
in its worker (the thread's CPU time): ``decode`` (the dataset's item), ``draws``
(``preset.draw``), ``geometry`` (``preset.apply``: crop and resize, the image deferred),
``targets`` (``SSDTrainBatchify.targets``) and ``colour and batch write`` (the rest of
the batchify call: the deferred colour map and CHW split written into the batch's shared
memory, one pass). ``plumbing`` is the rest of that loader's CPU, every process counted:
keys and batches sent and received, the main process, MXNet's engine threads. The two
public steps check their inputs each, where the preset's call checks them once: that
loader spends a little more than the plain one.

Goals: SSD300 at least 900 images/s with 2 workers and at most 2.0 ms of CPU per image in
the 1-worker loader. YOLOv3 and CenterNet report their numbers without a goal (theirs is
relative to an earlier revision of gluonbatch, measured outside the bench).

The case functions take ``(rng, rounds, quick)`` and return the case's row with its checks.
This module imports gluoncv: the runner imports it only to run a case.
"""
import functools
import multiprocessing
import os
import shutil
import tempfile
import time

import mxnet as mx
import numpy as np

import gluonbatch.batchify as gb
from gluonbatch import DataLoader
from gluonbatch.detection import make_voc_example
from gluonbatch.detection.gluoncv_datasets import VOCDetection as FastVOCDetection
from gluonbatch.transforms.presets import global_generators

from .cases_loader import WORKERS
from .cases_seeded import epoch_costs
from .cases_transforms import (BATCH_SIZE, QUICK_LOADER, network_size, preset_pair,
                               script_batchify, seed_all, ssd_anchors, target_batchify,
                               untargeted_preset)
from .harness import interleave, time_epoch
from .rows import check_same, ms_fields, ratio_check, value_check

__all__ = ['case_jpeg_loader_ssd', 'case_jpeg_loader_yolo', 'case_jpeg_loader_center_net',
           'SSD_IMAGES_PER_S', 'SSD_ONE_WORKER_MS', 'STAGES']

#: The goals: SSD300 images/s (2 workers) and CPU ms per image of a 1-worker loader.
SSD_IMAGES_PER_S, SSD_ONE_WORKER_MS = 900.0, 2.0
#: Batches per epoch.
BATCHES = 4
#: The seed of the gluonbatch loaders.
SEED = 0
#: The stages of SSD's split, timed in a 1-worker loader's worker, in pipeline order.
STAGES = ('decode', 'draws', 'geometry', 'targets', 'colour and batch write')
#: The names of the measurements that follow the contenders in each round.
ONE_WORKER, DECODE_ONE_WORKER, SPLIT = 'one worker', 'decode, one worker', 'stages timed'


class _StageClock:
    """CPU seconds per stage of :data:`STAGES`, added in a loader's worker and read here:
    a shared array that the worker inherits as it forks."""

    def __init__(self):
        self._seconds = multiprocessing.RawArray('d', len(STAGES))

    def add(self, stage, seconds):
        self._seconds[STAGES.index(stage)] += seconds

    def read(self):
        return dict(zip(STAGES, self._seconds))


def _split_sample(preset, item, generators, clock=None):
    """``preset(*item)`` as its two public steps on ``generators``; with ``clock`` (a
    :class:`_StageClock`), each step's thread CPU seconds added to its stage."""
    image, label = item
    start = time.thread_time()
    drawn = preset.draw(image.shape, label, generators)
    middle = time.thread_time()
    sample = preset.apply(item, drawn, generators)
    if clock is not None:
        clock.add('draws', middle - start)
        clock.add('geometry', time.thread_time() - middle)
    return sample


class _TimedSamples(mx.gluon.data.Dataset):
    """``dataset``'s items through ``preset`` as :func:`_split_sample` splits it, the
    decode's thread CPU seconds added to ``clock`` too."""

    def __init__(self, dataset, preset, clock):
        self._dataset, self._preset, self._clock = dataset, preset, clock

    def __len__(self):
        return len(self._dataset)

    def __getitem__(self, index):
        start = time.thread_time()
        item = self._dataset[index]
        self._clock.add('decode', time.thread_time() - start)
        return _split_sample(self._preset, item, global_generators(), self._clock)


class _TimedSSDBatchify(gb.SSDTrainBatchify):
    """SSD's batchify function, its targets' thread CPU seconds and the rest's (the images'
    colour map and CHW writes) added to ``clock``."""

    def __init__(self, anchors, clock):
        super().__init__(anchors)
        self._clock, self._targets_seconds = clock, 0.0

    def targets(self, labels):
        start = time.thread_time()
        out = super().targets(labels)
        self._targets_seconds += time.thread_time() - start
        return out

    def __call__(self, data):
        start, self._targets_seconds = time.thread_time(), 0.0
        out = super().__call__(data)
        self._clock.add('targets', self._targets_seconds)
        self._clock.add('colour and batch write',
                        time.thread_time() - start - self._targets_seconds)
        return out


def _check_split(dataset, preset, batchify, batch_size):
    """Raise unless draw-then-apply on the global generators makes the batch a plain call
    of the preset makes, seeded alike: the stages time the loader's very work."""
    items = [dataset[index] for index in range(batch_size)]
    seed_all(3)
    plain = batchify([preset(*item) for item in items])
    seed_all(3)
    split = batchify([_split_sample(preset, item, global_generators()) for item in items])
    check_same('ssd preset, draw then apply', split, plain)


def _split_ms(loader, clock, batches, batch_size, stages, plumbing):
    """CPU ms per image of an epoch of ``loader`` (every process), whose worker adds its
    stages' seconds to ``clock``: each stage's ms per image appended to ``stages`` (name ->
    list), the rest to ``plumbing``."""
    before = clock.read()
    total = _cpu_ms_per_image(loader, batches, batch_size)
    spent = {name: (seconds - before[name]) / (batches * batch_size) * 1e3
             for name, seconds in clock.read().items()}
    for name in STAGES:
        stages.setdefault(name, []).append(spent[name])
    plumbing.append(total - sum(spent.values()))
    return total


def _height(image, label):
    """The floor's sample: the decoded image's height (next to nothing to send back)."""
    return image.shape[0]


def _cpu_ms_per_image(loader, batches, batch_size):
    """CPU ms per image of one epoch of ``loader``, every process and thread counted."""
    return epoch_costs(loader, batches, []) / batch_size * 1e3


def _jpeg_case(kind, rng, rounds, quick):
    from gluoncv.data import VOCDetection
    from gluoncv.data import batchify as gcv

    title, theirs, _, _ = preset_pair(kind, quick)
    batch_size, batches = QUICK_LOADER if quick else (BATCH_SIZE, BATCHES)
    count = batch_size * batches
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-jpeg-')
    ours = []  # gluonbatch's loaders, closed before their files go

    def loader(dataset, batchify_fn, workers=WORKERS):
        made = DataLoader(dataset, batch_size=batch_size, shuffle=True, last_batch='keep',
                          batchify_fn=batchify_fn, num_workers=workers, seed=SEED)
        ours.append(made)
        return made

    try:
        voc = make_voc_example(os.path.join(root, 'voc'), num_images=count,
                               splits=[(2007, 'trainval')], seed=int(rng.integers(2 ** 31)))
        fast = FastVOCDetection(voc, splits=[(2007, 'trainval')])
        files = VOCDetection(voc, splits=[(2007, 'trainval')])
        preset, batchify = untargeted_preset(kind, quick), target_batchify(kind, quick)
        if kind == 'ssd':
            _check_split(fast, preset, batchify, batch_size)
        loaders = {'gluonbatch': loader(fast.transform(preset), batchify),
                   'gluoncv': mx.gluon.data.DataLoader(
                       files.transform(theirs), batch_size=batch_size, shuffle=True,
                       last_batch='keep', batchify_fn=script_batchify(kind, gcv),
                       num_workers=WORKERS),
                   'floor': loader(fast.transform(_height), list)}
        # one worker does all of a sample's work: its CPU, every process counted
        follow = {ONE_WORKER: functools.partial(
                      _cpu_ms_per_image, loader(fast.transform(preset), batchify, 1),
                      batches, batch_size),
                  DECODE_ONE_WORKER: functools.partial(
                      _cpu_ms_per_image, loader(fast.transform(_height), list, 1),
                      batches, batch_size)}
        stages, plumbing = {}, []
        if kind == 'ssd':
            clock = _StageClock()
            timed = loader(_TimedSamples(fast, preset, clock),
                           _TimedSSDBatchify(ssd_anchors(*network_size(kind, quick)), clock), 1)
            follow[SPLIT] = functools.partial(_split_ms, timed, clock, batches, batch_size,
                                              stages, plumbing)
        medians, times = interleave({name: functools.partial(time_epoch, ld)
                                     for name, ld in loaders.items()}, rounds, follow)
        del loaders
    finally:
        for made in ours:
            made.close()
        shutil.rmtree(root, ignore_errors=True)
    extra = {name: medians.pop(name) for name in follow}
    times = {name: values for name, values in times.items() if name in medians}
    images_per_s = {name: batch_size / seconds for name, seconds in medians.items()}
    one_worker, decode = extra[ONE_WORKER], extra[DECODE_ONE_WORKER]
    row = {'case': 'jpeg_loader_' + kind, 'rounds': rounds,
           'title': '%s from JPEG files, %d-worker loader, B=%d'
                    % (title.split(' +')[0], WORKERS, batch_size),
           'unit': 'ms per batch; rounds are epochs of %d batches' % batches,
           'outputs': [], 'out_bytes': 0, 'images_per_s': images_per_s,
           'one_worker_cpu_ms': one_worker, 'decode_cpu_ms': decode,
           **ms_fields(medians, times)}
    row['ratios'] = {'gluoncv/gluonbatch': medians['gluoncv'] / medians['gluonbatch'],
                     'gluonbatch/floor': medians['gluonbatch'] / medians['floor'],
                     'gluoncv/floor': medians['gluoncv'] / medians['floor'],
                     'one worker/decode': one_worker / decode}
    row['checks'] = [ratio_check('%s from JPEG images/s vs gluoncv' % kind,
                                 row['ratios']['gluoncv/gluonbatch'])]
    if kind == 'ssd':
        row['split_cpu_ms'] = extra[SPLIT]
        # the first of each stage's values is the warm-up's
        row['stages_ms'] = {name: float(np.median(stages[name][1:])) for name in STAGES}
        row['plumbing_ms'] = float(np.median(plumbing[1:]))
        row['checks'] += [
            value_check('ssd from JPEG, 2 workers', images_per_s['gluonbatch'], 'rec/s',
                        ('>=', SSD_IMAGES_PER_S)),
            value_check('ssd from JPEG, CPU per image, 1 worker', one_worker, 'ms',
                        ('<=', SSD_ONE_WORKER_MS))]
    else:
        row['checks'].append(value_check('%s from JPEG, CPU per image, 1 worker' % kind,
                                         one_worker, 'ms'))
    return row


def case_jpeg_loader_ssd(rng, rounds, quick):
    """SSD300 from JPEG files: a 2-worker loader, decode included; CPU per image."""
    return _jpeg_case('ssd', rng, rounds, quick)


def case_jpeg_loader_yolo(rng, rounds, quick):
    """YOLOv3-416 from JPEG files: a 2-worker loader, decode included; CPU per image."""
    return _jpeg_case('yolo', rng, rounds, quick)


def case_jpeg_loader_center_net(rng, rounds, quick):
    """CenterNet-512 from JPEG files: a 2-worker loader, decode included; CPU per image."""
    return _jpeg_case('center_net', rng, rounds, quick)
