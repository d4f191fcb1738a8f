"""Seeded loading: every batch -- its samples, their order and their augmentations -- a
function of ``(seed, epoch, position)``, the same for any number of workers, devices or
ranks, and resumable at any batch.

- :class:`SeededBatchSampler`: the batches of sample keys (order, rank's share, epochs,
  ``state_dict`` / ``load_state_dict``); :class:`SeededBucketSampler` groups them by a
  key (R-CNN's aspect-ratio buckets);
- :class:`SeededDataset`: a dataset read with its generators seeded from each key, for
  ``mx.gluon.data.DataLoader``;
- the modules: ``sampler`` (:class:`SeededBatchSampler`), ``buckets``
  (:class:`SeededBucketSampler`), ``dataset`` (:class:`SeededDataset`), ``keys`` (the
  derivations themselves) and ``state`` (what a saved state may say, checked).

gluonbatch's loaders take ``seed=`` and build both themselves.

Examples
--------
>>> import mxnet as mx
>>> from gluonbatch.seeded import SeededBatchSampler, SeededDataset
>>> data = mx.gluon.data.SimpleDataset(list(range(10)))
>>> sampler = SeededBatchSampler(len(data), batch_size=4, seed=42)
>>> loader = mx.gluon.data.DataLoader(SeededDataset(data), batch_sampler=sampler)
>>> first = [batch.asnumpy().tolist() for batch in loader]
>>> sampler.load_state_dict({'epoch': 0, 'batch': 1})   # resume at the second batch
>>> [batch.asnumpy().tolist() for batch in loader] == first[1:]
True
"""
from .buckets import SeededBucketSampler
from .dataset import SeededDataset
from .keys import SampleKey
from .sampler import KeyBatch, SeededBatchSampler

__all__ = ['SeededBatchSampler', 'SeededBucketSampler', 'SeededDataset', 'SampleKey',
           'KeyBatch']
