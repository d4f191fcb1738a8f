"""Parameter matrices split between the test tiers.

A test over the product of several parameter lists (sample case x worker mode x shuffle x
last batch, ...) runs, in the everyday tier (``make test``), a *covering* of them: with
:func:`pairwise`, every value of every list meets every value of every other list in at
least one combination that runs; with :func:`each_value`, every value of every list runs at
least once. The full tier (``make test-all``) runs a covering of every *three* values of
three lists, which for three lists or fewer is the whole product. Defects that need one
value (or an interaction of two) show in the everyday tier, those of three values before
anything lands; four lists' product would mostly repeat those, at twice the time or more.

>>> names, params = pairwise(shuffle=[False, True], workers={'main': 0, '2proc': 2},
...                          last_batch=['keep', 'discard'])
>>> names
'shuffle,workers,last_batch'
>>> len(params), sum(1 for p in params if not p.marks)
(8, 4)
>>> [p.id for p in each_value(kind=['a', 'b'], num_workers=[0, 1, 2])[1] if not p.marks]
['a-0', 'a-2', 'b-1']
>>> len(pairwise(a=[1, 2, 3], b=[1, 2, 3], c=[1, 2], d=[1, 2])[1])  # of 36
19
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


#: how many values of different lists the full tier's covering brings together
FULL_TIER_STRENGTH = 3


def _covering(sizes, strength, start=()):
    """Index tuples of a covering of the product of ``sizes`` (every tuple of ``strength``
    values in some combination) that holds the combinations ``start``, the others chosen
    greedily (the combination that covers most of what is uncovered, the first in product
    order on ties), so the choice is the same on every run."""
    product = list(itertools.product(*(range(size) for size in sizes)))
    uncovered = set().union(*(_covered(combo, strength) for combo in product))
    uncovered -= set().union(*(_covered(combo, strength) for combo in start))
    chosen = list(start)
    while uncovered:
        best = max(product, key=lambda combo: len(_covered(combo, strength) & uncovered))
        chosen.append(best)
        uncovered -= _covered(best, strength)
    return set(chosen)


def _tiered(strength, axes):
    named = [_axis(values) for values in axes.values()]
    sizes = [len(axis) for axis in named]
    keep = _covering(sizes, strength)
    # the full tier's covering holds the everyday one, so every combination of the
    # everyday tier runs in the full tier too
    full = _covering(sizes, FULL_TIER_STRENGTH, sorted(keep))
    params = []
    for combo in itertools.product(*(range(size) for size in sizes)):
        if combo not in full:
            continue
        chosen = [axis[index] for axis, index in zip(named, combo)]
        params.append(pytest.param(*(value for _, value in chosen),
                                   id='-'.join(name for name, _ in chosen),
                                   marks=() if combo in keep else pytest.mark.slow))
    return ','.join(axes), params


def pairwise(**axes):
    """``(argnames, params)`` for ``pytest.mark.parametrize``: a covering of every three
    values of ``axes`` (name -> list of values, or dict of id -> value; for three lists or
    fewer, their whole product), the combinations outside a pairwise covering marked
    ``slow``."""
    return _tiered(2, axes)


def each_value(**axes):
    """Like :func:`pairwise`, but the everyday tier only runs every value of every list at
    least once (for two lists, where a pairwise covering is the whole product)."""
    return _tiered(1, axes)
