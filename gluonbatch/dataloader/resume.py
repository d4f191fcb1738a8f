"""Seeded loaders' batches and their resumable state: what ``seed=`` adds to
:class:`~gluonbatch.dataloader.pool.PooledLoader`.

With a seed the loader's batches come from a
:class:`~gluonbatch.seeded.SeededBatchSampler` built from the loader's own arguments
(``batch_size``, ``shuffle``, ``last_batch``, and a
:class:`~gluonbatch.sampler.SplitSampler`'s rank), and the loader's state is a small dict::

    {'format': 'gluonbatch.loader/1', 'seed': 7, 'epoch': 2, 'batch': 130,
     'global_batch_size': 64}

naming the next batch to deliver: batch ``batch`` of the pass over epoch ``epoch``,
counted in global batches of ``global_batch_size`` samples (a run resumes with that size;
the numbers of workers, devices and ranks may change).

Examples
--------
>>> state = loader_state(7, 2, 130, 64)
>>> state
{'format': 'gluonbatch.loader/1', 'seed': 7, 'epoch': 2, 'batch': 130, 'global_batch_size': 64}
>>> checked_state(state, seed=7)
{'epoch': 2, 'batch': 130, 'global_batch_size': 64}
"""
from ..sampler import SplitSampler
from ..seeded import SeededBatchSampler
from ..seeded.keys import check_seed

__all__ = ['FORMAT', 'seeded_batch_sampler', 'loader_state', 'checked_state']

#: The ``format`` of a loader's state dict.
FORMAT = 'gluonbatch.loader/1'


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


def loader_state(seed, epoch, batch, global_batch_size):
    """The state dict of a loader whose next batch is ``batch`` of epoch ``epoch``."""
    return {'format': FORMAT, 'seed': seed, 'epoch': epoch, 'batch': batch,
            'global_batch_size': global_batch_size}


def checked_state(state, seed):
    """``{'epoch', 'batch'}`` of a loader state dict made with ``seed``; TypeError or
    ValueError naming what is wrong with it."""
    if not isinstance(state, dict):
        raise TypeError('state must be the dict state_dict() returned, got %s'
                        % type(state).__name__)
    missing = sorted({'format', 'seed', 'epoch', 'batch', 'global_batch_size'} - set(state))
    if missing:
        raise ValueError('state lacks %s; a loader state has format, seed, epoch, batch and '
                         'global_batch_size' % ', '.join(missing))
    if state['format'] != FORMAT:
        raise ValueError('state has format %r; this loader reads %r' % (state['format'],
                                                                       FORMAT))
    if check_seed(state['seed'], "state['seed']") != seed:
        raise ValueError("state['seed'] is %d but this loader has seed=%d: its batches would "
                         'not continue that run' % (state['seed'], seed))
    return {key: state[key] for key in ('epoch', 'batch', 'global_batch_size')}
