"""An epoch order that reads shards a few at a time: :class:`ShardWindowSampler`.

A dataset made of shards (tar files, say) is read fastest shard by shard: sequential reads,
and few files in the page cache at once. A full shuffle reads every shard all the time.
:class:`ShardWindowSampler` shuffles in windows instead: the shards in a new order every
epoch, the samples shuffled within each window of a few consecutive shards, the windows one
after the other. The ranks divide that order by the rule of
:mod:`gluonbatch.samplers.ranks`, so all of them read the same window at a time.
"""
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._core.checks import check_int, described, describe, is_int
from .ranks import LastPart, RankSampler
from ..seeded.keys import check_seed, window_generator

__all__ = ['ShardWindowSampler', 'shard_lengths_of']


def shard_lengths_of(dataset: Any) -> tuple[int, ...]:
    """The samples of each shard of ``dataset`` as a tuple of ints: its ``shard_lengths``,
    or ``dataset`` itself, a sequence of ints >= 0; TypeError or ValueError naming the
    shard otherwise.

    >>> shard_lengths_of([3, 0, 2])
    (3, 0, 2)
    >>> shard_lengths_of([3, -1])
    Traceback (most recent call last):
    ...
    ValueError: shard_lengths[1] must be an integer >= 0 (the samples of shard 1), got -1
    """
    owned = hasattr(dataset, 'shard_lengths')
    if owned:
        lengths, name = dataset.shard_lengths, '%s.shard_lengths' % type(dataset).__name__
    else:
        lengths, name = dataset, 'shard_lengths'
    if isinstance(lengths, (str, bytes, Mapping)) or not (
            isinstance(lengths, Sequence) or getattr(lengths, 'ndim', None) == 1):
        raise TypeError('dataset must have shard_lengths or be a sequence of shard lengths '
                        '(ints >= 0, one per shard), got %s%s (a dataset.transform(...) has '
                        'none: give the dataset itself)'
                        % (described(dataset), ' whose shard_lengths is %s'
                           % described(lengths) if owned else ''))
    for shard, count in enumerate(lengths):
        if not is_int(count):
            raise TypeError('%s[%d] must be an integer (the samples of shard %d), got %r (%s)'
                            % (name, shard, shard, count, describe(count)))
        if count < 0:
            raise ValueError('%s[%d] must be an integer >= 0 (the samples of shard %d), got %d'
                             % (name, shard, shard, count))
    lengths = tuple(int(count) for count in lengths)
    if owned and hasattr(dataset, '__len__') and len(dataset) != sum(lengths):
        raise ValueError('%s has %d samples, but its shard_lengths add up to %d'
                         % (type(dataset).__name__, len(dataset), sum(lengths)))
    return lengths


class ShardWindowSampler(RankSampler):
    """Sample a sharded dataset window by window: a few shards at a time, shuffled.

    Every epoch the shards are put in a new order; the permuted shards are taken in
    consecutive groups of ``window`` (the windows); the samples of each window are
    shuffled, and the windows follow each other. The order is a function of
    ``(seed, epoch)``, the shards' lengths and ``window`` alone (its draws keyed by
    :func:`~gluonbatch.seeded.keys.window_generator`), so every rank computes the same
    order without communicating, and a run is made again exactly. It is dealt to the
    ``num_parts`` ranks one sample at a time, round-robin
    (:func:`~gluonbatch.samplers.rank_positions` with ``block=1``), and this sampler
    yields the part of rank ``part_index``. Samples are numbered as the dataset numbers
    them: shard by shard, in the dataset's shard order.

    The window trades shuffle quality against memory and IO locality:

    - within a window the samples are fully mixed; two samples of shards in different
      windows are never in one batch, unless the two windows are neighbours and the batch
      straddles their border;
    - at any moment a rank reads about ``window`` shards, ``window / num_shards`` of the
      dataset: few files open, their pages in the page cache; all ranks read the same
      window at a time, each its part of the window's samples;
    - ``window=1`` shuffles the shards' order and the samples within each shard;
      ``window >= num_shards`` is a full shuffle of the epoch.

    As a rule of thumb, a window should hold many batches (``window * samples_per_shard``
    well above ``batch_size``, ten times or more), so that a batch's samples come from
    most of the window's shards, while its shards fit in memory (or the page cache)
    together.

    Epochs: each pass (``iter``) uses the current ``epoch`` and then advances it by
    one; :meth:`~gluonbatch.samplers.RankSampler.set_epoch` sets the epoch of the next pass,
    as for :class:`~gluonbatch.samplers.SplitSampler`. A seeded gluonbatch loader
    (``seed=``, the same seed) takes it as ``sampler`` and makes its batches from
    :meth:`order` of its own epochs, dealt to the ranks a batch at a time, resumable.

    Parameters
    ----------
    dataset : dataset or sequence of int
        A dataset with a ``shard_lengths`` attribute (the samples of each shard, in the
        dataset's order; :class:`~gluonbatch.curation.ImageTextPairDataset` has
        one), or those lengths themselves. Empty shards are allowed.
    window : int, default 4
        Shards per window, at least 1.
    seed : int, default 0
        In ``[0, 2**64)``, the same on every rank.
    num_parts : int, default 1
        Number of ranks (``kv.num_workers``). Every rank opens the whole dataset (it reads
        lazily) and takes its part here.
    part_index : int, default 0
        This rank (``kv.rank``), ``0 <= part_index < num_parts``.
    last_part : {'pad', 'drop'}, default 'pad'
        As for :class:`~gluonbatch.samplers.SplitSampler`: ``'pad'`` makes every
        part ``ceil(length / num_parts)`` long, the last ranks' last sample taken from the
        start of the epoch's order again; ``'drop'`` makes them ``length // num_parts`` long
        and leaves out the order's last ``length % num_parts`` samples. A seeded loader's
        ``last_batch`` decides instead.
    shuffle : bool, default True
        Without it every epoch is the dataset's order (``window`` and ``seed`` unused).

    Raises
    ------
    TypeError
        ``window``, ``seed``, ``num_parts``, ``part_index`` or a shard length is not an
        integer, or ``dataset`` has no ``shard_lengths`` and is no sequence.
    ValueError
        One of them is below its minimum (``window`` 1, a shard length 0),
        ``part_index >= num_parts``, ``seed >= 2**64``, ``last_part`` is neither
        ``'pad'`` nor ``'drop'``, or the dataset's length is not the sum of its
        ``shard_lengths``.

    Examples
    --------
    Four shards of three samples (samples ``3*k`` to ``3*k + 2`` in shard ``k``), two
    shards per window: the first six samples come from two shards, the last six from the
    other two.

    >>> sampler = ShardWindowSampler([3, 3, 3, 3], window=2, seed=1)
    >>> order = list(sampler)
    >>> sorted(order) == list(range(12)), len(sampler), sampler.epoch
    (True, 12, 1)
    >>> [len({index // 3 for index in half}) for half in (order[:6], order[6:])]
    [2, 2]
    >>> sampler.set_epoch(0)
    >>> list(sampler) == order != list(sampler)  # epochs 0, then 1
    True

    Two ranks: each every other sample of the same order.

    >>> ranks = [ShardWindowSampler([3, 3, 3, 3], window=2, seed=1, num_parts=2,
    ...                             part_index=rank) for rank in (0, 1)]
    >>> [rank.indices(0).tolist() for rank in ranks] == [order[0::2], order[1::2]]
    True

    Seeded batches of a rank's part, a batch of every global batch, resumable (a
    gluonbatch loader given ``sampler=`` and ``seed=`` builds this itself):

    >>> from gluonbatch.samplers import SeededBatchSampler
    >>> batches = SeededBatchSampler(12, 3, seed=1, order=ranks[1])
    >>> [[key.index for key in batch] for batch in batches] == [order[3:6], order[9:]]
    True

    With MXNet's DataLoader (and a dataset with ``shard_lengths``):

    >>> import mxnet as mx
    >>> class Shards(mx.gluon.data.SimpleDataset):
    ...     shard_lengths = (2, 3)
    >>> data = Shards(list(range(5)))
    >>> loader = mx.gluon.data.DataLoader(data, batch_size=2, sampler=ShardWindowSampler(
    ...     data, window=1, shuffle=False))
    >>> [batch.asnumpy().tolist() for batch in loader]
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, dataset: Any, window: int = 4, seed: int = 0, num_parts: int = 1,
                 part_index: int = 0, last_part: LastPart = 'pad', shuffle: bool = True) -> None:
        self._shard_lengths = shard_lengths_of(dataset)
        self._window = check_int(window, 'window', minimum=1)
        self._seed = check_seed(seed)
        super().__init__(num_parts, part_index, last_part, shuffle)
        lengths = np.array(self._shard_lengths, dtype=np.int64)
        self._lengths, self._starts = lengths, np.cumsum(lengths) - lengths
        self._length = int(lengths.sum())

    @property
    def shard_lengths(self) -> tuple[int, ...]:
        """The samples of each shard, in the dataset's order (a tuple of ints)."""
        return self._shard_lengths

    @property
    def length(self) -> int:
        """The samples of all shards (of all ranks); ``len()`` is this rank's part."""
        return self._length

    @property
    def window(self) -> int:
        """Shards per window."""
        return self._window

    @property
    def seed(self) -> int:
        """The seed of every epoch's order."""
        return self._seed

    @property
    def description(self) -> dict:
        """What the order depends on beside the seed, the epoch, the length and whether to
        shuffle: a JSON-serializable dict, which a seeded loader's state records so that it
        resumes only with the same order (of any number of ranks)."""
        # the lengths as a digest: a dataset converted again with shards of other sizes
        # orders its samples otherwise, and must not resume a state of this one
        lengths = hashlib.blake2b(self._lengths.tobytes(), digest_size=8).hexdigest()
        return {'sampler': type(self).__name__, 'shards': len(self._shard_lengths),
                'shard_lengths': lengths, 'window': self._window}

    def order(self, epoch: int) -> np.ndarray:
        """The order of all ranks for ``epoch`` (an int64 numpy array)."""
        if not self._shuffle:
            return np.arange(self._length, dtype=np.int64)
        draws = window_generator(self._seed, epoch)
        shards = draws.permutation(len(self._lengths))
        sizes = self._lengths[shards]
        # every sample of the permuted shards, each shard's in its own order ...
        firsts = np.cumsum(sizes) - sizes
        samples = np.repeat(self._starts[shards] - firsts, sizes) + np.arange(self._length)
        # ... then shuffled within its window: sorted by window, then by a random key
        windows = np.repeat(np.arange(len(shards)) // self._window, sizes)
        return samples[np.lexsort((draws.random(self._length), windows))]

    def __repr__(self) -> str:
        return ('ShardWindowSampler(<%d shards, %d samples>, window=%d, seed=%d, num_parts=%d, '
                'part_index=%d, last_part=%r, shuffle=%r)'
                % (len(self._shard_lengths), self._length, self._window, self._seed,
                   self._num_parts, self._part_index, self._last_part, self._shuffle))
