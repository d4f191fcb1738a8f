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

It is also where a sampler or loader says, as it is made, that its every pass is empty
(:func:`empty_passes`, :func:`warn_empty_passes`).
"""
import os
import sys
import warnings
from typing import Any, Literal, TypeAlias

import numpy as np

from .._core.checks import check_choice, check_int, describe
from .._core.wording import plural
from ..seeded.keys import check_epoch, check_seed

__all__ = ['LOADER_FORMAT', 'LAST_BATCH', 'DESCRIPTION', 'check_format', 'position',
           'check_description', 'order_differences', 'empty_passes', 'warn_empty_passes',
           'warn_no_batches']

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


def empty_passes(length: int, batch_size: int, last_batch: str, num_parts: int = 1
                 ) -> str | None:
    """Why every pass over ``length`` samples in batches of ``batch_size`` on each of
    ``num_parts`` ranks is empty with ``last_batch``, and what to change; None if a pass
    has batches, or if there is no sample at all.

    A pass is empty when its ``length`` samples (of all ranks) do not make one global batch
    of ``batch_size * num_parts`` and ``last_batch`` drops the rest: ``'discard'`` does
    every pass, ``'rollover'`` carries it into the next pass, so that the first passes are
    empty and a batch comes only every few passes.

    Examples
    --------
    >>> print(empty_passes(16, 64, 'discard'))
    batch_size=64 is larger than the 16 samples: with last_batch='discard' every pass is \
empty (len() is 0); use last_batch='keep', or a batch_size of at most 16
    >>> print(empty_passes(16, 64, 'rollover'))  # doctest: +ELLIPSIS
    batch_size=64 ...: with last_batch='rollover' len() is 0 and the first 3 passes are \
empty: the samples carry over, so a batch comes only every 4 passes; use ...
    >>> empty_passes(16, 64, 'keep') is None, empty_passes(64, 64, 'discard') is None
    (True, True)
    """
    size = batch_size * num_parts
    if not 0 < length < size or last_batch not in ('discard', 'rollover'):
        return None
    samples = plural(length, 'sample')
    if num_parts == 1:
        why = 'batch_size=%d is larger than the %s' % (batch_size, samples)
    else:
        why = ('the global batch of %d (batch_size=%d x num_parts=%d) is larger than the %s'
               % (size, batch_size, num_parts, samples))
    if last_batch == 'discard':
        what = "with last_batch='discard' every pass is empty (len() is 0)"
    else:
        # pass e ends after (e + 1) * length samples: its first batch is in pass
        # ceil(size / length) - 1, and then one comes every size / length passes
        empty = -(-size // length) - 1
        every = ('every %d passes' % (size // length) if size % length == 0
                 else 'about every %.1f passes' % (size / length))
        what = ("with last_batch='rollover' len() is 0 and the first %s: the samples carry "
                'over, so a batch comes only %s'
                % ('pass is empty' if empty == 1 else '%d passes are empty' % empty, every))
    # several ranks keep a short last batch only as whole global batches: 'pad' does
    fixes = ["last_batch='keep'" if num_parts == 1 else "last_batch='pad'"]
    if length // num_parts:
        fixes.append('a batch_size of at most %d' % (length // num_parts))
    return '%s: %s; use %s' % (why, what, ', or '.join(fixes))


def warn_empty_passes(length: int, batch_size: int, last_batch: str,
                      num_parts: int = 1) -> bool:
    """Warn (a ``UserWarning`` at the caller's line outside gluonbatch) if every pass is
    empty, with :func:`empty_passes`'s message; returns whether it warned. Samplers and
    loaders call it once, as they are made, never per pass."""
    message = empty_passes(length, batch_size, last_batch, num_parts)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=_outside_stacklevel())
    return message is not None


def warn_no_batches(batch_sampler: Any, length: int) -> bool:
    """Warn as :func:`warn_empty_passes` does if ``batch_sampler``, one the caller made
    (MXNet's ``BatchSampler``, say), gives no batch over a dataset of ``length`` samples;
    returns whether it warned.

    >>> import mxnet as mx, warnings
    >>> sampler = mx.gluon.data.BatchSampler(mx.gluon.data.SequentialSampler(16), 64,
    ...                                      'discard')
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter('always')
    ...     warn_no_batches(sampler, 16)
    True
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    the batch_sampler (BatchSampler) gives no batch over the 16 samples: every pass is ...
    """
    if length <= 0 or len(batch_sampler) > 0:
        return False
    warnings.warn('the batch_sampler (%s) gives no batch over the %d samples: every pass is '
                  'empty; give it a smaller batch size, or a last_batch that keeps a short '
                  'batch (\'keep\')' % (type(batch_sampler).__name__, length), UserWarning,
                  stacklevel=_outside_stacklevel())
    return True


#: The folder of the gluonbatch package, whose frames a warning's location skips.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _outside_stacklevel():
    """The ``stacklevel`` that makes a ``warnings.warn`` in the function calling this one
    name the first frame outside gluonbatch: the user's line, however deep the call."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level
