"""The batches of a seeded run: which samples, in which order, under which keys.

:class:`SeededBatchSampler` yields each batch as a list of
:class:`~gluonbatch.seeded.SampleKey`: the dataset index to read and the
``(seed, epoch, position)`` its augmentation draws from. Everything is computed from those
numbers, never from a running state, so a pass can start at any batch at the cost of its
first batch (resuming), and a rank's batches are a slice of the global batch whatever the
number of ranks (elastic).

The epoch's order is :func:`~gluonbatch.seeded.keys.epoch_order` (or ``range`` without
``shuffle``), or an *order*'s: a :class:`~gluonbatch.samplers.RankSampler` such as
:class:`~gluonbatch.samplers.ShardWindowSampler`, which reads shards a few at
a time. It is dealt to the ranks a ``batch_size`` at a time
(:func:`~gluonbatch.samplers.rank_positions` with ``block=batch_size``): rank
``part_index`` takes the ``part_index``-th ``batch_size`` of each global batch of
``batch_size * num_parts``, so the ranks' batches, concatenated in rank order, are the
global batch one rank would load. A sample's key position is its position in the epoch's
order (past its end for a padded last batch).
"""
from collections.abc import Iterable, Iterator

import numpy as np

from .._core.checks import check_choice, check_int, check_part, described
from ..seeded.keys import BatchStart, SampleKey, check_epoch, check_seed, epoch_order
from .ranks import LastPart, RankSampler, rank_positions
from .split import SplitSampler
from .state import LAST_BATCH, LastBatch, check_description, position, warn_empty_passes

__all__ = ['SeededBatchSampler', 'KeyBatch']


class KeyBatch(list):
    """One batch of :class:`~gluonbatch.seeded.SampleKey`, a list, which also knows
    the ``epoch`` of its pass and its ``number`` in the pass (from 0). Its first key is a
    :class:`~gluonbatch.seeded.keys.BatchStart`, from which MXNet's generator is seeded
    for the batch."""

    __slots__ = ('epoch', 'number')

    def __init__(self, keys: Iterable[SampleKey], epoch: int, number: int) -> None:
        keys = list(keys)
        if keys:
            keys[0] = BatchStart(*keys[0][:4], size=len(keys))
        super().__init__(keys)
        self.epoch, self.number = epoch, number

    def __reduce__(self) -> tuple:
        return KeyBatch, (list(self), self.epoch, self.number)


class SeededBatchSampler:
    """Batches of sample keys: the order, the rank's part and the random draws of every
    sample a function of ``(seed, epoch, position)``.

    Give it as ``batch_sampler`` to ``mx.gluon.data.DataLoader`` over a
    :class:`~gluonbatch.seeded.SeededDataset`, or let a gluonbatch loader build it
    (``seed=``).

    Parameters
    ----------
    length : int
        Samples in the dataset.
    batch_size : int
        Samples in each batch this rank loads.
    seed : int
        In ``[0, 2**64)``.
    shuffle : bool, default True
        A new order every epoch (else ``range(length)`` every epoch).
    last_batch : {'keep', 'discard', 'pad', 'rollover'}, default 'keep'
        The epoch's last, incomplete global batch: kept smaller, discarded, padded with
        samples from the start of the epoch's order (at positions past its end, so with
        draws of their own), or rolled over into the next epoch's first batch, as MXNet's
        ``last_batch`` does. With ``'discard'`` or ``'rollover'`` and fewer samples
        than ``batch_size * num_parts``, passes are empty (with ``'rollover'`` the first
        ones, then a batch every few passes): a ``UserWarning`` says so as the sampler is
        made.
    num_parts, part_index : int, default 1, 0
        Ranks in data-parallel training and this one (``kv.num_workers``, ``kv.rank``).
        Every rank runs the same number of batches; with several, ``'keep'`` needs
        ``length`` to be a multiple of ``batch_size * num_parts``.
    order : RankSampler, optional
        This sampler takes the order's ``num_parts``, ``part_index`` and ``shuffle``
        (given otherwise than as their defaults, they must agree). A
        :class:`~gluonbatch.samplers.SplitSampler` gives only those: the order is still
        the seed's permutation. Any other order gives every epoch's order too,
        ``order.order(epoch)`` (of all ranks), dealt as above; its ``seed`` must be this
        sampler's and its ``length`` ``length``, and its ``description`` goes into the
        state, so that a state is resumed only with the same order. Its own ``epoch`` and
        ``last_part`` are not used.

    Attributes
    ----------
    epoch : int
        The epoch of the next pass; each pass advances it by one.

    Notes
    -----
    A pass is under way from ``iter(sampler)`` until the next :meth:`load_state_dict` or
    :meth:`set_epoch`, even once its iterator is exhausted (a DataLoader with workers reads
    the pass's end a few batches before it delivers them): meanwhile :meth:`state_dict`
    raises, and :meth:`state_after` names a position in the pass.

    Examples
    --------
    >>> sampler = SeededBatchSampler(5, 2, seed=1, shuffle=False)
    >>> [[key.index for key in batch] for batch in sampler]
    [[0, 1], [2, 3], [4]]
    >>> batch = next(iter(sampler))   # epoch 1
    >>> batch.epoch, batch.number, batch[1]
    (1, 0, SampleKey(seed=1, epoch=1, position=1, index=1))
    >>> ranks = [SeededBatchSampler(8, 2, seed=1, num_parts=2, part_index=r) for r in (0, 1)]
    >>> [[key.position for key in next(iter(rank))] for rank in ranks]
    [[0, 1], [2, 3]]
    """

    def __init__(self, length: int, batch_size: int, seed: int, shuffle: bool = True,
                 last_batch: LastBatch = 'keep', num_parts: int = 1, part_index: int = 0,
                 order: RankSampler | None = None) -> None:
        self.length = check_int(length, 'length', minimum=0)
        self.batch_size = check_int(batch_size, 'batch_size', minimum=1)
        self.seed = check_seed(seed)
        self.shuffle = bool(shuffle)
        self.last_batch = check_choice(last_batch, 'last_batch', LAST_BATCH)
        self.num_parts, self.part_index = check_part(num_parts, part_index)
        self._source = None
        if order is not None:
            self._take_order(order)
        self.global_batch = self.batch_size * self.num_parts
        if self.num_parts > 1 and last_batch == 'keep' and self.length % self.global_batch:
            raise ValueError(
                "last_batch='keep' with num_parts=%d needs length to be a multiple of the "
                'global batch (%d = batch_size %d x num_parts %d), got length %d: the ranks '
                "would run different numbers of batches; use 'discard', 'pad' or 'rollover'"
                % (self.num_parts, self.global_batch, self.batch_size, self.num_parts,
                   self.length))
        self.epoch, self._start = 0, 0
        self._pass: tuple[int, int] | None = None  # (epoch, first batch) of the last pass
        self._passes = 0  # passes begun: a pass's number tells it from a later one
        # the number of the pass under way, None before any pass and once
        # load_state_dict() or set_epoch() ended it (an exhausted pass goes on)
        self._under_way: int | None = None
        self._orders: dict[int, np.ndarray] = {}
        # said once, as it is made: a loader built on it does not say it again
        warn_empty_passes(self.length, self.batch_size, self.last_batch, self.num_parts)

    def _take_order(self, order):
        """Check ``order`` (see the class's ``order``) and take its shuffle and rank."""
        if not isinstance(order, RankSampler):
            raise TypeError('order must be a RankSampler (an epoch order of all ranks, such '
                            'as a ShardWindowSampler), got %s' % described(order))
        kind = type(order).__name__
        if order.length != self.length:
            raise ValueError('the %s is for %d samples, but length is %d: make it for the '
                             'same dataset' % (kind, order.length, self.length))
        if not isinstance(order, SplitSampler):  # its order too, keyed by this seed
            if order.seed != self.seed:
                raise ValueError('seed=%d but the %s has seed=%d: give both the same seed'
                                 % (self.seed, kind, order.seed))
            self._source = order
        if (self.num_parts, self.part_index) not in ((1, 0), (order.num_parts,
                                                              order.part_index)):
            raise ValueError('num_parts=%d, part_index=%d, but the order is part %d of %d: '
                             'the order gives the rank; leave num_parts and part_index out'
                             % (self.num_parts, self.part_index, order.part_index,
                                order.num_parts))
        if not self.shuffle and order.shuffle:
            raise ValueError('shuffle=False, but the order shuffles: the order says whether '
                             'to shuffle; leave shuffle out')
        self.num_parts, self.part_index = order.num_parts, order.part_index
        self.shuffle = bool(order.shuffle)

    def __repr__(self) -> str:
        return ('SeededBatchSampler(%d, %d, seed=%d, shuffle=%r, last_batch=%r, num_parts=%d, '
                'part_index=%d%s)' % (self.length, self.batch_size, self.seed, self.shuffle,
                                      self.last_batch, self.num_parts, self.part_index,
                                      '' if self._source is None
                                      else ', order=%r' % (self._source,)))

    def set_epoch(self, epoch: int) -> None:
        """Start the next pass at the first batch of ``epoch`` (in ``[0, 2**63)``); a pass
        under way is over."""
        self.epoch, self._start = check_epoch(epoch), 0
        self._under_way = None

    def state_dict(self) -> dict:
        """Where the next pass starts, ``epoch`` and ``batch``, beside what the batch
        numbers mean (``seed``, ``global_batch_size``, ``length``, ``shuffle``,
        ``last_batch``, and with an ``order`` its ``description`` as ``'order'``, which
        :meth:`load_state_dict` checks): a JSON-serializable dict.

        Before any pass, or after :meth:`load_state_dict` or :meth:`set_epoch`: once a
        pass began, ValueError. The sampler cannot know the batch a DataLoader delivered
        last, as it reads the sampler ahead of its batches (one with workers reads the
        pass's end a few batches before it delivers them); :meth:`state_after` says,
        counting what the script received.

        >>> sampler = SeededBatchSampler(5, 2, seed=1)
        >>> batches = iter(sampler)
        >>> first = next(batches)
        >>> sampler.state_dict()  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: state_dict() was called while the pass of epoch 0 is under way: ...
        >>> sampler.state_after(1)['batch']
        1
        >>> rest = list(batches)   # exhausted, the pass is still under way
        >>> sampler.state_after(3)['epoch'], sampler.state_after(3)['batch']
        (1, 0)
        >>> sampler.load_state_dict(sampler.state_after(3))   # ends it
        >>> sampler.state_dict()['epoch'], sampler.state_dict()['batch']
        (1, 0)
        """
        if self._under_way is not None and self._pass is not None:
            raise ValueError(
                'state_dict() was called while the pass of epoch %d is under way: a '
                'DataLoader reads the sampler ahead of the batches it delivers, so the '
                'sampler cannot tell which batch comes next; after batch i of the pass, save '
                'sampler.state_after(i + 1) (a pass stays under way, its batches read or '
                'not, until load_state_dict() or set_epoch())' % self._pass[0])
        return self._state(self.epoch, self._start)

    def state_after(self, delivered: int) -> dict:
        """The state of a run whose last pass begun (by the last ``iter()``; under way or
        over) has delivered ``delivered`` batches: resuming from it continues with the next
        batch or, after the pass's last, with the first of the next epoch.

        MXNet's DataLoader iterates the sampler ahead of the batches it delivers (its
        prefetch), so a script counts what it received: ``state_after(i + 1)`` after
        batch ``i`` of the pass. After the pass's last batch (``delivered`` all the pass
        has, none for a pass of no batch), the next epoch's first batch.

        >>> sampler = SeededBatchSampler(5, 2, seed=1)
        >>> sampler.load_state_dict({'epoch': 3, 'batch': 1})
        >>> batches = iter(sampler)
        >>> [(state['epoch'], state['batch'])
        ...  for state in (sampler.state_after(1), sampler.state_after(2))]
        [(3, 2), (4, 0)]
        """
        if self._pass is None:
            raise ValueError('state_after() names a position in the pass under way, and '
                             'no pass has begun: iterate the sampler first')
        epoch, start = self._pass
        delivered = check_int(delivered, 'delivered', minimum=0)
        count = self.batches_in(epoch)
        if start + delivered > count:
            raise ValueError('delivered is %d, but the pass of epoch %d began at batch %d of '
                             '%d: it delivers at most %d'
                             % (delivered, epoch, start, count, count - start))
        if not count:  # a pass of no batch is over as it begins: the next epoch's first
            return self._state(epoch + 1, 0)
        return self._state(epoch, start + delivered)

    def _state(self, epoch, batch):
        """The state whose next batch is ``batch`` of ``epoch`` (past the epoch's last:
        the next epoch's first)."""
        if batch and batch == self.batches_in(epoch):
            epoch, batch = epoch + 1, 0
        state = {'seed': self.seed, 'epoch': epoch, 'batch': batch,
                 'global_batch_size': self.global_batch, 'length': self.length,
                 'shuffle': self.shuffle, 'last_batch': self.last_batch}
        if self._source is not None:
            state['order'] = dict(self._source.description)
        return state

    def load_state_dict(self, state: dict) -> None:
        """Start the next pass at batch ``state['batch']`` of epoch ``state['epoch']``
        (past its last batch: the next epoch's first); the batches before it are not
        computed, and a pass under way is over.

        ``state`` is a dict from :meth:`state_dict` or :meth:`state_after`, a gluonbatch
        loader's state (its ``format`` aside, the same dict), or one with ``epoch`` and
        ``batch`` alone. TypeError for a field of the wrong type, ValueError for a bad
        value, each naming the field: an epoch outside ``[0, 2**63)``, a batch outside
        the epoch's, another ``format``. What else the state says of its sampler must be
        this sampler's, or its batch numbers would name other samples: ValueError naming
        what differs, down to the entry of an ``order``'s description. ``num_parts`` may
        differ, with the same global batch size (elastic), with an ``order`` too. Nothing
        changes unless the state loads.

        >>> sampler = SeededBatchSampler(5, 2, seed=1)
        >>> sampler.load_state_dict({'epoch': 10 ** 30, 'batch': 0})
        Traceback (most recent call last):
        ...
        ValueError: state['epoch'] must be below 2**63, got 1000000000000000000000000000000
        >>> sampler.load_state_dict({'epoch': 2, 'batch': 4})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: state['batch'] is 4, but epoch 2 has 3 batches: ...
        >>> sampler.load_state_dict(dict(sampler.state_dict(), format='gluonbatch.loader/1'))
        """
        epoch, batch = position(state)
        ours = self._state(epoch, 0)
        check_description(state, ours)
        count = self.batches_in(epoch)
        if batch > count:
            raise ValueError("state['batch'] is %d, but epoch %d has %d batches: the state "
                             'is of another run, or was edited' % (batch, epoch, count))
        resumed = self._state(epoch, batch)  # past the epoch's last batch: the next's first
        self.epoch, self._start = resumed['epoch'], resumed['batch']
        self._under_way = None

    def batches_in(self, epoch: int) -> int:
        """How many batches the pass of ``epoch`` (in ``[0, 2**63)``) has."""
        first, stop = self._span(check_epoch(epoch))
        return stop - first

    def __len__(self) -> int:
        return self.batches_in(self.epoch)

    def __iter__(self) -> Iterator[KeyBatch]:
        epoch, start = self.epoch, self._start
        batches = self.batches(epoch, start)
        self.epoch, self._start = epoch + 1, 0
        self._pass, self._passes = (epoch, start), self._passes + 1
        self._under_way = self._passes
        return batches

    def batches(self, epoch: int, start: int = 0) -> Iterator[KeyBatch]:
        """An iterator over the batches of the pass of ``epoch`` from batch ``start`` on (no
        state change); ValueError for a ``start`` past the epoch's batches."""
        count = self.batches_in(epoch)
        start = check_int(start, 'start', minimum=0)
        if start > count:
            raise ValueError('start %d of epoch %d, which has %d batches: start in [0, %d]'
                             % (start, epoch, count, count))
        return (self.batch(epoch, number) for number in range(start, count))

    def batch(self, epoch: int, number: int) -> KeyBatch:
        """Batch ``number`` of the pass of ``epoch``, a :class:`KeyBatch`; ValueError for a
        number past the epoch's batches."""
        epoch, number = check_epoch(epoch), self._checked_number(epoch, number)
        first, stop = self._span(epoch)
        # the pass's run of the order, dealt to the ranks: with rollover the run of the
        # epochs' orders one after the other that its global batches cover
        last: LastPart = 'drop' if self.last_batch in ('discard', 'rollover') else 'pad'
        if self.last_batch == 'rollover':
            count, base = (stop - first) * self.global_batch, first
        else:
            count, base = self.length, 0
        dealt = rank_positions(count, self.num_parts, self.part_index, self.batch_size, last,
                               start=number * self.batch_size,
                               stop=(number + 1) * self.batch_size)
        # Python ints: with rollover, positions count through all epochs, past int64
        offset = base * self.global_batch
        positions = [offset + p for p in dealt.tolist()]
        if self.last_batch == 'rollover':
            walked = [divmod(p, self.length) for p in positions]
        else:  # 'keep' (one rank, or whole global batches) ends at the order's end
            walked = [(epoch, p) for p in positions
                      if self.last_batch != 'keep' or p < self.length]
        keys = [SampleKey(self.seed, e, p, int(self._order(e)[p % self.length]))
                for e, p in walked]
        return KeyBatch(keys, epoch, number)

    def _checked_number(self, epoch, number):
        """``number`` as an int if the pass of ``epoch`` has such a batch, else ValueError."""
        count = self.batches_in(epoch)
        number = check_int(number, 'number', minimum=0)
        if number >= count:
            raise ValueError('batch number %d of epoch %d, which has %d batches: ask for one '
                             'in [0, %d)' % (number, epoch, count, count))
        return number

    def _span(self, epoch):
        """``(first, stop)``: the pass of ``epoch`` runs global batches ``first..stop-1``
        (counted from the epoch's start; with rollover, from the first epoch's)."""
        size, count = self.global_batch, self.length
        if self.last_batch == 'rollover':
            return epoch * count // size, (epoch + 1) * count // size
        if self.last_batch == 'discard':
            return 0, count // size
        return 0, -(-count // size)

    def _order(self, epoch):
        """The order of ``epoch``, of all ranks (the two latest are kept: a rolled-over
        batch spans two epochs)."""
        order = self._orders.get(epoch)
        if order is None:
            order = self._new_order(epoch)
            self._orders = {key: value for key, value in self._orders.items()
                            if key == epoch - 1}
            self._orders[epoch] = order
        return order

    def _new_order(self, epoch):
        """The order of ``epoch``, computed."""
        if self._source is None:
            return (epoch_order(self.seed, epoch, self.length) if self.shuffle
                    else np.arange(self.length, dtype=np.int64))
        return self._source.checked_order(epoch)
