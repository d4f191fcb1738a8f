"""One rank's part of a dataset in data-parallel training: :class:`SplitSampler`.

Every rank (process) gets an equally long part of every epoch's order, reshuffled the
same way on every rank each epoch, so that all ranks run the same number of steps without
communicating; which rank gets which samples is the rule of
:mod:`gluonbatch.samplers.ranks`.

Examples
--------
>>> import mxnet as mx
>>> from gluonbatch.samplers.split import SplitSampler
>>> data = mx.gluon.data.SimpleDataset(list(range(10)))
>>> loader = mx.gluon.data.DataLoader(data, batch_size=2,
...                                   sampler=SplitSampler(len(data), 2, part_index=1))
>>> [batch.asnumpy().tolist() for batch in loader]
[[1, 3], [5, 7], [9]]
"""
import numpy as np

from .._core.checks import check_int
from .ranks import LastPart, RankSampler

__all__ = ['SplitSampler']


class SplitSampler(RankSampler):
    """Sample one rank's part of ``range(length)`` in data-parallel training.

    Every epoch the indices are permuted (with ``shuffle``) by
    ``np.random.RandomState(seed + epoch)``, so all ranks compute the same permutation
    without communicating, and dealt to the ``num_parts`` ranks one at a time, round-robin
    (:func:`~gluonbatch.samplers.rank_positions` with ``block=1``): rank
    ``part_index`` takes positions ``part_index``, ``part_index + num_parts``, ... of the
    permutation. Parts are disjoint and, together, cover the dataset (see
    ``last_part``). Equal lengths matter: in synchronous training every rank must run the
    same number of steps, or the ranks that run out first leave the others waiting forever.

    Epochs: each pass (``iter``) uses the current ``epoch`` and then advances it by
    one, so consecutive passes are shuffled differently.
    :meth:`~gluonbatch.samplers.RankSampler.set_epoch` sets the epoch of the next pass, as
    PyTorch's ``DistributedSampler`` does; calling it before every pass (with the epoch
    number) is the robust choice when ranks may iterate a different number of times (e.g. an
    extra pass on one rank only).

    A seeded gluonbatch loader given one (``seed=``) takes its rank and ``shuffle`` and
    orders the samples from its own seed.

    Parameters
    ----------
    length : int
        Size of the dataset.
    num_parts : int, default 1
        Number of ranks (``kv.num_workers``).
    part_index : int, default 0
        This rank (``kv.rank``), ``0 <= part_index < num_parts``.
    shuffle : bool, default False
        Permute every epoch; without it the order is ``range(length)``.
    seed : int, default 0
        Base seed, the same on every rank.
    last_part : {'pad', 'drop'}, default 'pad'
        When ``length`` is not a multiple of ``num_parts``: ``'pad'`` makes every part
        ``ceil(length / num_parts)`` long, the last ranks' last index taken from the start
        of the epoch's permutation again (every index is sampled; a few twice per epoch);
        ``'drop'`` makes them ``length // num_parts`` long and leaves out the
        permutation's last ``length % num_parts`` indices (different ones each epoch when
        shuffled).

    Raises
    ------
    TypeError
        ``length``, ``num_parts``, ``part_index`` or ``seed`` is not an integer (a bool,
        a float or a string such as ``"10"`` is not one).
    ValueError
        One of them is below its minimum, ``part_index >= num_parts``, or ``last_part``
        is neither ``'pad'`` nor ``'drop'``.

    Examples
    --------
    >>> [list(SplitSampler(10, 3, rank)) for rank in range(3)]
    [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    >>> [list(SplitSampler(10, 3, rank, last_part='drop')) for rank in range(3)]
    [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    >>> sampler = SplitSampler(8, 2, 1, shuffle=True, seed=42)
    >>> first, second = list(sampler), list(sampler)   # epochs 0 and 1
    >>> sampler.set_epoch(0)
    >>> list(sampler) == first, len(sampler)
    (True, 4)
    """

    def __init__(self, length: int, num_parts: int = 1, part_index: int = 0,
                 shuffle: bool = False, seed: int = 0, last_part: LastPart = 'pad') -> None:
        self._length = check_int(length, 'length', minimum=0)
        super().__init__(num_parts, part_index, last_part, shuffle)
        self._seed = check_int(seed, 'seed', minimum=0)

    @property
    def length(self) -> int:
        """The size of the dataset (of all ranks); ``len()`` is this rank's part."""
        return self._length

    @property
    def seed(self) -> int:
        """The base seed of the epochs' permutations."""
        return self._seed

    @property
    def description(self) -> dict:
        """The order's kind: it depends on the seed, the epoch and the length alone."""
        return {'sampler': type(self).__name__}

    def order(self, epoch: int) -> np.ndarray:
        """The order of all ranks for ``epoch``: a permutation seeded by ``seed + epoch``,
        or ``range(length)`` without ``shuffle`` (int64)."""
        if self._shuffle:
            return np.random.RandomState((self._seed + epoch) % 2 ** 32).permutation(
                self._length).astype(np.int64)
        return np.arange(self._length, dtype=np.int64)

    def __repr__(self) -> str:
        return ('SplitSampler(%d, num_parts=%d, part_index=%d, shuffle=%r, seed=%d, '
                "last_part=%r)" % (self._length, self._num_parts, self._part_index,
                                   self._shuffle, self._seed, self._last_part))
