"""The worker pool of DetectionDataLoader and RandomTransformDataLoader (gluonbatch._pool),
exercised through those public loaders."""
import threading
import warnings

import mxnet as mx
import numpy as np
import pytest

from gluonbatch.batchify import Stack
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader


class Filled(mx.gluon.data.Dataset):
    """Sample i: a 2-vector filled with ``offset + i``; holds a lock, which cannot be pickled."""

    def __init__(self, offset, length=7):
        self.offset, self.length = offset, length
        self.lock = threading.Lock()

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        with self.lock:
            return np.full(2, self.offset + idx, 'float32')


def detection_loader(dataset, batchify_fn=Stack(), **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # deprecated, still supported
        return DetectionDataLoader(dataset, batchify_fn=batchify_fn, **kwargs)


def firsts(batches):
    return [batch.asnumpy()[:, 0].tolist() for batch in batches]


@pytest.mark.parametrize('num_workers', [1, 2])
def test_two_pools_at_once_keep_their_own_datasets(num_workers):
    # Each pool's workers hold their own loader's dataset and transform, even while the
    # other loader's workers run.
    tens = detection_loader(Filled(10), batch_size=3, num_workers=num_workers)
    hundreds = RandomTransformDataLoader([lambda x: -x], Filled(100), batch_size=2,
                                         num_workers=num_workers, last_batch='discard')
    pairs = list(zip(tens, hundreds))
    assert firsts(a for a, _ in pairs) == [[10, 11, 12], [13, 14, 15], [16]]
    assert firsts(b for _, b in pairs) == [[-100, -101], [-102, -103], [-104, -105]]


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_unpicklable_dataset_and_batchify_function(num_workers):
    # Nothing is pickled on the way to the workers: they inherit it.
    stack = Stack()
    loader = detection_loader(Filled(0, 5), lambda samples: stack(samples) * 2, batch_size=2,
                              num_workers=num_workers)
    assert firsts(loader) == [[0, 2], [4, 6], [8]]
    assert firsts(loader) == [[0, 2], [4, 6], [8]]  # a second pass reuses the pool
