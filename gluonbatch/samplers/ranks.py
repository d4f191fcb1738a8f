"""Which rank gets which samples: the one rule every sampler here follows.

An epoch's order of ``count`` positions is dealt to the ``num_parts`` ranks (data-parallel
processes) round-robin in blocks of ``block`` consecutive positions: rank 0 takes the first
block, rank 1 the next, ..., rank ``num_parts - 1`` the ``num_parts``-th, then rank 0 again.
A *round* -- a block for every rank -- is one step of all ranks together, and it is a
contiguous run of the order whatever the number of ranks: with ``block`` the batch size, the
ranks' batches of a step, concatenated in rank order, are the global batch one rank loads,
on 1, 2 or 4 ranks alike.

Every rank gets the same number of positions, whole rounds (in synchronous training a rank
that runs out first leaves the others waiting for it forever). The last, incomplete round
is either completed (``'pad'``) by running on past the order's end -- positions ``count``,
``count + 1``, ..., which a caller reads as ``position % count``, the order from its start
again, and which a seeded sampler keys by their own position, so they get draws of their
own -- or left out (``'drop'``).

``block=1`` serves the samplers that do not know the batch size
(:class:`~gluonbatch.samplers.SplitSampler`,
:class:`~gluonbatch.samplers.ShardWindowSampler`; PyTorch's
``DistributedSampler`` deals so), ``block=batch_size`` the seeded ones
(:class:`~gluonbatch.samplers.SeededBatchSampler`,
:class:`~gluonbatch.samplers.SeededBucketSampler`).
:func:`~gluonbatch.samplers.rank_positions` is the rule; :class:`RankSampler` is the base of
the samplers that give an epoch's order and take a rank's part of it.

Examples
--------
>>> [rank_positions(10, 3, rank).tolist() for rank in range(3)]
[[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
>>> [rank_positions(10, 2, rank, block=3, last='drop').tolist() for rank in range(2)]
[[0, 1, 2], [3, 4, 5]]
"""
import abc
from collections.abc import Iterator
from typing import Literal, TypeAlias

import mxnet as mx
import numpy as np

from .._core.checks import check_choice, check_int, check_part

__all__ = ['LAST_PARTS', 'rank_length', 'rank_positions', 'RankSampler']

#: What the rule does with an epoch's last, incomplete round: complete it past the
#: order's end, or leave it out.
LAST_PARTS = ('pad', 'drop')
#: A ``last`` / ``last_part`` value (one of :data:`LAST_PARTS`).
LastPart: TypeAlias = Literal['pad', 'drop']


def rank_length(count: int, num_parts: int = 1, block: int = 1, last: LastPart = 'pad') -> int:
    """How many positions each rank gets of an order of ``count``:
    ``len(rank_positions(count, num_parts, part_index, block, last))`` for any rank, not
    computed.

    >>> rank_length(10, 3), rank_length(10, 3, last='drop'), rank_length(10, 2, block=4)
    (4, 3, 8)
    """
    count = check_int(count, 'count', minimum=0)
    num_parts = check_int(num_parts, 'num_parts', minimum=1)
    block = check_int(block, 'block', minimum=1)
    last = check_choice(last, 'last', LAST_PARTS)
    size = block * num_parts
    rounds = -(-count // size) if last == 'pad' else count // size
    return rounds * block


def rank_positions(count: int, num_parts: int = 1, part_index: int = 0, block: int = 1,
                   last: LastPart = 'pad', *, start: int = 0, stop: int | None = None
                   ) -> np.ndarray:
    """The positions of an epoch's order of ``count`` that rank ``part_index`` of
    ``num_parts`` takes, in its order: the rule of :mod:`gluonbatch.samplers.ranks`.

    Parameters
    ----------
    count : int
        The positions of the epoch's order (of all ranks), at least 0.
    num_parts, part_index : int, default 1 and 0
        The number of ranks (``kv.num_workers``) and this one (``kv.rank``).
    block : int, default 1
        Consecutive positions dealt to a rank at once: 1, or the batch size for a
        sampler of batches.
    last : {'pad', 'drop'}, default 'pad'
        The last, incomplete round: completed with the positions past the end
        (``>= count``; read them as ``position % count``), or left out.
    start, stop : int, default 0 and the rank's whole part
        Only items ``start`` to ``stop - 1`` of the rank's positions (one batch, say),
        ``0 <= start <= stop <= rank_length(count, num_parts, block, last)``.

    Returns
    -------
    numpy.ndarray
        int64 positions into the order of all ranks, each rank as many, none taken twice.

    Raises
    ------
    TypeError
        An argument that is not an integer, or ``last`` that is not a str.
    ValueError
        One below its minimum, ``part_index >= num_parts``, ``last`` neither ``'pad'``
        nor ``'drop'``, or ``start``/``stop`` outside the rank's positions.

    Examples
    --------
    Two ranks, batches of 2: every step (round) of the ranks is a run of the order.

    >>> [rank_positions(7, 2, rank, block=2).tolist() for rank in (0, 1)]
    [[0, 1, 4, 5], [2, 3, 6, 7]]
    >>> rank_positions(7, 2, 1, block=2, start=2, stop=4).tolist()   # its second batch
    [6, 7]
    >>> order = np.array([40, 10, 30, 20, 50, 60, 0])
    >>> order[rank_positions(7, 2, 1, block=2) % 7].tolist()   # 7 runs on as 0
    [30, 20, 0, 40]
    """
    length = rank_length(count, num_parts, block, last)
    num_parts, part_index = check_part(num_parts, part_index)
    start = check_int(start, 'start', minimum=0)
    stop = length if stop is None else check_int(stop, 'stop', minimum=0)
    if not start <= stop <= length:
        raise ValueError('start and stop must be in [0, %d] (the positions of each rank), '
                         'start <= stop; got start %d and stop %d' % (length, start, stop))
    items = np.arange(start, stop, dtype=np.int64)
    return items // block * (block * num_parts) + part_index * block + items % block


class RankSampler(mx.gluon.data.Sampler, metaclass=abc.ABCMeta):
    """An epoch order of all ranks, of which this sampler yields one rank's part by the
    rule of :mod:`gluonbatch.samplers.ranks` (``block=1``).

    A subclass gives the order of every epoch (:meth:`order`), its :attr:`length`, the
    :attr:`seed` it is drawn from and a :attr:`description` of what else it depends on;
    this class deals it to the ranks and counts the epochs. A seeded loader or a
    :class:`~gluonbatch.samplers.SeededBatchSampler` given one as its order deals
    the same order in blocks of its batch size instead.

    Parameters
    ----------
    num_parts, part_index : int
        The number of ranks and this one, ``0 <= part_index < num_parts``.
    last_part : {'pad', 'drop'}
        The ``last`` of :func:`rank_positions`.
    shuffle : bool
        Whether :meth:`order` shuffles.

    Attributes
    ----------
    epoch : int
        The epoch of the next pass; each pass advances it by one.
    """

    def __init__(self, num_parts: int, part_index: int, last_part: LastPart,
                 shuffle: bool) -> None:
        self._num_parts, self._part_index = check_part(num_parts, part_index)
        self._last_part = check_choice(last_part, 'last_part', LAST_PARTS)
        self._shuffle = bool(shuffle)
        self.epoch = 0

    @abc.abstractmethod
    def order(self, epoch: int) -> np.ndarray:
        """The order of all ranks for ``epoch``: :attr:`length` indices, int64."""

    @property
    @abc.abstractmethod
    def length(self) -> int:
        """The samples of an epoch's order of all ranks; ``len()`` is this rank's."""

    @property
    @abc.abstractmethod
    def seed(self) -> int:
        """The seed the orders are drawn from."""

    @property
    @abc.abstractmethod
    def description(self) -> dict:
        """What the order depends on beside the seed, the epoch, the length and whether to
        shuffle: a JSON-serializable dict, which a seeded loader's state records so that
        it resumes only with the same order."""

    @property
    def num_parts(self) -> int:
        """The number of ranks."""
        return self._num_parts

    @property
    def part_index(self) -> int:
        """The rank this sampler yields."""
        return self._part_index

    @property
    def last_part(self) -> str:
        """``'pad'`` or ``'drop'``: what the deal does with an epoch's last round."""
        return self._last_part

    @property
    def shuffle(self) -> bool:
        """Whether each epoch is shuffled."""
        return self._shuffle

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch`` for the next pass (then it advances by one per pass as usual)."""
        self.epoch = check_int(epoch, 'epoch', minimum=0)

    def checked_order(self, epoch: int) -> np.ndarray:
        """:meth:`order` of ``epoch`` as an int64 array, ValueError unless it holds
        :attr:`length` indices: what the deal (here or a seeded sampler's) reads."""
        epoch = check_int(epoch, 'epoch', minimum=0)
        order = np.asarray(self.order(epoch), dtype=np.int64)
        if len(order) != self.length:
            raise ValueError('%s.order(%d) gave %d indices, but its length is %d'
                             % (type(self).__name__, epoch, len(order), self.length))
        return order

    def indices(self, epoch: int) -> np.ndarray:
        """This rank's indices for ``epoch``, an int64 numpy array (no state change)."""
        order = self.checked_order(epoch)
        if not len(order):
            return order
        positions = rank_positions(len(order), self._num_parts, self._part_index,
                                   last=self._last_part)
        return order[positions % len(order)]

    def __iter__(self) -> Iterator[int]:
        epoch = self.epoch
        self.epoch = epoch + 1
        return iter(self.indices(epoch).tolist())

    def __len__(self) -> int:
        return rank_length(self.length, self._num_parts, last=self._last_part)
