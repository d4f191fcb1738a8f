"""Seeded loading: every batch -- its samples, their order and their augmentations -- a
function of ``(seed, epoch, position)``, the same for any number of workers, devices or
ranks, and resumable at any batch.

A seeded sampler (:class:`gluonbatch.samplers.SeededBatchSampler`) yields batches of
:class:`SampleKey`; :class:`SeededDataset` reads each with its generators seeded from the
key, for ``mx.gluon.data.DataLoader``. gluonbatch's loaders take ``seed=`` and build both
themselves.

Examples
--------
>>> import mxnet as mx
>>> from gluonbatch.samplers import SeededBatchSampler
>>> from gluonbatch.seeded import SeededDataset
>>> data = mx.gluon.data.SimpleDataset(list(range(10)))
>>> sampler = SeededBatchSampler(len(data), batch_size=4, seed=42)
>>> loader = mx.gluon.data.DataLoader(SeededDataset(data), batch_sampler=sampler)
>>> first = [batch.asnumpy().tolist() for batch in loader]
>>> sampler.load_state_dict({'epoch': 0, 'batch': 1})   # resume at the second batch
>>> [batch.asnumpy().tolist() for batch in loader] == first[1:]
True
"""
from .dataset import SeededDataset
from .keys import SampleKey

__all__ = ['SeededDataset', 'SampleKey']
