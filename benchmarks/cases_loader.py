"""Case 7: whole epochs of a 2-worker DataLoader with each contender as its batchify function.

The case function takes ``(rng, rounds, quick)`` and returns the case's row with its
checks. This module imports gluoncv: the runner imports it only to run the case.
"""
import functools
import gc
import operator

import gluoncv.data.batchify as gcv
import mxnet as mx
import numpy as np

from gluonbatch import batchify as gb

from .harness import interleave, time_epoch
from .rows import SHARED, check_same, layout_fields, ratio_check, timing_fields

__all__ = ['case_loader', 'FloorBatches', 'floor_sources', 'data_loader', 'loader_row']

#: Worker processes of the loader cases.
WORKERS = 2


class FloorBatches(mx.gluon.data.Dataset):
    """The loader floor's dataset: in the worker, sample ``b * batch_size`` is batch ``b``.

    That sample is the batch's outputs, made as the floor makes them (a fresh ``cpu_shared``
    array per output, written once from a source of its shape prepared before the workers
    fork); the other samples of the batch are None, and the batchify function,
    ``operator.itemgetter(0)``, returns the first sample.
    """

    def __init__(self, sources, batch_size):
        self._sources = sources
        self._batch_size = batch_size

    def __len__(self):
        return len(self._sources) * self._batch_size

    def __getitem__(self, idx):
        if idx % self._batch_size:
            return None
        batch_sources = self._sources[idx // self._batch_size]
        return tuple(mx.nd.array(src, ctx=SHARED) for src in batch_sources)


def floor_sources(layouts):
    """Sources for :class:`FloorBatches`, one list per batch layout; arrays of equal shape and
    dtype are made once (every batch of images has the same image shape)."""
    made = {}
    return [[made.setdefault((shape, dtype.str), np.ones(shape, dtype)) for shape, dtype in layout]
            for layout in layouts]


def data_loader(dataset, batchify_fn, batch_size):
    """A :data:`WORKERS`-worker DataLoader over ``dataset`` in order, keeping the last batch."""
    return mx.gluon.data.DataLoader(dataset, batch_size=batch_size, shuffle=False,
                                    last_batch='keep', batchify_fn=batchify_fn,
                                    num_workers=WORKERS)


def loader_row(case, title, loaders, rounds, layouts, batches, warm_epochs=1):
    """Time whole epochs of ``loaders`` (name -> loader, with 'gluonbatch', 'gluoncv' and
    'floor'), interleaved; the case's row without checks. The ``warm_epochs`` untimed epochs
    of each loader start the worker pools and touch the memory (recycling workers need a few
    to hold the segments of every batch they have in flight)."""
    for _ in range(warm_epochs - 1):  # interleave runs one more
        for ld in loaders.values():
            time_epoch(ld)
    medians, times = interleave({name: functools.partial(time_epoch, ld)
                                 for name, ld in loaders.items()}, rounds)
    return {
        'case': case, 'title': title, 'rounds': rounds,
        'unit': 'ms per batch; rounds are epochs of %d batches' % batches,
        **layout_fields(layouts),
        'batches_per_s': {name: 1.0 / seconds for name, seconds in medians.items()},
        **timing_fields(medians, times),
    }


def case_loader(rng, rounds, quick):
    """Case 7: batches/s of a 2-worker DataLoader, gluonbatch's batchify vs gluoncv's.

    256 detection-style samples (a float32 image 3x416x416 and 1..50 float32 box rows of 6),
    batch size 16, ``Tuple(Stack(), Pad(pad_val=-1))``; whole epochs, interleaved.
    """
    count, size, batch_size = (32, 64, 8) if quick else (256, 416, 16)
    samples = [(rng.random((3, size, size), dtype=np.float32),
                rng.random((int(rows), 6), dtype=np.float32))
               for rows in rng.integers(1, 51, size=count)]
    batches = [samples[start:start + batch_size] for start in range(0, count, batch_size)]
    gb_fn = gb.Tuple(gb.Stack(), gb.Pad(pad_val=-1))
    gcv_fn = gcv.Tuple(gcv.Stack(), gcv.Pad(pad_val=-1))
    layouts = [check_same('loader', gb_fn(batch), gcv_fn(batch)) for batch in batches]
    mx.nd.waitall()
    data = mx.gluon.data.SimpleDataset(samples)
    loaders = {'gluonbatch': data_loader(data, gb_fn, batch_size),
               'gluoncv': data_loader(data, gcv_fn, batch_size),
               'floor': data_loader(FloorBatches(floor_sources(layouts), batch_size),
                                    operator.itemgetter(0), batch_size)}
    row = loader_row('loader', 'Loader %d workers, %d x 3x%dx%d, B=%d'
                     % (WORKERS, count, size, size, batch_size), loaders, rounds, layouts,
                     len(batches))
    del loaders
    gc.collect()
    row['checks'] = [
        ratio_check('batches/s gluonbatch / gluoncv', row['ratios']['gluoncv/gluonbatch']),
        ratio_check('loader gluonbatch / floor', row['ratios']['gluonbatch/floor']),
        ratio_check('loader gluoncv / floor', row['ratios']['gluoncv/floor']),
    ]
    return row
