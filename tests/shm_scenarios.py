"""Oversized batches in a 16 MiB /dev/shm: run by test_memory.py inside a private mount
namespace. Prints one line per scenario: ``<name> <outcome>``."""
import os
import sys

import mxnet as mx
import numpy as np

import gluonbatch
from gluonbatch.batchify import Append, Pad, Stack, Tuple
from helpers import tiny_rcnn_net

BIG = [np.ones((3, 512, 512), np.float32) for _ in range(8)]  # 24 MiB of output
SMALL = [np.ones((3, 8, 8), np.float32) for _ in range(2)]


def tiny_rcnn():
    return gluonbatch.FasterRCNNTrainBatchify(tiny_rcnn_net())


def rcnn_samples(size):
    return [(np.ones((3, size, size), np.float32), np.zeros((1, 5), np.float32),
             [np.ones((2, 2, 1))], [np.ones((2, 2, 4))], [np.ones((2, 2, 4))])] * 4


SCENARIOS = {
    'stack': (Stack(), BIG, SMALL),
    'pad': (Pad(axis=(1, 2)), BIG, SMALL),
    'append': (Append(), BIG, SMALL),
    'tuple': (Tuple(Stack(), Stack()), [(b, b) for b in BIG], [(s, s) for s in SMALL]),
    'rcnn': (tiny_rcnn(), rcnn_samples(1024), rcnn_samples(32)),
    'collate': (gluonbatch.default_collate, [{'x': b} for b in BIG], [{'x': s} for s in SMALL]),
}


def outcome(call):
    try:
        call()
    except gluonbatch.SharedMemoryError as err:
        return 'SharedMemoryError' if 'docker run --shm-size' in str(err) else 'bad-message'
    except Exception as err:  # any other failure is reported, not hidden
        return 'other:%s' % type(err).__name__
    return 'ok'


def run_in_loader(fn, samples, num_workers):
    loader = mx.gluon.data.DataLoader(mx.gluon.data.SimpleDataset(samples),
                                      batch_size=len(samples), batchify_fn=fn,
                                      num_workers=num_workers, timeout=60)
    for batch in loader:
        del batch


def reservation_alone():
    """Without the free-space check, reserving the pages still refuses the batch: the
    mount claims plenty of room, and the output MXNet sizes past the real free space (which
    it allows) is reserved, never written."""
    real_statvfs = os.statvfs

    def roomy(path):
        stats = real_statvfs(path)
        return os.statvfs_result((stats.f_bsize, stats.f_frsize, 1 << 40, 1 << 40, 1 << 40)
                                 + tuple(stats)[5:])

    os.statvfs = roomy
    try:
        print('reserve main', outcome(lambda: Stack()(BIG)), flush=True)
    finally:
        os.statvfs = real_statvfs


def each_part_stacked(samples):
    """Batchify one sample of several arrays into one output per array, and the worker's
    recycling stats."""
    return tuple(Stack()([part]) for part in samples[0]), gluonbatch.memory.recycling_stats()


def recycled_then_larger():
    """In a worker, a batch of three 4 MiB outputs leaves three idle segments in its pool
    (12 of the 16 MiB); a 9 MiB output then fits only because the pool gives them back.

    A small batch comes first (a worker recycles once it has sent a batch) and between
    them (MXNet's DataLoader holds each batch until the next one arrives)."""
    four, nine, small = (np.ones(n, np.float32) for n in (1 << 20, 9 << 18, 4))
    data = mx.gluon.data.SimpleDataset([(small,), (four, four, four), (small,), (nine,)])
    loader = mx.gluon.data.DataLoader(data, batch_size=1, batchify_fn=each_part_stacked,
                                      num_workers=1, prefetch=0, timeout=60)
    sizes, stats = [], []

    def run():
        for parts, worker in loader:
            sizes.append(sum(part.size for part in parts) * 4 >> 20)
            stats.append(worker)
            del parts
            mx.nd.waitall()  # let go of before the next batch is made

    result = outcome(run)
    print('recycled workers', result if sizes == [0, 12, 0, 9] else 'sizes-%s-%s'
          % (sizes, result), flush=True)
    print('recycled pooled', stats[1]['allocated'] if len(stats) > 1 else None, flush=True)
    print('recycled released', stats[-1]['evicted'] if stats else None, flush=True)


def main(names):
    if 'reserve' in names:
        reservation_alone()
        names = [name for name in names if name != 'reserve']
    if 'recycled' in names:
        recycled_then_larger()
        names = [name for name in names if name != 'recycled']
    for name in names:
        fn, big, small = SCENARIOS[name]
        print(name, 'main', outcome(lambda: fn(big)), flush=True)
        print(name, 'main-after', outcome(lambda: fn(small)), flush=True)
        print(name, 'workers', outcome(lambda: run_in_loader(fn, big, 2)), flush=True)
        print(name, 'workers-after', outcome(lambda: run_in_loader(fn, small, 2)), flush=True)


if __name__ == '__main__':
    main(sys.argv[1:] or list(SCENARIOS) + ['reserve', 'recycled'])
