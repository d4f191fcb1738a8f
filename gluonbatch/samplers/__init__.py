"""Epoch orders, and which rank gets which samples of each epoch.

Every sampler here that splits data across ranks gives each rank the same number of samples,
by one rule (:func:`gluonbatch.samplers.rank_positions`); the samplers that give an
epoch's order of all ranks derive from :class:`~gluonbatch.samplers.RankSampler`.

Examples
--------
>>> from gluonbatch.samplers import SplitSampler
>>> [list(SplitSampler(6, num_parts=2, part_index=rank)) for rank in (0, 1)]
[[0, 2, 4], [1, 3, 5]]
"""
from .buckets import SeededBucketSampler
from .ranks import RankSampler, rank_positions
from .seeded import KeyBatch, SeededBatchSampler
from .shard_window import ShardWindowSampler
from .split import SplitSampler

__all__ = ['SplitSampler', 'RankSampler', 'rank_positions', 'SeededBatchSampler',
           'SeededBucketSampler', 'KeyBatch', 'ShardWindowSampler']
