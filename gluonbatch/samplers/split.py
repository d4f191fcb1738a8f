"""Sample partitions onto machines: one rank's share of the dataset in data-parallel training.

:class:`SplitSampler` gives every rank (worker) its own, equally long part of the dataset,
reshuffled the same way on every rank each epoch, so that all ranks run the same number of
steps without communicating. :class:`PartSampler` is what it shares with
:class:`~gluonbatch.samplers.ShardWindowSampler`: cutting an epoch's order into equal
parts (:func:`part_of`, :func:`part_length`) and counting epochs. It is also importable from :mod:`gluonbatch.devices` and
:mod:`gluonbatch.dataloader`.

Examples
--------
>>> import mxnet as mx
>>> from gluonbatch.samplers.split import SplitSampler
>>> data = mx.gluon.data.SimpleDataset(list(range(10)))
>>> loader = mx.gluon.data.DataLoader(data, batch_size=2,
...                                   sampler=SplitSampler(len(data), 2, part_index=1))
>>> [batch.asnumpy().tolist() for batch in loader]
[[5, 6], [7, 8], [9]]
"""
import mxnet as mx
import numpy as np

from .._core.checks import check_choice, check_int, check_part

__all__ = ['SplitSampler', 'PartSampler', 'LAST_PARTS', 'part_length', 'part_of']

#: What happens to the samples a split into equal parts leaves over (``last_part``).
LAST_PARTS = ('pad', 'drop')


def part_length(length, num_parts, last_part):
    """The length of each of ``num_parts`` equal parts of ``length`` samples: rounded up
    with ``last_part='pad'``, down with ``'drop'``.

    >>> part_length(10, 3, 'pad'), part_length(10, 3, 'drop')
    (4, 3)
    """
    if last_part == 'pad':
        return -(-length // num_parts)
    return length // num_parts


def part_of(order, num_parts, part_index, last_part):
    """Part ``part_index`` of the epoch's ``order`` cut into ``num_parts`` contiguous,
    equally long parts (an int64 array): with ``'pad'`` the parts run on by repeating
    ``order`` from its start, with ``'drop'`` its last ``len(order) % num_parts`` are left
    out. The samplers that split an epoch into ranks' parts cut it with this.

    >>> part_of(np.arange(5), 2, 1, 'pad').tolist(), part_of(np.arange(5), 2, 1, 'drop').tolist()
    ([3, 4, 0], [2, 3])
    """
    part = part_length(len(order), num_parts, last_part)
    if part * num_parts > len(order):
        order = np.resize(order, part * num_parts)  # repeats from the start
    start = part_index * part
    return np.asarray(order[start:start + part], dtype=np.int64)


class PartSampler(mx.gluon.data.Sampler):
    """A rank's equal part of an epoch's order: what :class:`SplitSampler` and
    :class:`~gluonbatch.samplers.ShardWindowSampler` share.

    A subclass sets ``_length`` (the samples of all parts) and gives :meth:`order`, the order
    of all parts for an epoch; this class cuts it into ``num_parts`` equal parts
    (:func:`part_of`) and counts the epochs.

    Parameters
    ----------
    num_parts, part_index : int
        The number of parts (ranks) and the one yielded.
    last_part : {'pad', 'drop'}
        See :func:`part_of`.
    shuffle : bool
        Whether :meth:`order` shuffles.
    """

    def __init__(self, num_parts, part_index, last_part, shuffle):
        self._num_parts, self._part_index = check_part(num_parts, part_index)
        self._last_part = check_choice(last_part, 'last_part', LAST_PARTS)
        self._shuffle = bool(shuffle)
        self.epoch = 0

    @property
    def num_parts(self):
        """The number of parts (ranks)."""
        return self._num_parts

    @property
    def part_index(self):
        """The part (rank) this sampler yields."""
        return self._part_index

    @property
    def last_part(self):
        """``'pad'`` or ``'drop'``: what the split does with the samples left over."""
        return self._last_part

    @property
    def shuffle(self):
        """Whether each epoch is shuffled."""
        return self._shuffle

    def set_epoch(self, epoch):
        """Use ``epoch`` for the next pass (then it advances by one per pass as usual)."""
        self.epoch = check_int(epoch, 'epoch', minimum=0)

    def order(self, epoch):
        """The order of all parts for ``epoch`` (an int64 numpy array)."""
        raise NotImplementedError

    def indices(self, epoch):
        """This part's indices for ``epoch``, an int64 numpy array (no state change)."""
        epoch = check_int(epoch, 'epoch', minimum=0)
        return part_of(self.order(epoch), self._num_parts, self._part_index, self._last_part)

    def __iter__(self):
        epoch = self.epoch
        self.epoch = epoch + 1
        return iter(self.indices(epoch).tolist())

    def __len__(self):
        return part_length(self._length, self._num_parts, self._last_part)


class SplitSampler(PartSampler):
    """Sample one part of ``range(length)``: one rank's share in data-parallel training.

    Every epoch the indices are permuted (with ``shuffle``) by
    ``np.random.RandomState(seed + epoch)``, so all ranks compute the same permutation
    without communicating, and cut into ``num_parts`` contiguous parts of equal length;
    this sampler yields part ``part_index``. Parts are disjoint and, together, cover the
    dataset (see ``last_part``). Equal lengths matter: in synchronous training every rank
    must run the same number of steps, or the ranks that run out first leave the others
    waiting forever.

    Epochs: each pass (``iter``) uses the current :attr:`epoch` and then advances it by
    one, so consecutive passes are shuffled differently. :meth:`set_epoch` sets the epoch
    of the next pass, as PyTorch's ``DistributedSampler`` does; calling it before every
    pass (with the epoch number) is the robust choice when ranks may iterate a different
    number of times (e.g. an extra pass on one rank only).

    Parameters
    ----------
    length : int
        Size of the dataset.
    num_parts : int, default 1
        Number of ranks (``kv.num_workers``).
    part_index : int, default 0
        This rank (``kv.rank``), ``0 <= part_index < num_parts``.
    shuffle : bool, default False
        Permute every epoch; without it the parts are contiguous ranges.
    seed : int, default 0
        Base seed, the same on every rank.
    last_part : {'pad', 'drop'}, default 'pad'
        When ``length`` is not a multiple of ``num_parts``: ``'pad'`` makes every part
        ``ceil(length / num_parts)`` long by repeating indices from the start of the
        epoch's permutation (every index is sampled; a few twice per epoch); ``'drop'``
        makes them ``length // num_parts`` long and drops the permutation's last
        ``length % num_parts`` indices (different ones each epoch when shuffled).

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
    [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    >>> [list(SplitSampler(10, 3, rank, last_part='drop')) for rank in range(3)]
    [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    >>> sampler = SplitSampler(8, 2, 1, shuffle=True, seed=42)
    >>> first, second = list(sampler), list(sampler)   # epochs 0 and 1
    >>> sampler.set_epoch(0)
    >>> list(sampler) == first, len(sampler)
    (True, 4)
    """

    def __init__(self, length, num_parts=1, part_index=0, shuffle=False, seed=0,
                 last_part='pad'):
        self._length = check_int(length, 'length', minimum=0)
        super().__init__(num_parts, part_index, last_part, shuffle)
        self._seed = check_int(seed, 'seed', minimum=0)

    def order(self, epoch):
        """The order of all parts for ``epoch``: a permutation seeded by ``seed + epoch``,
        or ``range(length)`` without ``shuffle``."""
        if self._shuffle:
            return np.random.RandomState((self._seed + epoch) % 2 ** 32).permutation(
                self._length)
        return np.arange(self._length)

    def __repr__(self):
        return ('SplitSampler(%d, num_parts=%d, part_index=%d, shuffle=%r, seed=%d, '
                "last_part=%r)" % (self._length, self._num_parts, self._part_index,
                                   self._shuffle, self._seed, self._last_part))
