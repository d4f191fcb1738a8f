"""Seeded loaders' batches and their resumable state: what ``seed=`` adds to
:class:`~gluonbatch.dataloader.pool.PooledLoader`.

With a seed the loader's batches come from a
:class:`~gluonbatch.seeded.SeededBatchSampler` built from the loader's own arguments
(``batch_size``, ``shuffle``, ``last_batch``, and a
:class:`~gluonbatch.sampler.SplitSampler`'s rank), and the loader's state is a small
JSON-serializable dict: its sampler's state -- the next batch to deliver (``epoch`` and
``batch``) and what the batch numbers mean (``seed``, ``global_batch_size``, ``length``,
``shuffle``, ``last_batch``, which loading checks) -- and a ``format``.

Examples
--------
>>> from gluonbatch.seeded import SeededBatchSampler
>>> sampler = SeededBatchSampler(1000, 32, seed=7, last_batch='rollover')
>>> state = loader_state(sampler.state_dict())
>>> state
{'format': 'gluonbatch.loader/1', 'seed': 7, 'epoch': 0, 'batch': 0, 'global_batch_size': 32, \
'length': 1000, 'shuffle': True, 'last_batch': 'rollover'}
>>> checked_state(dict(state, batch=30)) == dict(state, batch=30)
True
>>> checked_state(dict(state, format='another/2'))  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: state has format 'another/2', but this loader reads 'gluonbatch.loader/1': ...
"""
from .._core.checks import describe
from ..sampler import SplitSampler
from ..seeded import SeededBatchSampler
from ..seeded.keys import check_seed

__all__ = ['FORMAT', 'KEYS', 'seeded_batch_sampler', 'loader_state', 'checked_state']

#: The ``format`` of a loader's state dict.
FORMAT = 'gluonbatch.loader/1'
#: The keys of a loader's state dict.
KEYS = ('format', 'seed', 'epoch', 'batch', 'global_batch_size', 'length', 'shuffle',
        'last_batch')


def seeded_batch_sampler(length, seed, batch_size, shuffle, sampler, last_batch,
                         batch_sampler):
    """The :class:`~gluonbatch.seeded.SeededBatchSampler` of a loader made with ``seed``
    and MXNet's DataLoader arguments; ValueError for arguments that would order the
    samples some other way."""
    seed = check_seed(seed)
    if batch_sampler is not None:
        if not isinstance(batch_sampler, SeededBatchSampler):
            raise ValueError('a loader with seed= makes its batches itself: pass batch_size, '
                             'shuffle and last_batch (and a SplitSampler for a rank), or a '
                             'SeededBatchSampler, not %s' % type(batch_sampler).__name__)
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
    parts = 1, 0
    if sampler is not None:
        if not isinstance(sampler, SplitSampler):
            raise ValueError('a loader with seed= orders the samples itself; of samplers it '
                             'takes a SplitSampler (for its rank), not %s'
                             % type(sampler).__name__)
        if shuffle:
            raise ValueError('shuffle=True with a sampler: the SplitSampler says whether to '
                             'shuffle')
        parts, shuffle = (sampler.num_parts, sampler.part_index), sampler.shuffle
    return SeededBatchSampler(length, batch_size, seed, shuffle=shuffle,
                              last_batch=last_batch or 'keep', num_parts=parts[0],
                              part_index=parts[1])


def loader_state(sampler_state):
    """The state dict of a loader whose sampler's state is ``sampler_state``."""
    return {'format': FORMAT, **sampler_state}


def checked_state(state):
    """``state`` if it is a loader's state dict (a dict of the right ``format``, with every
    key); TypeError or ValueError naming what is wrong. The sampler checks the values."""
    if not isinstance(state, dict):
        raise TypeError('state must be the dict state_dict() returned, got %s'
                        % describe(state))
    missing = [key for key in KEYS if key not in state]
    if missing:
        raise ValueError('state lacks %s; a loader state has %s: pass a dict from '
                         'state_dict()' % (', '.join(missing), ', '.join(KEYS)))
    if state['format'] != FORMAT:
        raise ValueError('state has format %r, but this loader reads %r: pass a dict from a '
                         "gluonbatch loader's state_dict()" % (state['format'], FORMAT))
    return state
