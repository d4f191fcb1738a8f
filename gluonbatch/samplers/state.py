"""The checks of a :class:`~gluonbatch.samplers.SeededBatchSampler`'s state, before
it loads.

A state names where a run is, ``epoch`` and ``batch``, and what its batch numbers mean:
the fields of :data:`DESCRIPTION` and, for a sampler with an order, the order's
``description`` as ``'order'``. A loader's state is the same dict with a ``format``
(:data:`LOADER_FORMAT`), so either loads where the other does. Each check names the
field, what it holds and what was expected, and nothing changes before all have passed.

Examples
--------
>>> position({'epoch': 2, 'batch': 1, 'format': LOADER_FORMAT})
(2, 1)
>>> position({'epoch': True, 'batch': 0})
Traceback (most recent call last):
...
TypeError: state['epoch'] must be an integer, got True (bool)
>>> order_differences({'window': 2, 'shards': 8}, {'window': 2, 'shards': 4})
["state['order']['shards'] is 8, but this sampler's order has 4"]
"""
from typing import Literal, TypeAlias

import numpy as np

from .._core.checks import check_choice, check_int, describe
from ..seeded.keys import check_epoch, check_seed

__all__ = ['LOADER_FORMAT', 'LAST_BATCH', 'DESCRIPTION', 'check_format', 'position',
           'check_description', 'order_differences']

#: The ``format`` of a loader's state dict; a sampler's state is the same dict without it.
LOADER_FORMAT = 'gluonbatch.loader/1'
#: What happens to an epoch's last, incomplete global batch.
LAST_BATCH = ('keep', 'discard', 'pad', 'rollover')
#: A ``last_batch`` value (one of :data:`LAST_BATCH`).
LastBatch: TypeAlias = Literal['keep', 'discard', 'pad', 'rollover']
#: What a state says of the sampler that made it, beside where the run is (``epoch``,
#: ``batch``): what its batch numbers mean. A sampler with an ``order`` adds ``'order'``,
#: the order's ``description``.
DESCRIPTION = ('seed', 'global_batch_size', 'length', 'shuffle', 'last_batch')


def check_format(state: dict, reader: str = 'this sampler') -> None:
    """Nothing if ``state`` (a dict) has no ``format`` or the loader's; else TypeError or
    ValueError naming it, as ``reader`` (the message's subject) reads it."""
    if 'format' not in state:
        return
    value = state['format']
    if not isinstance(value, str):
        raise TypeError("state['format'] must be the str %r or absent, got %r (%s)"
                        % (LOADER_FORMAT, value, describe(value)))
    if value != LOADER_FORMAT:
        raise ValueError("state has format %r, but %s reads states of format %r (a "
                         "gluonbatch loader's) or of none (a SeededBatchSampler's): pass a "
                         "dict from a gluonbatch loader's state_dict() or a sampler's"
                         % (value, reader, LOADER_FORMAT))


def position(state: dict) -> tuple[int, int]:
    """``(epoch, batch)`` of ``state``, each an int of its range (its epoch's batches are
    the sampler's to count): TypeError or ValueError naming what is wrong, the ``format``
    too."""
    if not isinstance(state, dict):
        raise TypeError('state must be a dict with epoch and batch, got %s' % describe(state))
    missing = sorted({'epoch', 'batch'} - set(state))
    if missing:
        raise ValueError('state lacks %s; it has %s' % (', '.join(missing),
                                                          sorted(map(str, state))))
    check_format(state)
    # epochs are bounded here, or a huge one would fail deep in numpy or the key hashing
    return (check_epoch(state['epoch'], "state['epoch']"),
            check_int(state['batch'], "state['batch']", minimum=0))


def _described(state, key):
    """``state[key]`` (one of :data:`DESCRIPTION`) as the sampler's attribute of that name
    would be: TypeError or ValueError if it could be no sampler's."""
    value, name = state[key], 'state[%r]' % key
    if key == 'seed':
        return check_seed(value, name)
    if key == 'last_batch':
        return check_choice(value, name, LAST_BATCH)
    if key == 'shuffle':
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError('%s must be True or False, got %r (%s)'
                            % (name, value, describe(value)))
        return bool(value)
    return check_int(value, name, minimum=1 if key == 'global_batch_size' else 0)


def check_description(state: dict, ours: dict) -> None:
    """ValueError (TypeError for a field of the wrong type) naming what ``state`` says of
    its sampler that differs from ``ours``, the state of this sampler: the batch numbers
    would name other samples. A state of ``epoch`` and ``batch`` alone passes."""
    for key in DESCRIPTION:
        if key in state and _described(state, key) != ours[key]:
            raise ValueError(
                "state[%r] is %r, but this sampler's %s is %r: the state is of a run "
                'with other batches; resume with the %s it was saved with'
                % (key, state[key], key, ours[key], key))
    if 'order' not in state and not any(key in state for key in DESCRIPTION):
        return
    theirs, mine = state.get('order'), ours.get('order')
    if theirs == mine:
        return
    if mine is None:
        raise ValueError("state['order'] is %r, but this sampler has no order: the state "
                         'is of a run with an order (a ShardWindowSampler); resume with '
                         'it' % (theirs,))
    if 'order' not in state:
        raise ValueError("the state has no 'order', but this sampler's order is %r: the "
                         'state is of a run without one; resume without it' % (mine,))
    if not isinstance(theirs, dict):
        raise TypeError("state['order'] must be a dict, the description of the order the "
                        'state was saved with, got %r (%s)' % (theirs, describe(theirs)))
    raise ValueError("state['order'] is %r, but this sampler's order is %r: %s; the state "
                     'is of a run with other batches, resume with the order it was saved '
                     'with' % (theirs, mine, '; '.join(order_differences(theirs, mine))))


def order_differences(theirs: dict, mine: dict) -> list[str]:
    """Each entry of the order descriptions ``theirs`` (a state's) and ``mine`` (this
    sampler's) that differs, or is in one only, as a clause naming it."""
    found = []
    for key in list(theirs) + [key for key in mine if key not in theirs]:
        name = "state['order'][%r]" % (key,)
        if key not in mine:
            found.append("%s is %r, but this sampler's order has none"
                         % (name, theirs[key]))
        elif key not in theirs:
            found.append("state['order'] has no %r, but this sampler's order has %r"
                         % (key, mine[key]))
        elif theirs[key] != mine[key]:
            found.append("%s is %r, but this sampler's order has %r"
                         % (name, theirs[key], mine[key]))
    return found
