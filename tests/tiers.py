"""Parameter matrices split between the test tiers.

A test over the product of several parameter lists (sample case x worker mode x shuffle x
last batch, ...) runs every combination in the full tier (``make test-all``) and, in the
everyday tier (``make test``), a *covering* of them: with :func:`pairwise`, every value of
every list meets every value of every other list in at least one combination that runs;
with :func:`each_value`, every value of every list runs at least once. Defects that need one
value (or an interaction of two) show in the everyday tier; the full product still runs
before anything lands.

>>> names, params = pairwise(shuffle=[False, True], workers={'main': 0, '2proc': 2},
...                          last_batch=['keep', 'discard'])
>>> names
'shuffle,workers,last_batch'
>>> len(params), sum(1 for p in params if not p.marks)
(8, 4)
>>> [p.id for p in each_value(kind=['a', 'b'], num_workers=[0, 1, 2])[1] if not p.marks]
['a-0', 'a-2', 'b-1']
"""
import itertools

import pytest

__all__ = ['pairwise', 'each_value']


def _axis(values):
    """``(id, value)`` pairs of one parameter: a dict names its values, a list's values name
    themselves."""
    if isinstance(values, dict):
        return list(values.items())
    return [(str(value), value) for value in values]


def _covered(indices, strength):
    """The tuples of ``strength`` values (fewer, for fewer parameters) that a combination of
    indices covers."""
    values = list(enumerate(indices))
    return set(itertools.combinations(values, min(strength, len(values))))


def _covering(sizes, strength):
    """Index tuples of a covering of the product of ``sizes`` (every tuple of ``strength``
    values in some combination), chosen greedily (the combination that covers most of what
    is uncovered, the first in product order on ties), so the choice is the same on every
    run."""
    product = list(itertools.product(*(range(size) for size in sizes)))
    uncovered = set().union(*(_covered(combo, strength) for combo in product))
    chosen = []
    while uncovered:
        best = max(product, key=lambda combo: len(_covered(combo, strength) & uncovered))
        chosen.append(best)
        uncovered -= _covered(best, strength)
    return set(chosen)


def _tiered(strength, axes):
    named = [_axis(values) for values in axes.values()]
    keep = _covering([len(axis) for axis in named], strength)
    params = []
    for combo in itertools.product(*(range(len(axis)) for axis in named)):
        chosen = [axis[index] for axis, index in zip(named, combo)]
        params.append(pytest.param(*(value for _, value in chosen),
                                   id='-'.join(name for name, _ in chosen),
                                   marks=() if combo in keep else pytest.mark.slow))
    return ','.join(axes), params


def pairwise(**axes):
    """``(argnames, params)`` for ``pytest.mark.parametrize``: the whole product of ``axes``
    (name -> list of values, or dict of id -> value), the combinations outside a pairwise
    covering marked ``slow``."""
    return _tiered(2, axes)


def each_value(**axes):
    """Like :func:`pairwise`, but the everyday tier only runs every value of every list at
    least once (for two lists, where a pairwise covering is the whole product)."""
    return _tiered(1, axes)
