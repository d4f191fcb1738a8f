"""Seeded batches of samples of similar size: R-CNN's aspect-ratio buckets, reproducible.

gluoncv's R-CNN scripts batch with ``SplitSortedBucketSampler``: a shuffled order cut into
buckets of ``mult`` batches, each bucket sorted by a key (the image's aspect ratio) so a
batch pads little, then its batches shuffled. :class:`SeededBucketSampler` does the same
from the seed: the epoch's order, each bucket's sort direction and its batches' order come
from ``(seed, epoch, bucket)``, every sample keeps the key of its position in the epoch's
order, and a rank takes its slice of each global batch, as
:class:`~gluonbatch.samplers.SeededBatchSampler` does (each bucket's arranged positions
dealt by :func:`~gluonbatch.samplers.rank_positions`, ``block=batch_size``).
"""
from collections.abc import Sequence

import numpy as np

from .._core.checks import check_choice, check_int
from ..seeded.keys import SampleKey, bucket_generator
from .ranks import rank_positions
from .state import LastBatch
from .seeded import KeyBatch, SeededBatchSampler

__all__ = ['SeededBucketSampler']


class SeededBucketSampler(SeededBatchSampler):
    """Batches of sample keys grouped by ``sort_keys``, every choice from the seed.

    Parameters
    ----------
    sort_keys : sequence of numbers
        One per sample (``dataset.get_im_aspect_ratio()`` in gluoncv's R-CNN scripts).
    batch_size : int
        Samples in each batch this rank loads.
    seed : int
        In ``[0, 2**64)``.
    mult : int, default 32
        Global batches per bucket.
    shuffle : bool, default True
        A new order every epoch, and the batches of each bucket in a new order.
    last_batch : {'keep', 'discard', 'pad'}, default 'pad'
        The last bucket's incomplete global batch: kept smaller, discarded, or filled up
        with samples from the start of the epoch's order (at positions past its end).
        gluoncv fills it with samples of its bucket, some twice in the epoch.
        ``'discard'`` with fewer samples than ``batch_size * num_parts`` makes every pass
        empty: a ``UserWarning`` says so as the sampler is made.
    num_parts, part_index : int, default 1, 0
        Ranks, and this one.

    Examples
    --------
    >>> ratios = [0.5, 2.0, 0.5, 2.0, 0.6, 1.9, 0.4, 2.1]
    >>> sampler = SeededBucketSampler(ratios, batch_size=2, seed=3, mult=4)
    >>> batches = [[ratios[key.index] for key in batch] for batch in sampler]
    >>> all(abs(a - b) < 0.3 for a, b in batches)   # each batch holds one shape
    True
    """

    def __init__(self, sort_keys: Sequence[float] | np.ndarray, batch_size: int, seed: int,
                 mult: int = 32, shuffle: bool = True, last_batch: LastBatch = 'pad',
                 num_parts: int = 1, part_index: int = 0) -> None:
        check_choice(last_batch, 'last_batch', ('keep', 'discard', 'pad'))
        self.sort_keys = np.asarray(sort_keys)
        if self.sort_keys.ndim != 1 or self.sort_keys.dtype.kind not in 'iuf':
            raise TypeError('sort_keys must be a sequence of numbers, one per sample, got an '
                            'array of shape %s and dtype %s'
                            % (self.sort_keys.shape, self.sort_keys.dtype))
        self.mult = check_int(mult, 'mult', minimum=1)
        super().__init__(len(self.sort_keys), batch_size, seed, shuffle=shuffle,
                         last_batch=last_batch, num_parts=num_parts, part_index=part_index)
        self._bucket = None  # (epoch, bucket, arranged positions) of the last one built

    def __repr__(self) -> str:
        return ('SeededBucketSampler(<%d sort keys>, %d, seed=%d, mult=%d, shuffle=%r, '
                'last_batch=%r, num_parts=%d, part_index=%d)'
                % (self.length, self.batch_size, self.seed, self.mult, self.shuffle,
                   self.last_batch, self.num_parts, self.part_index))

    def batch(self, epoch: int, number: int) -> KeyBatch:
        """Batch ``number`` of the pass of ``epoch``, a :class:`KeyBatch`."""
        bucket, slot = divmod(self._checked_number(epoch, number), self.mult)
        positions = self._arranged(epoch, bucket)
        mine = rank_positions(len(positions), self.num_parts, self.part_index,
                              self.batch_size, start=slot * self.batch_size,
                              stop=(slot + 1) * self.batch_size)
        # whole global batches, but with 'keep' on one rank the last may be short
        chosen = positions[mine[mine < len(positions)]]
        order = self._order(epoch)
        keys = [SampleKey(self.seed, epoch, int(p), int(order[p % self.length]))
                for p in chosen.tolist()]
        return KeyBatch(keys, epoch, number)

    def _arranged(self, epoch, bucket):
        """The positions of ``bucket``'s samples, sorted by key and in batch order."""
        if self._bucket is not None and self._bucket[:2] == (epoch, bucket):
            return self._bucket[2]
        size, stop = self.mult * self.global_batch, self._span(epoch)[1] * self.global_batch
        positions = np.arange(bucket * size, min((bucket + 1) * size, stop))
        if self.last_batch == 'keep':
            positions = positions[positions < self.length]
        rng = bucket_generator(self.seed, epoch, bucket)
        keys = self.sort_keys[self._order(epoch)[positions % self.length]]
        by_key = np.argsort(keys, kind='stable')
        if rng.integers(2):  # gluoncv sorts each bucket up or down, at random
            by_key = by_key[::-1]
        positions = positions[by_key]
        if self.shuffle:  # the bucket's whole global batches in a new order; a short one
            whole = len(positions) // self.global_batch  # ('keep') stays last
            chunks = positions[:whole * self.global_batch].reshape(whole, self.global_batch)
            positions = np.concatenate([chunks[rng.permutation(whole)].ravel(),
                                        positions[whole * self.global_batch:]])
        self._bucket = epoch, bucket, positions
        return positions
