"""The benchmark's one timing loop and its timers, on a fake clock and recorded call order.

Nothing here depends on how fast the machine is: the clock is replaced by one the
contenders advance themselves.
"""
import gc

import pytest

from benchmarks import harness


def recorder(calls, name, values=None):
    """A contender that appends ``name`` to ``calls`` and returns its next value."""
    values = list(values or [])

    def run():
        calls.append(name)
        return values.pop(0) if values else 0.0
    return run


@pytest.fixture
def clock(monkeypatch):
    """A fake ``perf_counter``: ``clock[0]`` is the time, advanced by the contenders."""
    now = [0.0]
    monkeypatch.setattr(harness.time, 'perf_counter', lambda: now[0])
    return now


def test_rounds_rotate_the_first_contender_and_follow_runs_last(monkeypatch):
    calls = []
    monkeypatch.setattr(harness.gc, 'collect', lambda: calls.append('gc'))
    contenders = {name: recorder(calls, name) for name in 'abc'}
    harness.interleave(contenders, rounds=4, follow={'f': recorder(calls, 'f')})
    rounds = ' '.join(calls).split('gc')
    assert [r.split() for r in rounds] == [
        ['a', 'b', 'c', 'f'],  # warm-up, not a round
        ['a', 'b', 'c', 'f'], ['b', 'c', 'a', 'f'], ['c', 'a', 'b', 'f'], ['a', 'b', 'c', 'f']]


def test_medians_and_samples_are_per_contender_in_round_order():
    calls = []
    medians, samples = harness.interleave(
        {'a': recorder(calls, 'a', [100, 1, 4, 2, 3]), 'b': recorder(calls, 'b', [100, 7, 5, 9])},
        rounds=3, follow={'f': recorder(calls, 'f', [100, 0.5, 0.25, 1.0])})
    assert samples == {'a': [1, 4, 2], 'b': [7, 5, 9], 'f': [0.5, 0.25, 1.0]}
    assert medians == {'a': 2, 'b': 7, 'f': 0.5}
    medians, _ = harness.interleave({'a': recorder(calls, 'a', [0, 1, 4])}, rounds=2)
    assert medians == {'a': 2.5}  # an even number of rounds: the mean of the middle two


@pytest.mark.parametrize('contenders, rounds, error', [
    ({'a': lambda: 0.0}, 0, ValueError),
    ({'a': lambda: 0.0}, 2.0, TypeError),
    ({}, 3, ValueError),
    ([lambda: 0.0], 3, TypeError),
    ({'a': 0.5}, 3, TypeError),
])
def test_bad_arguments_are_refused(contenders, rounds, error):
    with pytest.raises(error):
        harness.interleave(contenders, rounds)


def test_time_call_measures_on_the_clock_with_the_collector_paused(clock):
    seen = []

    def call():
        seen.append(gc.isenabled())
        clock[0] += 0.25
        return None

    assert gc.isenabled()
    assert harness.time_call(call) == 0.25
    assert seen == [False] and gc.isenabled()


def test_time_epoch_is_seconds_per_batch(clock):
    def loader():
        for batch in range(4):
            clock[0] += 0.5
            yield [batch]

    assert harness.time_epoch(loader()) == 0.5


def test_interleaved_medians_times_each_contender_with_time_call(clock):
    def costs(seconds):
        def call():
            clock[0] += seconds
        return call

    times = {}
    medians = harness.interleaved_medians({'fast': costs(1.0), 'slow': costs(3.0)}, 2, times)
    assert medians == {'fast': 1.0, 'slow': 3.0}
    assert times == {'fast': [1.0, 1.0], 'slow': [3.0, 3.0]}
