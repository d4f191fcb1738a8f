"""Cases 10 to 12: recycled shared memory in DataLoader workers.

Each case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run a case.
"""
import gc
import operator
import os
import statistics

import gluoncv.data.batchify as gcv
import mxnet as mx
import numpy as np

from gluonbatch import batchify as gb
from gluonbatch.memory import use_recycling

from .cases_loader import WORKERS, FloorBatches, data_loader, floor_sources, loader_row
from .cases_rcnn import net_and_samples
from .harness import interleave, time_call
from .rows import SHARED, check_same, layout_fields, ratio_check, timing_fields

__all__ = ['case_loader_recycled', 'case_worker_batchify', 'case_rcnn_loader_recycled']

#: The contender name of gluonbatch with recycling turned off.
OFF = 'gluonbatch, recycling off'


class _Cycling(mx.gluon.data.Dataset):
    """``length`` samples that cycle through ``samples`` (made once, before the fork)."""

    def __init__(self, samples, length):
        self._samples = samples
        self._length = length

    def __len__(self):
        return self._length

    def __getitem__(self, idx):
        return self._samples[idx % len(self._samples)]


def _loaders(samples, length, batch_size, gb_fn, gcv_fn, layouts):
    """gluonbatch (recycling on and off), gluoncv and floor loaders over the same samples.

    The off loader's workers are forked inside ``use_recycling(False)`` and keep that
    setting; the others recycle (the default)."""
    data = _Cycling(samples, length)
    with use_recycling(False):
        off = data_loader(data, gb_fn, batch_size)
    return {'gluonbatch': data_loader(data, gb_fn, batch_size),
            'gluoncv': data_loader(data, gcv_fn, batch_size),
            'floor': data_loader(FloorBatches(floor_sources(layouts), batch_size),
                                 operator.itemgetter(0), batch_size),
            OFF: off}


def _on_off_checks(row, goals):
    """Report lines: gluonbatch against gluoncv and against itself with recycling off."""
    per_s = row['batches_per_s']
    return [
        ratio_check('batches/s gluonbatch / gluoncv', per_s['gluonbatch'] / per_s['gluoncv'],
                    goals[0]),
        ratio_check('batches/s recycling on / off', per_s['gluonbatch'] / per_s[OFF], goals[1]),
        ratio_check('loader gluonbatch / floor', row['ratios']['gluonbatch/floor']),
    ]


def _image_samples(rng, count, size):
    return [(rng.random((3, size, size), dtype=np.float32), np.float32(index))
            for index in range(count)]


def case_loader_recycled(rng, rounds, quick):
    """Case 10: batches/s of a 2-worker DataLoader whose batches are 100 MB.

    32 samples of a float32 image 3x512x512 and a float32 label, batch size 32,
    ``Tuple(Stack(), Stack())``; the consumer only waits for each batch.
    """
    count, size, batches = (8, 64, 4) if quick else (32, 512, 16)
    samples = _image_samples(rng, count, size)
    gb_fn, gcv_fn = gb.Tuple(gb.Stack(), gb.Stack()), gcv.Tuple(gcv.Stack(), gcv.Stack())
    layouts = [check_same('loader_recycled', gb_fn(samples), gcv_fn(samples))]
    loaders = _loaders(samples, count * batches, count, gb_fn, gcv_fn, layouts)
    row = loader_row('loader_recycled', 'Loader %d workers, B=%d x 3x%dx%d, recycled'
                     % (WORKERS, count, size, size), loaders, rounds, layouts * batches,
                     batches, warm_epochs=1 if quick else 3)
    del loaders
    gc.collect()
    row['checks'] = _on_off_checks(row, (('>=', 4), ('>=', 3)))
    return row


#: Worker processes that have sent a batch: a worker recycles from its second batch on.
_SENT = set()


class _TimedInWorker:
    """A batchify function that, in the worker, times the contenders on its samples.

    A worker's first batch is gluonbatch's, sent as usual (a worker recycles once it has
    sent a batch); on later batches it runs :func:`~benchmarks.harness.interleave`
    over gluonbatch's batchify (into recycled memory), gluoncv's, the fresh floor and a
    warm copy of the same bytes into a buffer the worker has written before, and returns
    ``(pid, (medians, times))``.
    """

    def __init__(self, gb_fn, gcv_fn, rounds):
        self._gb_fn, self._gcv_fn, self._rounds = gb_fn, gcv_fn, rounds

    def __call__(self, samples):
        if os.getpid() not in _SENT:
            _SENT.add(os.getpid())
            return os.getpid(), self._gb_fn(samples)
        images = [image for image, _ in samples]
        warm = np.empty((len(images),) + images[0].shape, images[0].dtype)
        sources = [np.ones(warm.shape, warm.dtype), np.ones(len(samples), np.float32)]

        def copy():
            for index, image in enumerate(images):
                warm[index] = image

        contenders = {'gluonbatch': lambda: time_call(lambda: self._gb_fn(samples)),
                      'gluoncv': lambda: time_call(lambda: self._gcv_fn(samples)),
                      'floor': lambda: time_call(
                          lambda: [mx.nd.array(src, ctx=SHARED) for src in sources]),
                      'warm copy': lambda: time_call(copy)}
        return os.getpid(), interleave(contenders, self._rounds)


def case_worker_batchify(rng, rounds, quick):
    """Case 11: the batchify of case 10 timed inside the DataLoader's 2 workers.

    Each worker times, interleaved, gluonbatch's batchify writing into recycled memory,
    gluoncv's, the fresh floor and a warm copy of the same bytes; the medians of the
    workers' medians are reported (``workers_timed`` says how many workers timed).
    """
    count, size = (8, 64) if quick else (32, 512)
    samples = _image_samples(rng, count, size)
    gb_fn, gcv_fn = gb.Tuple(gb.Stack(), gb.Stack()), gcv.Tuple(gcv.Stack(), gcv.Stack())
    layouts = [check_same('worker_batchify', gb_fn(samples), gcv_fn(samples))]
    # Two batches per worker: a quick first one each, then one timing run each (a worker
    # done with its first batch takes the next; a timing run lasts seconds).
    loader = data_loader(_Cycling(samples, count * 2 * WORKERS),
                         _TimedInWorker(gb_fn, gcv_fn, rounds), count)
    timed = [(pid, result) for pid, result in loader if isinstance(result[0], dict)]
    del loader
    gc.collect()
    results = [result for _, result in timed]
    # per contender: the median of the workers' medians, and of their times in each round
    medians = {name: statistics.median(medians[name] for medians, _ in results)
               for name in results[0][0]}
    times = {name: [statistics.median(round_times) for round_times in
                    zip(*(worker_times[name] for _, worker_times in results))]
             for name in results[0][1]}
    row = {'case': 'worker_batchify',
           'title': 'Worker batchify B=%d x 3x%dx%d, recycled' % (count, size, size),
           'rounds': rounds, 'workers_timed': len({pid for pid, _ in timed}),
           **layout_fields(layouts), **timing_fields(medians, times)}
    row['checks'] = [
        ratio_check('worker batchify / warm copy', medians['gluonbatch'] / medians['warm copy'],
                    ('<=', 1.5)),
        ratio_check('floor / worker batchify', medians['floor'] / medians['gluonbatch']),
        ratio_check('worker gluoncv / gluonbatch', row['ratios']['gluoncv/gluonbatch']),
    ]
    return row


def case_rcnn_loader_recycled(rng, rounds, quick):
    """Case 12: batches/s of a 2-worker DataLoader of Faster R-CNN training batches.

    16 images through gluoncv's FasterRCNN train transform (FPN, 600/1000), made before
    the workers start, batch size 4, ``FasterRCNNTrainBatchify(net, num_shards=2)``.
    """
    short, max_size, count = (200, 320, 8) if quick else (600, 1000, 16)
    net, samples = net_and_samples('faster_rcnn_fpn_resnet50_v1b_coco', True, short, max_size,
                                   rng, count)
    gb_fn = gb.FasterRCNNTrainBatchify(net, num_shards=2)
    gcv_fn = gcv.FasterRCNNTrainBatchify(net, num_shards=2)
    batch_size = 4
    layouts = [check_same('rcnn_loader_recycled', gb_fn(samples[start:start + batch_size]),
                          gcv_fn(samples[start:start + batch_size]))
               for start in range(0, count, batch_size)]
    loaders = _loaders(samples, count, batch_size, gb_fn, gcv_fn, layouts)
    row = loader_row('rcnn_loader_recycled', 'R-CNN FPN loader %d/%d, B=4, 2 devices'
                     % (short, max_size), loaders, rounds, layouts, len(layouts),
                     warm_epochs=1 if quick else 3)
    del loaders
    gc.collect()
    row['checks'] = _on_off_checks(row, (None, None))
    return row
