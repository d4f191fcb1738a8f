"""Parameter matrices split between the test tiers.

A test over the product of several parameter lists (sample case x worker mode x shuffle x
last batch, ...) runs every combination in the full tier (``make test-all``) and, in the
everyday tier (``make test``), a *pairwise covering* of them: every value of every list
meets every value of every other list in at least one combination that runs. Defects that
need one value or an interaction of two show in the everyday tier; the full product still
runs before anything lands.

>>> names, params = pairwise(shuffle=[False, True], workers={'main': 0, '2proc': 2},
...                          last_batch=['keep', 'discard'])
>>> names
'shuffle,workers,last_batch'
>>> len(params), sum(1 for p in params if not p.marks)
(8, 4)
>>> [p.id for p in pairwise(n=[1, 2, 3])[1] if not p.marks]
['1', '2', '3']
"""
import itertools

import pytest

__all__ = ['pairwise']


def _axis(values):
    """``(id, value)`` pairs of one parameter: a dict names its values, a list's values name
    themselves."""
    if isinstance(values, dict):
        return list(values.items())
    return [(str(value), value) for value in values]


def _pairs(indices):
    """The pairs of values a combination of indices covers (its values, for one parameter)."""
    values = list(enumerate(indices))
    return set(itertools.combinations(values, min(2, len(values))))


def _covering(sizes):
    """Index tuples of a pairwise covering of the product of ``sizes``, chosen greedily (the
    combination that covers most uncovered pairs, the first in product order on ties), so
    the choice is the same on every run."""
    product = list(itertools.product(*(range(size) for size in sizes)))
    uncovered = set().union(*(_pairs(combo) for combo in product))
    chosen = []
    while uncovered:
        best = max(product, key=lambda combo: len(_pairs(combo) & uncovered))
        chosen.append(best)
        uncovered -= _pairs(best)
    return set(chosen)


def pairwise(**axes):
    """``(argnames, params)`` for ``pytest.mark.parametrize``: the whole product of ``axes``
    (name -> list of values, or dict of id -> value), the combinations outside a pairwise
    covering marked ``slow``."""
    named = [_axis(values) for values in axes.values()]
    keep = _covering([len(axis) for axis in named])
    params = []
    for combo in itertools.product(*(range(len(axis)) for axis in named)):
        chosen = [axis[index] for axis, index in zip(named, combo)]
        params.append(pytest.param(*(value for _, value in chosen),
                                   id='-'.join(name for name, _ in chosen),
                                   marks=() if combo in keep else pytest.mark.slow))
    return ','.join(axes), params
