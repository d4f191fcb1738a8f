"""Epoch orders and the split of each epoch across ranks.

Every sampler here that splits data across ranks gives each rank the same number of samples,
by one rule (:func:`gluonbatch.samplers.split.part_of`).

Examples
--------
>>> from gluonbatch.samplers import SplitSampler
>>> [list(SplitSampler(6, num_parts=2, part_index=rank)) for rank in (0, 1)]
[[0, 1, 2], [3, 4, 5]]
"""
from .buckets import SeededBucketSampler
from .seeded import KeyBatch, SeededBatchSampler
from .shard_window import ShardWindowSampler
from .split import PartSampler, SplitSampler

__all__ = ['SplitSampler', 'PartSampler', 'SeededBatchSampler', 'SeededBucketSampler',
           'KeyBatch', 'ShardWindowSampler']
