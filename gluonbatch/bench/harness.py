"""How the benchmark times: one call, one epoch, and the one interleaved-rounds loop.

Every case measures through :func:`interleave`: warm-up, then rounds in which every
contender runs once, starting from a different contender each round, and the median of
each contender's rounds.
"""
import contextlib
import functools
import gc
import statistics
import time
import tracemalloc
from collections.abc import Mapping

import mxnet as mx

from .._core.checks import check_int, describe
from .._core.tree import array_leaves

__all__ = ['wait_all', 'time_call', 'time_epoch', 'interleave', 'interleaved_medians',
           'back_to_back_medians', 'host_temporaries']


def wait_all(result):
    """Wait for every NDArray in ``result`` (an NDArray or a nested batch of them).

    >>> wait_all([mx.nd.ones(2), (mx.nd.zeros(1), None)])
    """
    for array in array_leaves(result):
        array.wait_to_read()


@contextlib.contextmanager
def _gc_paused():
    # a collection inside a timed region would be charged to whichever contender ran
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def time_call(fn):
    """Seconds taken by ``fn()`` until its result is ready; the result is freed afterwards.

    The garbage collector is paused during the call.

    >>> time_call(lambda: mx.nd.ones((2, 3))) > 0
    True
    """
    with _gc_paused():
        start = time.perf_counter()
        result = fn()
        wait_all(result)
        elapsed = time.perf_counter() - start
    del result
    mx.nd.waitall()  # MXNet frees NDArrays on its engine; finish that outside the timing.
    return elapsed


def time_epoch(loader):
    """Seconds per batch of one epoch of ``loader``, every batch waited for and dropped.

    >>> time_epoch([mx.nd.ones(2), mx.nd.ones(3)]) > 0
    True
    """
    with _gc_paused():
        batches = 0
        start = time.perf_counter()
        for batch in loader:
            wait_all(batch)
            del batch
            batches += 1
        elapsed = time.perf_counter() - start
    mx.nd.waitall()
    return elapsed / batches


def _check_measures(measures, name):
    if not isinstance(measures, Mapping):
        raise TypeError('%s must be a dict of name -> callable, got %s'
                        % (name, describe(measures)))
    for key, fn in measures.items():
        if not callable(fn):
            raise TypeError('%s[%r] must be callable, got %s' % (name, key, describe(fn)))


def interleave(contenders, rounds, follow=None):
    """The benchmark's one timing loop: interleaved, rotated rounds and their medians.

    One warm-up run per contender (in order), then ``rounds`` rounds. ``gc.collect()`` runs
    before each round; round ``r`` runs every contender once, in turn, starting at
    contender ``r % len(contenders)``, so no contender always runs right after the same
    one and drifts in machine speed hit all contenders alike.

    Parameters
    ----------
    contenders : dict of str -> callable
        Each takes no argument, runs its contender once and returns the measurement
        (seconds, or seconds per batch or record).
    rounds : int
        The number of rounds, at least 1.
    follow : dict of str -> callable, optional
        Measurements reported beside the contenders but not compared with them (raw reads,
        file copies): each runs once per round after the contenders, always in the given
        order, and once as a warm-up after the contenders' warm-ups.

    Returns
    -------
    medians : dict of str -> float
        The median over rounds of every contender and every ``follow`` measurement.
    samples : dict of str -> list of float
        Their measurements, one per round, in round order.

    Raises
    ------
    TypeError
        If ``contenders`` or ``follow`` is not a dict of callables, or ``rounds`` is not an
        integer.
    ValueError
        If ``contenders`` is empty or ``rounds`` is below 1.

    Examples
    --------
    >>> calls = []
    >>> def contender(name, seconds):
    ...     def run():
    ...         calls.append(name)
    ...         return seconds.pop(0)
    ...     return run
    >>> medians, samples = interleave({'a': contender('a', [9, 1, 2, 3]),
    ...                                'b': contender('b', [9, 5, 4, 6])}, rounds=3)
    >>> ' '.join(calls)  # warm-up, then rounds starting at a, b, a
    'a b a b b a a b'
    >>> medians, samples['b']
    ({'a': 2, 'b': 5}, [5, 4, 6])
    """
    _check_measures(contenders, 'contenders')
    follow = {} if follow is None else follow
    _check_measures(follow, 'follow')
    rounds = check_int(rounds, 'rounds', minimum=1)
    if not contenders:
        raise ValueError('contenders is empty: there is nothing to time')
    names = list(contenders)
    for name in names:
        contenders[name]()
    for fn in follow.values():
        fn()
    samples = {name: [] for name in names + list(follow)}
    for round_index in range(rounds):
        gc.collect()
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(contenders[name]())
        for name, fn in follow.items():
            samples[name].append(fn())
    return {name: statistics.median(values) for name, values in samples.items()}, samples


def interleaved_medians(contenders, rounds, times=None):
    """Median seconds per contender over ``rounds`` interleaved rounds of :func:`time_call`.

    Parameters
    ----------
    contenders : dict of str -> callable
        Each callable takes no argument and returns an NDArray (or tuples/lists of them).
    rounds : int
        As in :func:`interleave`, which runs the rounds.
    times : dict, optional
        If given, filled with the list of per-round seconds of every contender.

    Returns
    -------
    dict of str -> float

    Examples
    --------
    >>> medians = interleaved_medians({'ones': lambda: mx.nd.ones(4)}, rounds=2)
    >>> list(medians), medians['ones'] > 0
    (['ones'], True)
    """
    _check_measures(contenders, 'contenders')
    medians, samples = interleave({name: functools.partial(time_call, fn)
                                   for name, fn in contenders.items()}, rounds)
    if times is not None:
        times.update(samples)
    return medians


def back_to_back_medians(contenders, rounds):
    """Median seconds per contender when each runs ``rounds`` times in a row (warm caches).

    Interleaving makes every call start cold; in a DataLoader worker, batchify calls of one
    kind follow each other. Both views are reported for small cases, where the difference
    is large.

    >>> back_to_back_medians({'ones': lambda: mx.nd.ones(4)}, rounds=2)['ones'] > 0
    True
    """
    medians = {}
    for name, fn in contenders.items():
        time_call(fn)
        medians[name] = statistics.median(time_call(fn) for _ in range(rounds))
    return medians


def host_temporaries(fn):
    """Peak bytes ``fn()`` allocates through numpy/Python while it runs (via tracemalloc).

    >>> import numpy as np
    >>> host_temporaries(lambda: mx.nd.array(np.ones(1 << 20))) >= 8 << 20
    True
    """
    gc.collect()
    mx.nd.waitall()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = fn()
        wait_all(result)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    del result
    mx.nd.waitall()
    return max(0, peak - before)
