"""Seeded loaders' batches and their resumable state: what ``seed=`` adds to
:class:`~gluonbatch.DataLoader`.

With a seed the loader's batches come from a
:class:`~gluonbatch.samplers.SeededBatchSampler` built from the loader's own
arguments (``batch_size``, ``shuffle``, ``last_batch``, and a
:class:`~gluonbatch.samplers.SplitSampler`'s rank, or another
:class:`~gluonbatch.samplers.RankSampler`'s -- a
:class:`~gluonbatch.samplers.ShardWindowSampler`'s -- order and rank), and the
loader's state is a small JSON-serializable dict: its sampler's state -- the next batch to
deliver (``epoch`` and ``batch``) and what the batch numbers mean (``seed``,
``global_batch_size``, ``length``, ``shuffle``, ``last_batch``, and with an order its
``description`` as ``order``, which loading checks) -- and a ``format``.

Examples
--------
>>> from gluonbatch.samplers import SeededBatchSampler
>>> sampler = SeededBatchSampler(1000, 32, seed=7, last_batch='rollover')
>>> state = loader_state(sampler.state_dict())
>>> state
{'format': 'gluonbatch.loader/1', 'seed': 7, 'epoch': 0, 'batch': 0, 'global_batch_size': 32, \
'length': 1000, 'shuffle': True, 'last_batch': 'rollover'}
>>> checked_state(dict(state, batch=30)) == dict(state, batch=30)
True
>>> checked_state(sampler.state_dict()) == sampler.state_dict()   # a sampler's loads too
True
>>> checked_state(dict(state, format='another/2'))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: state has format 'another/2', but this loader reads states of format \
'gluonbatch.loader/1' (a gluonbatch loader's) or of none (a SeededBatchSampler's): ...
"""
from typing import Any

from .._core.checks import describe
from ..samplers import KeyBatch, RankSampler, SeededBatchSampler
from ..seeded.keys import check_seed
from ..samplers.state import LOADER_FORMAT, LastBatch, check_format

__all__ = ['FORMAT', 'KEYS', 'Resumable', 'seeded_batch_sampler', 'loader_state',
           'checked_state']

#: The ``format`` of a loader's state dict (a sampler's state is the same dict without it).
FORMAT = LOADER_FORMAT
#: The keys of a loader's state dict (all but ``format`` in a sampler's).
KEYS = ('format', 'seed', 'epoch', 'batch', 'global_batch_size', 'length', 'shuffle',
        'last_batch')


def seeded_batch_sampler(length: int, seed: int, batch_size: int | None, shuffle: bool,
                         sampler: object, last_batch: LastBatch | None,
                         batch_sampler: object) -> SeededBatchSampler:
    """The :class:`~gluonbatch.samplers.SeededBatchSampler` of a loader made with
    ``seed`` and MXNet's DataLoader arguments; ValueError for arguments that would order the
    samples some other way.

    A :class:`~gluonbatch.samplers.SplitSampler` gives the rank and whether to shuffle
    (the seed orders the samples: its own seed and ``last_part`` are not used); any other
    :class:`~gluonbatch.samplers.RankSampler` gives the order of every epoch too."""
    seed = check_seed(seed)
    if batch_sampler is not None:
        if not isinstance(batch_sampler, SeededBatchSampler):
            raise ValueError('a loader with seed= makes its batches itself: pass batch_size, '
                             'shuffle and last_batch (and a SplitSampler for a rank, or a '
                             'ShardWindowSampler), or a SeededBatchSampler, not %s'
                             % type(batch_sampler).__name__)
        if batch_sampler.seed != seed:
            raise ValueError('seed=%d but the SeededBatchSampler has seed=%d'
                             % (seed, batch_sampler.seed))
        if batch_sampler.length != length:
            raise ValueError('the SeededBatchSampler is for %d samples, but the dataset has '
                             '%d: make it with length=len(dataset)'
                             % (batch_sampler.length, length))
        if batch_size is not None or shuffle or sampler is not None or last_batch:
            raise ValueError('batch_size, shuffle, sampler and last_batch must not be given '
                             'with a batch_sampler: the SeededBatchSampler has its own')
        return batch_sampler
    if batch_size is None:
        raise ValueError('a loader with seed= needs batch_size')
    if sampler is not None:
        if not isinstance(sampler, RankSampler):
            raise ValueError('a loader with seed= orders the samples itself; of samplers it '
                             'takes a SplitSampler (for its rank) or another RankSampler, '
                             'such as a ShardWindowSampler (its order and rank), not %s'
                             % type(sampler).__name__)
        if shuffle:
            raise ValueError('shuffle=True with a sampler: the %s says whether to shuffle'
                             % type(sampler).__name__)
        shuffle = sampler.shuffle  # the batch sampler checks the rest (see its ``order``)
    return SeededBatchSampler(length, batch_size, seed, shuffle=shuffle,
                              last_batch=last_batch or 'keep', order=sampler)


def loader_state(sampler_state: dict) -> dict:
    """The state dict of a loader whose sampler's state is ``sampler_state``."""
    return {'format': FORMAT, **sampler_state}


def checked_state(state: dict) -> dict:
    """``state`` if it is a loader's state dict (a dict of the right ``format``, with every
    key) or a :class:`~gluonbatch.samplers.SeededBatchSampler`'s, which is the same dict
    without ``format``; TypeError or ValueError naming what is wrong. The sampler checks
    the values."""
    if not isinstance(state, dict):
        raise TypeError('state must be the dict state_dict() returned, got %s'
                        % describe(state))
    # a sampler's state means what a loader's does: it is the loader's without a format
    missing = [key for key in KEYS if key not in state and key != 'format']
    if missing:
        raise ValueError("state lacks %s; a loader state has %s (a sampler's all but "
                         'format): pass a dict from state_dict()'
                         % (', '.join(missing), ', '.join(KEYS)))
    check_format(state, 'this loader')
    return state


class Resumable:
    """What a seeded loader adds: its state (:meth:`state_dict`, :meth:`load_state_dict`)
    and its epochs (:meth:`set_epoch`). The loader sets ``_seed`` and ``_batch_sampler``
    and calls ``_begin_pass`` once the sampler's pass has begun, ``_delivering``
    as each batch reaches the caller and ``_end_pass`` as the pass ends, finished or
    not. The position of a pass under way is the batches it delivered (``_delivered``,
    None between passes); a position set during it (:meth:`set_epoch`,
    :meth:`load_state_dict`) has the last word as it ends."""

    # set by the loader: its seed, and its batch sampler (a SeededBatchSampler when seeded)
    _seed: int | None
    _batch_sampler: Any
    _delivered: int | None = None
    _position_set = False

    def _begin_pass(self):
        if self._seed is not None:
            self._delivered, self._position_set = 0, False

    def _delivering(self, batch):
        """Note that the sampler's ``batch`` is about to reach the caller."""
        if self._delivered is not None and isinstance(batch, KeyBatch):
            self._delivered += 1

    def _end_pass(self):
        """The next pass begins where :meth:`state_dict` says: after the last batch
        delivered, in the same epoch if the pass was left early."""
        if self._delivered is not None and not self._position_set:
            self._batch_sampler.load_state_dict(
                self._batch_sampler.state_after(self._delivered))
        self._delivered, self._position_set = None, False

    def _seeded_only(self, method):
        if self._seed is None:
            raise ValueError('%s() needs a seeded loader (seed=...): without a seed its '
                             'batches cannot be made again' % method)

    def state_dict(self) -> dict:
        """Where the run is: a small JSON-serializable dict naming the next batch (``epoch``
        and ``batch``) beside the ``seed``, what else the batch numbers depend on
        (``global_batch_size``, ``length``, ``shuffle``, ``last_batch``) and a ``format``.
        Taken during a pass or after one left early (``break``), the batch after the last
        one delivered, in the same epoch; after a finished pass, the next epoch's first. A
        seeded loader only (ValueError otherwise)."""
        self._seeded_only('state_dict')
        if self._delivered is None or self._position_set:
            return loader_state(self._batch_sampler.state_dict())
        return loader_state(self._batch_sampler.state_after(self._delivered))

    def load_state_dict(self, state: dict) -> None:
        """Make the next pass continue where ``state`` (from :meth:`state_dict`, perhaps
        of another process, with other ``num_workers``) says: the batches an uninterrupted
        run would have delivered next, none of those before computed again. TypeError or
        ValueError naming what is wrong with a state of another format, seed or sampler,
        or a batch beyond its epoch."""
        self._seeded_only('load_state_dict')
        self._batch_sampler.load_state_dict(checked_state(state))
        self._position_set = self._delivered is not None  # during a pass: it wins

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass the first batch of ``epoch`` (each pass advances the epoch
        by itself; this sets it, as a distributed sampler's ``set_epoch`` does). Called
        during a pass, it takes effect as the pass ends."""
        if self._seed is not None:
            self._batch_sampler.set_epoch(epoch)
            self._position_set = self._delivered is not None  # during a pass: it wins
            return
        sampler: Any = getattr(self._batch_sampler, '_sampler', None)
        if not hasattr(sampler, 'set_epoch'):
            raise ValueError('set_epoch() needs a seeded loader (seed=...) or a sampler with '
                             'epochs (SplitSampler), got %s' % type(sampler).__name__)
        sampler.set_epoch(epoch)
