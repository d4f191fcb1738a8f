"""How the benchmark times: one call, one epoch, and the one interleaved-rounds loop.

Every case measures through :func:`interleave`: warm-up, then rounds in which every
contender runs once, starting from a different contender each round, and the median of
each contender's rounds. Runs that must start from a fresh process can be forks of one
process that has done the imports once (:class:`ForkServer`).
"""
import contextlib
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Mapping

import mxnet as mx

from gluonbatch._core.checks import check_int, describe
from gluonbatch._core.tree import array_leaves

__all__ = ['wait_all', 'time_call', 'time_epoch', 'interleave', 'interleaved_medians',
           'back_to_back_medians', 'host_temporaries', 'python_env', 'ForkServer',
           'host_steal']

#: The folder that holds the ``benchmarks`` package: the repository's root.
SOURCE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def _stolen_seconds():
    """CPU seconds since boot that a hypervisor gave to others while this machine's CPUs
    had work (``steal`` of ``/proc/stat``, all CPUs), or None where it is not reported."""
    try:
        with open('/proc/stat') as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != 'cpu':
        return None
    return int(fields[8]) / os.sysconf('SC_CLK_TCK')


@contextlib.contextmanager
def host_steal():
    """Within the block, how much of the machine a virtual machine's host took: on exit
    the yielded dict's ``'share'`` is the stolen CPU time over the block's wall time times
    the CPUs (0 on a machine of its own; 0.3: CPU-bound work runs 1 / 0.7, about 1.4
    times, as long as the machine can do it), None where the system does not report it.
    Timings of rounds taken under a large share vary with the host's other guests, not
    with the code.

    >>> with host_steal() as steal:
    ...     total = sum(range(10 ** 5))
    >>> steal['share'] is None or 0 <= steal['share'] <= 1
    True
    """
    measured = {'share': None}
    stolen, start = _stolen_seconds(), time.perf_counter()
    try:
        yield measured
    finally:
        end = _stolen_seconds()
        wall = (time.perf_counter() - start) * (os.cpu_count() or 1)
        if stolen is not None and end is not None and wall > 0:
            measured['share'] = min(1.0, (end - stolen) / wall)


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


def python_env():
    """The environment of a fresh Python process that imports from ``benchmarks``: this
    one's, with the folder holding the package first on ``PYTHONPATH`` (the package is
    not installed; a fresh ``python -c`` finds it only there).

    >>> python_env()['PYTHONPATH'].split(os.pathsep)[0] == SOURCE_ROOT
    True
    """
    inherited = os.environ.get('PYTHONPATH', '').split(os.pathsep)
    paths = [SOURCE_ROOT] + [path for path in inherited if path]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


# The fork server's program: import the modules named in argv, then for each request line
# [script, args] fork a child that runs ``script`` as ``python -c script args`` would, its
# stdout and stderr in files, and answer one line [exit code, stdout, stderr].
_FORK_SERVER = """\
import json, os, sys, tempfile, traceback
for name in sys.argv[1:]:
    __import__(name)
for line in sys.stdin:
    script, args = json.loads(line)
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    pid = os.fork()
    if pid == 0:
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ['-c'] + args
        code = 0
        try:
            exec(compile(script, '<string>', 'exec'), {'__name__': '__main__'})
        except SystemExit as stop:
            if isinstance(stop.code, int) or stop.code is None:
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    texts = []
    for handle in (out, err):
        handle.seek(0)
        texts.append(handle.read().decode(errors='replace'))
        handle.close()
    print(json.dumps([code] + texts), flush=True)
"""


class ForkServer:
    """Runs ``python -c`` scripts in forks of one Python process that imported ``preload``.

    Each run starts as a fresh process whose imports are done: the fork of a process that
    has only imported modules, so no state of an earlier run is in it. Starting Python and
    importing MXNet, pandas and Dask takes seconds; a fork takes milliseconds. A context
    manager; :meth:`close` stops the server.

    Parameters
    ----------
    preload : sequence of str, optional
        Modules the server imports once, before any run.

    Examples
    --------
    >>> with ForkServer(preload=['json']) as server:
    ...     server.run('import sys; print(sys.argv[1:])', ['a', 2])
    ...     server.run('import sys; sys.exit(3)', [])[0]
    (0, "['a', '2']\\n", '')
    3
    """

    def __init__(self, preload=()):
        self._log = tempfile.TemporaryFile()  # the server's own stderr, read if it dies
        self._process = subprocess.Popen(
            [sys.executable, '-c', _FORK_SERVER] + [str(name) for name in preload],
            env=python_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
            text=True)

    def run(self, script, args):
        """``(exit code, stdout, stderr)`` of ``script`` run with ``args`` (made strings) in
        a fork; RuntimeError if the server itself has stopped."""
        request = json.dumps([script, [str(arg) for arg in args]])
        try:
            self._process.stdin.write(request + '\n')
            self._process.stdin.flush()
            reply = self._process.stdout.readline()
        except BrokenPipeError:
            reply = ''
        if not reply:
            self._log.seek(0)
            log = self._log.read().decode(errors='replace')
            raise RuntimeError('the fork server stopped:\n%s' % log[-3000:])
        code, stdout, stderr = json.loads(reply)
        return code, stdout, stderr

    def close(self):
        """Stop the server (it ends when its input closes) and wait for it."""
        try:
            self._process.stdin.close()
        except BrokenPipeError:  # it had stopped: closed all the same
            pass
        self._process.wait()
        self._process.stdout.close()
        self._log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
