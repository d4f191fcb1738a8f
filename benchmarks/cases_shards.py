"""Case ``shards``: training from detection shards against training from the files.

A VOC-like dataset of real 500x375 JPEGs (2-8 boxes each) is written in gluoncv's layout
(:func:`~gluonbatch.detection.make_voc_example`) and converted to shards
(:func:`~gluonbatch.detection.from_voc`). Then, in the same interleaved rounds:

- ``gluonbatch``: the SSD300 training loader (gluonbatch's preset without targets and the
  batch's targets, 2 workers, batch 32) over :class:`~gluonbatch.detection.DetectionShards`
  in :class:`~gluonbatch.samplers.ShardWindowSampler`'s order;
- ``gluoncv``: the same loader over gluoncv's ``VOCDetection`` on the same files, shuffled;
- ``floor``: decoding alone, the same records from the shards, 2 workers.

The goal: the loader on shards gives at least as many images/s as on the files. The
workers keep both cores busy, so images/s are the inverse of the CPU seconds an epoch takes
in all the loader's processes; those are what the goal is checked on (the wall clock of a
round varies by 20% on a shared 2-core machine, its CPU seconds far less), and wall-clock
images/s are reported beside. Beside them,
once per round: every record read without decoding (``read_raw``, window order, one
process) against copying the shard files (the goal: at least half the copy's records/s),
and opening a dataset of 1,000 shards, converted the same way (the goal: 1 s at most).

The case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run the case.
"""
import functools
import itertools
import os
import shutil
import statistics
import tempfile
import time

import mxnet as mx

from gluonbatch.detection import DetectionShards, from_voc, make_voc_example
from gluonbatch.samplers import ShardWindowSampler

from .cases_loader import WORKERS
from .cases_seeded import epoch_costs
from .cases_webdataset import copy_files, raw_reads, write_and_remove
from .cases_transforms import BATCH_SIZE, QUICK_LOADER, target_batchify, untargeted_preset
from .harness import interleave
from .rows import ms_fields, ratio_check, value_check

__all__ = ['case_shards', 'LOADER_GOAL', 'READ_GOAL', 'OPEN_GOAL_MS', 'OPEN_SHARDS']

#: The goals: shards' images/s over the files'; raw records/s over the copy's; opening.
LOADER_GOAL, READ_GOAL, OPEN_GOAL_MS = 1.0, 0.5, 1000.0
#: Shards of the dataset whose opening is timed.
OPEN_SHARDS = 1000
#: Batches per epoch of the loaders, and shards per window of the sampler.
BATCHES, WINDOW = 12, 2


def _open(path):
    """Seconds to open the dataset at ``path`` and read its last record's label."""
    start = time.perf_counter()
    dataset = DetectionShards(path)
    dataset.annotations(len(dataset) - 1)
    elapsed = time.perf_counter() - start
    dataset.close()
    return elapsed


def _many_shards(root, count):
    """A dataset of ``count`` one-record shards, converted from small VOC-like images."""
    voc = make_voc_example(os.path.join(root, 'voc-many'), num_images=count,
                           splits=[(2007, 'trainval')], size=(48, 36), seed=1)
    return from_voc(voc, os.path.join(root, 'many'), splits=[(2007, 'trainval')],
                    samples_per_shard=1, progress=False)


def case_shards(rng, rounds, quick):
    """Detection shards: a training loader's images/s against the files, raw reads against
    a copy, and the time to open 1,000 shards."""
    from gluoncv.data import VOCDetection

    batch_size, batches = QUICK_LOADER if quick else (BATCH_SIZE, BATCHES)
    count, open_shards = batch_size * batches, 50 if quick else OPEN_SHARDS
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-shards-')
    try:
        voc = make_voc_example(os.path.join(root, 'voc'), num_images=count,
                               splits=[(2007, 'trainval')], seed=int(rng.integers(2 ** 31)))
        path = from_voc(voc, os.path.join(root, 'shards'), splits=[(2007, 'trainval')],
                        samples_per_shard=max(1, count // 8), progress=False)
        shards = DetectionShards(path)
        files = VOCDetection(root=voc, splits=[(2007, 'trainval')])
        preset, batchify = untargeted_preset('ssd', quick), target_batchify('ssd', quick)
        window = ShardWindowSampler(shards, window=WINDOW, seed=0)

        def loader(dataset, **options):
            options.setdefault('batchify_fn', batchify)
            return mx.gluon.data.DataLoader(dataset, batch_size=batch_size, last_batch='keep',
                                            num_workers=WORKERS, **options)

        loaders = {'gluonbatch': loader(shards.transform(preset), sampler=window),
                   'gluoncv': loader(files.transform(preset), shuffle=True),
                   # the decoded images' heights: the decode, and next to nothing sent back
                   'floor': loader(shards.transform(lambda image, label: image.shape[0]),
                                   sampler=window, batchify_fn=list)}
        order = window.indices(0).tolist()
        many = _many_shards(root, open_shards)
        copies = itertools.count()  # a fresh directory for every copy

        def copy():
            return write_and_remove(os.path.join(root, 'copy%d' % next(copies)),
                                    functools.partial(copy_files, shards.tar_files),
                                    make_dir=True)

        follow = {'read_raw': functools.partial(raw_reads, shards, order), 'copy': copy,
                  'open': functools.partial(_open, many)}
        walls = {name: [] for name in loaders}
        medians, times = interleave({name: functools.partial(epoch_costs, ld, batches,
                                                             walls[name])
                                     for name, ld in loaders.items()}, rounds, follow)
        del loaders
    finally:
        shutil.rmtree(root, ignore_errors=True)
    walls = {name: values[1:] for name, values in walls.items()}  # not the warm-up epoch
    extra = {name: medians.pop(name) for name in follow}
    times = {name: values for name, values in times.items() if name in medians}
    records_per_s = {'read_raw': count / extra['read_raw'], 'copy': count / extra['copy']}
    row = {'case': 'shards', 'rounds': rounds,
           'title': 'SSD300 from shards vs files, %d-worker loader, B=%d' % (WORKERS,
                                                                          batch_size),
           'unit': 'CPU ms per batch, all processes; rounds are epochs of %d batches'
                   % batches,
           'outputs': [], 'out_bytes': 0,
           'images_per_s': {name: batch_size / statistics.median(walls[contender])
                            for name, contender in (('shards', 'gluonbatch'),
                                                    ('files', 'gluoncv'),
                                                    ('decode only', 'floor'))},
           'records_per_s': records_per_s, 'open_ms': extra['open'] * 1e3,
           'open_shards': open_shards, **ms_fields(medians, times)}
    row['ratios'] = {'gluoncv/gluonbatch': medians['gluoncv'] / medians['gluonbatch'],
                     'gluonbatch/floor': medians['gluonbatch'] / medians['floor'],
                     'gluoncv/floor': medians['gluoncv'] / medians['floor']}
    row['checks'] = [
        ratio_check('images/s from shards / from files (CPU)',
                    row['ratios']['gluoncv/gluonbatch'], ('>=', LOADER_GOAL)),
        ratio_check('images/s from shards / from files (wall)',
                    row['images_per_s']['shards'] / row['images_per_s']['files']),
        ratio_check('raw records/s / copying the shards',
                    records_per_s['read_raw'] / records_per_s['copy'], ('>=', READ_GOAL)),
        value_check('open %d shards and read a record' % open_shards, row['open_ms'], 'ms',
                    ('<=', OPEN_GOAL_MS))]
    return row
