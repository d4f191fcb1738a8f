"""The rows the cases report: contenders against the floor, ratios and goals.

A row is a dict: the case's name and title, rounds, output layout, median and per-round
times in milliseconds, ratios of gluonbatch, gluoncv and the floor, and ``checks`` (lines
of the report, see :func:`ratio_check`).
"""
import statistics

import mxnet as mx
import numpy as np

from gluonbatch._core.tree import array_leaves

from .harness import back_to_back_medians, host_temporaries, interleaved_medians

__all__ = ['SHARED', 'floor_fn', 'check_same', 'layout_fields', 'ratio_check', 'ms_fields',
           'percent_check', 'value_check', 'VALUE_UNITS', 'timing_fields', 'run_case']

SHARED = mx.Context('cpu_shared', 0)


def floor_fn(outputs):
    """The floor contender: fresh ``cpu_shared`` arrays for ``outputs`` [(shape, dtype)].

    Sources are made up front, so only creating and writing the outputs is timed.

    >>> [a.context for a in floor_fn([((2, 3), np.dtype('float32'))])()]
    [cpu_shared(0)]
    """
    sources = [np.ones(shape, dtype) for shape, dtype in outputs]
    return lambda: [mx.nd.array(src, ctx=SHARED) for src in sources]


def check_same(case, ours, theirs):
    """Raise unless gluonbatch and gluoncv return the same arrays; return their layout.

    So a case never compares unlike work, and the floor writes exactly the outputs' sizes.

    >>> check_same('ones', mx.nd.ones((2, 3)), [mx.nd.ones((2, 3))])
    [((2, 3), dtype('float32'))]
    """
    ours, theirs = array_leaves(ours), array_leaves(theirs)
    same = len(ours) == len(theirs) and all(
        a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.asnumpy(), b.asnumpy())
        for a, b in zip(ours, theirs))
    if not same:
        raise AssertionError('%s: gluonbatch returned %s, gluoncv %s' % (
            case, [(a.shape, a.dtype) for a in ours], [(b.shape, b.dtype) for b in theirs]))
    return [(a.shape, np.dtype(a.dtype)) for a in ours]


def _nbytes(layout):
    return sum(int(np.prod(shape)) * dtype.itemsize for shape, dtype in layout)


def layout_fields(layouts):
    """The ``outputs`` (of the first layout) and mean ``out_bytes`` fields of a row.

    >>> layout_fields([[((2, 3), np.dtype('float32'))], [((4, 3), np.dtype('float32'))]])
    {'outputs': [[[2, 3], 'float32']], 'out_bytes': 36}
    """
    return {'outputs': [[list(shape), dtype.name] for shape, dtype in layouts[0]],
            'out_bytes': statistics.mean(_nbytes(layout) for layout in layouts)}


def ratio_check(metric, value, goal=None):
    """One line of the report: ``value`` is a ratio; goal is ``('>=' or '<=', bound)``.

    >>> ratio_check('gluoncv / gluonbatch', 60.0, ('>=', 50))['passed']
    True
    """
    passed, value = None, float(value)  # a numpy scalar would not be JSON
    if goal is not None:
        op, bound = goal
        passed = value >= bound if op == '>=' else value <= bound
    return {'metric': metric, 'value': value, 'unit': 'x', 'goal': goal, 'passed': passed}


def percent_check(metric, value, goal=None):
    """One report line for a percentage (host temporaries); goal as in :func:`ratio_check`.

    >>> percent_check('host temporaries', 7.5, ('<=', 5.0))['passed']
    False
    """
    return dict(ratio_check(metric, value, goal), unit='%')


#: The units of :func:`value_check`: records per second and milliseconds.
VALUE_UNITS = ('rec/s', 'ms')


def value_check(metric, value, unit, goal=None):
    """One report line for an absolute value (a rate or a latency) in ``unit``, one of
    :data:`VALUE_UNITS`; goal as in :func:`ratio_check`, in the same unit.

    Raises ValueError for another unit.

    >>> check = value_check('records/s one process', 61234.5, 'rec/s', ('>=', 60000))
    >>> check['unit'], check['passed']
    ('rec/s', True)
    >>> value_check('open + first read', 23.0, 'ms', ('<=', 20))['passed']
    False
    """
    if unit not in VALUE_UNITS:
        raise ValueError('report line %r: unit %r is not one of %s'
                         % (metric, unit, ', '.join(map(repr, VALUE_UNITS))))
    return dict(ratio_check(metric, value, goal), unit=unit)


def _ms(seconds):
    return {name: value * 1e3 for name, value in seconds.items()}


def _times_ms(times):
    return {name: [s * 1e3 for s in values] for name, values in times.items()}


def ms_fields(medians, times):
    """``medians_ms`` and ``times_ms``: the medians and per-round times (seconds) in ms.

    >>> ms_fields({'floor': 0.5}, {'floor': [0.5, 0.25]})
    {'medians_ms': {'floor': 500.0}, 'times_ms': {'floor': [500.0, 250.0]}}
    """
    return {'medians_ms': _ms(medians), 'times_ms': _times_ms(times)}


def timing_fields(medians, times):
    """The row fields every case reports: medians and per-round times in ms, and the ratios
    of gluonbatch, gluoncv and the floor (``medians`` and ``times`` in seconds).

    >>> timing_fields({'gluonbatch': 1.0, 'gluoncv': 4.0, 'floor': 0.5}, {})['ratios']
    {'gluoncv/gluonbatch': 4.0, 'gluonbatch/floor': 2.0, 'gluoncv/floor': 8.0}
    """
    return {
        **ms_fields(medians, times),
        'ratios': {'gluoncv/gluonbatch': medians['gluoncv'] / medians['gluonbatch'],
                   'gluonbatch/floor': medians['gluonbatch'] / medians['floor'],
                   'gluoncv/floor': medians['gluoncv'] / medians['floor']},
    }


def run_case(case, title, gb_fn, gcv_fn, rounds, samples, temporaries=False,
             back_to_back=False, extra=None):
    """Time the three contenders of one case; return the case's row (without checks).

    With ``temporaries``, also measure each contender's host temporaries (separate calls,
    after the timing) as a percentage of the output bytes. With ``back_to_back``, also the
    medians of consecutive calls (:func:`~benchmarks.harness.back_to_back_medians`).
    ``extra`` maps names to more no-argument callables, timed in the same interleaved
    rounds into ``extra_ms``.
    """
    outputs = check_same(case, gb_fn(samples), gcv_fn(samples))
    contenders = {'gluonbatch': lambda: gb_fn(samples),
                  'gluoncv': lambda: gcv_fn(samples),
                  'floor': floor_fn(outputs)}
    times = {}
    medians = interleaved_medians(dict(contenders, **(extra or {})), rounds, times)
    extra_medians = {name: medians.pop(name) for name in extra or {}}
    extra_times = {name: times.pop(name) for name in extra or {}}
    row = {'case': case, 'title': title, 'rounds': rounds, **layout_fields([outputs]),
           **timing_fields(medians, times)}
    if extra:
        row['extra_ms'] = _ms(extra_medians)
        row['extra_times_ms'] = _times_ms(extra_times)
    if back_to_back:
        row['back_to_back_ms'] = _ms(back_to_back_medians(contenders, rounds))
    if temporaries:
        row['host_temporaries_pct'] = {name: 100.0 * host_temporaries(fn) / row['out_bytes']
                                       for name, fn in contenders.items()}
    return row
