"""Case 13, curation on Dask: a metadata pipeline over 1,000,000 records on Dask's
schedulers and in one process; and the timing helpers it shares with case 14
(:mod:`~benchmarks.cases_reshard`).

gluoncv has no curation, so these rows have no gluoncv contender: ``gluonbatch`` is the
work on a ``distributed.LocalCluster`` of 2 worker processes (one thread each), beside the
same work on a 1-worker cluster, on Dask's default threaded scheduler, and on its
synchronous scheduler (one process, one thread: the single-process writer). The floor is
the least a single process must do for the same output: pyarrow reading and writing every
parquet file (metadata), or copying every shard file (resharding).

Here the rounds run in two phases, each interleaved and rotated: first the threaded and
synchronous schedulers and the floor with no cluster running (a LocalCluster's scheduler
lives in the benchmark's process, and even idle it slows work done there by about a third),
then the two clusters. (Resharding runs its one-process contenders in fresh processes
instead, all five contenders in one phase.) The file system is synced before each round,
untimed, and each phase records the share of CPU time a virtual machine's host took
meanwhile (steal): rounds under a large share say more about the host's other guests than
about the code, and ratios across phases taken under different shares mislead.

The driver's peak memory is measured in fresh processes, one run each (memory does not
vary from run to run as time does): the resident memory after the imports against the
peak while the pipeline runs (``VmHWM``, reset when the pipeline starts). With ``--quick``
the curation cases share one :func:`quick_session`: those processes are forks of one that
imported the modules once, and both cases use the same two clusters.
"""
import contextlib
import functools
import gc
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dask
import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards.commit import FORWARD, staging
from gluonbatch.curation.metadata_writer import arrow_table, write_parquet
from gluonbatch.shards.writer import ShardWriter, commit_shards, id_digits

from .harness import ForkServer, host_steal, interleave, python_env
from .rows import ms_fields, ratio_check

__all__ = ['case_curation_metadata', 'driver_peak', 'quick_session', 'run_script',
           'local_clusters', 'timed_run', 'timed_phase', 'time_in_one_process',
           'time_on_clusters', 'curation_row']

_WORDS = np.array(['red', 'blue', 'green', 'small', 'large', 'cat', 'dog', 'boat', 'tree',
                   'house', 'on', 'a', 'the', 'beach', 'at', 'night'])
_MB = 1e6


def _write_metadata_set(path, records, shards, rng):
    """``records`` rows of metadata in ``shards`` shards, each record in the tar an empty
    ``.txt`` member (one 512-byte header): a dataset whose weight is its parquet."""
    per_shard = records // shards
    digits = id_digits(per_shard)
    os.makedirs(path)
    stems = ['%05d' % shard for shard in range(shards)]
    with staging(path) as stage:
        for shard, stem in enumerate(stems):
            ids = ['%0*d' % (5 + digits, n + 10 ** digits * shard) for n in range(per_shard)]
            words = _WORDS[rng.integers(0, len(_WORDS), (per_shard, 6))]
            frame = pd.DataFrame({
                'key': ids,
                'caption': [' '.join(row) for row in words.tolist()],
                'url': ['https://example.com/%s.jpg' % key for key in ids],
                'width': rng.integers(64, 1024, per_shard),
                'height': rng.integers(64, 1024, per_shard),
                'aesthetic_score': rng.random(per_shard, dtype=np.float32) * 10})
            writer = ShardWriter(stage.path, stem, 0)
            for key in ids:
                writer.add(key, [('txt', b'')])
            writer.finish(arrow_table(frame))
        commit_shards(stage, stems, FORWARD)
    return path


def _filter_column(metadata):
    """The pipeline's filter: a lazy bool column from two columns."""
    return (metadata['aesthetic_score'] > 5) & (metadata['caption'].str.len() > 24)


def _every_nth_shard(source, step):
    """A directory beside ``source`` of links to the files of every ``step``-th shard."""
    linked = '%s-every-%d' % (source, step)
    if not os.path.isdir(linked):
        os.makedirs(linked)
        names = sorted(name for name in os.listdir(source) if name[0].isdigit())
        stems = sorted({name.split('.')[0] for name in names})[::step]
        for name in names:
            if name.split('.')[0] in stems:
                os.symlink(os.path.join(source, name), os.path.join(linked, name))
    return linked


def _save_filtered(source, target, num_parts=1):
    """The metadata pipeline: open (every ``num_parts``-th shard of it), add the filter
    column, ``save_metadata`` elsewhere."""
    if num_parts > 1:
        source = _every_nth_shard(source, num_parts)
    ds = ImageTextPairDataset.from_webdataset(source, 'key')
    ds.metadata['keep'] = _filter_column(ds.metadata)
    ds.save_metadata(target)


def _save_filtered_eagerly(source, target):
    """The same output from one pandas DataFrame of all the metadata, as before it was
    lazy: every parquet read, the column added, each shard's rows written back."""
    names = sorted(n for n in os.listdir(source) if n.endswith('.parquet'))
    parts = [pd.read_parquet(os.path.join(source, name)) for name in names]
    frame = pd.concat(parts, ignore_index=True)
    del parts
    frame['keep'] = _filter_column(frame)
    os.makedirs(target)
    start = 0
    for name in names:
        stop = start + pq.read_metadata(os.path.join(source, name)).num_rows
        write_parquet(frame.iloc[start:stop], os.path.join(target, name))
        start = stop


def _status_bytes(field):
    """A memory line of ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    with open('/proc/self/status') as handle:
        for line in handle:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    raise RuntimeError('/proc/self/status has no %s line' % field)


def driver_peak(mode, source, warmup, target, num_parts=1, address=None):
    """Run the metadata pipeline in this process; returns ``(resident bytes before, peak
    resident bytes)`` of its run on ``source``.

    ``mode`` is ``'threads'`` (Dask's default scheduler: the work is done in this process),
    ``'cluster'`` (this process is a client of the scheduler at ``address``) or
    ``'eager'``; ``num_parts`` > 1 runs on every ``num_parts``-th shard of the dataset. A
    first run on the small dataset ``warmup`` pays for first use (modules imported
    lazily, thread pools) before the peak is reset.
    """
    if mode == 'eager':
        run = _save_filtered_eagerly
    else:
        run = functools.partial(_save_filtered, num_parts=int(num_parts))
    client = None
    if mode == 'cluster':
        from distributed import Client
        client = Client(address)
    try:
        with dask.config.set(scheduler=client if client is not None else 'threads'):
            run(warmup, target)
            shutil.rmtree(target)
            gc.collect()
            with open('/proc/self/clear_refs', 'w') as handle:
                handle.write('5')  # the peak (VmHWM) starts again from here
            before = _status_bytes('VmRSS')
            run(source, target)
            return before, _status_bytes('VmHWM')
    finally:
        if client is not None:
            client.close()


_PEAK_SCRIPT = ('import json, sys\n'
                'from benchmarks.cases_curation import driver_peak\n'
                'print(json.dumps(driver_peak(*sys.argv[1:])))\n')

#: The driver memory runs: name -> (mode, parts). A quarter of the dataset beside the whole
#: shows whether the peak grows with the data.
MEMORY_RUNS = {'threads': ('threads', 1), 'threads_quarter': ('threads', 4),
               'cluster': ('cluster', 1), 'eager': ('eager', 1)}


#: The modules a quick session's fork server imports: those of the curation scripts.
QUICK_PRELOAD = ('benchmarks.cases_curation', 'benchmarks.cases_reshard')


class _QuickSession:
    """What the curation cases share in a quick run: a fork server, started on first use,
    and clusters by size."""

    def __init__(self, stack, preload):
        self.stack, self.preload = stack, preload
        self.server, self.clusters = None, {}

    def run(self, script, args):
        if self.server is None:
            self.server = self.stack.enter_context(ForkServer(self.preload))
        return self.server.run(script, args)

    def clients(self, sizes):
        clients, taken = [], {}
        for workers in sizes:  # a size asked for twice in one call: two clusters
            nth = taken[workers] = taken.get(workers, -1) + 1
            pool = self.clusters.setdefault(workers, [])
            if nth == len(pool):
                pool.append(_start_cluster(self.stack, workers))
            clients.append(pool[nth])
        return clients


#: The open :func:`quick_session`, or None.
_SESSION = None


@contextlib.contextmanager
def quick_session(preload=QUICK_PRELOAD):
    """Within it, the curation cases start fewer processes (``--quick`` runs).

    :func:`run_script` forks each run from one process that imported ``preload`` once
    (:class:`~benchmarks.harness.ForkServer`) instead of starting Python and its
    imports anew, and :func:`local_clusters` hands every case the same clusters, closed
    when the session ends; so a cluster started by one case is idle while the next case
    times its in-process phase. Full runs keep fresh interpreters and clusters.

    Parameters
    ----------
    preload : sequence of str, optional
        The modules the fork server imports before its first run.

    Examples
    --------
    >>> with quick_session(preload=()):
    ...     run_script('import json; print(json.dumps(2 ** 10))', 'a small')
    1024
    """
    global _SESSION
    if _SESSION is not None:
        raise RuntimeError('quick_session: a session is already open')
    with contextlib.ExitStack() as stack:
        _SESSION = _QuickSession(stack, tuple(preload))
        try:
            yield
        finally:
            _SESSION = None


def run_script(script, what, *args):
    """The JSON a fresh ``python -c script args`` prints last; ``what`` names the run in
    the error raised if it fails. Within :func:`quick_session`, a fork of its server."""
    args = [str(arg) for arg in args]
    if _SESSION is not None:
        code, stdout, stderr = _SESSION.run(script, args)
    else:
        result = subprocess.run([sys.executable, '-c', script] + args, env=python_env(),
                                capture_output=True, text=True, check=False)
        code, stdout, stderr = result.returncode, result.stdout, result.stderr
    if code:
        raise RuntimeError('the %s run failed:\n%s' % (what, stderr[-3000:]))
    return json.loads(stdout.strip().splitlines()[-1])


def _peak_in_fresh_process(mode, num_parts, source, warmup, target, address):
    """MB the pipeline adds to a fresh driver process at its peak."""
    args = [mode, source, warmup, target, num_parts] + ([address] if address else [])
    before, peak = run_script(_PEAK_SCRIPT, '%s memory' % mode, *args)
    shutil.rmtree(target)
    return max(0, peak - before) / _MB


def _start_cluster(stack, workers):
    """A client of a new LocalCluster of ``workers`` single-threaded worker processes on
    127.0.0.1, its scheduler's HTTP server on a free port (8787, the default, may be another
    cluster's); ``stack`` closes both."""
    from distributed import Client, LocalCluster
    cluster = stack.enter_context(LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, host='127.0.0.1',
        dashboard_address='127.0.0.1:0', silence_logs=logging.ERROR))
    return stack.enter_context(Client(cluster, set_as_default=False))


@contextlib.contextmanager
def local_clusters(*sizes):
    """One ``distributed.Client`` per size, of a LocalCluster of that many single-threaded
    worker processes, closed on exit; within :func:`quick_session`, the session's."""
    if _SESSION is not None:
        yield _SESSION.clients(sizes)
        return
    with contextlib.ExitStack() as stack:
        yield [_start_cluster(stack, workers) for workers in sizes]


def timed_run(run, scheduler, root, before=None):
    """A contender: seconds ``run(target)`` takes on ``scheduler``, ``target`` a fresh
    directory of ``root`` removed afterwards; ``before()``, if given, runs first, untimed.
    With ``scheduler`` None, ``run`` times itself (it runs in another process) and returns
    the seconds.

    Before the clock starts, the file system is synced: what earlier rounds wrote and
    deleted (hundreds of MB) reaches the disk then, not during this round.

    Examples
    --------
    >>> with tempfile.TemporaryDirectory() as root:
    ...     write = timed_run(lambda target: open(target, 'w').close(), 'synchronous', root)
    ...     reported = timed_run(lambda target: 0.25, None, root)
    ...     write() > 0, reported()
    (True, 0.25)
    """
    def timed():
        if before is not None:
            before()
        parent = tempfile.mkdtemp(dir=root)
        target = os.path.join(parent, 'out')
        os.sync()
        if scheduler is None:
            elapsed = run(target)
        else:
            with dask.config.set(scheduler=scheduler):
                start = time.perf_counter()
                run(target)
                elapsed = time.perf_counter() - start
        shutil.rmtree(parent)
        return elapsed
    return timed


def timed_phase(contenders, rounds):
    """``(medians, samples, steal)``: :func:`~benchmarks.harness.interleave`'s
    rounds of ``contenders``, and the share of the machine's CPU time its host took
    meanwhile (:func:`~benchmarks.harness.host_steal`).

    Examples
    --------
    >>> medians, samples, steal = timed_phase({'a': lambda: 1.0, 'b': lambda: 2.0}, 3)
    >>> medians, samples['b'], steal is None or 0 <= steal <= 1
    ({'a': 1.0, 'b': 2.0}, [2.0, 2.0, 2.0], True)
    """
    with host_steal() as steal:
        medians, samples = interleave(contenders, rounds)
    return medians, samples, steal['share']


def time_in_one_process(run, floor, rounds, root, before=None):
    """:func:`timed_phase` of ``run`` on the threaded and synchronous schedulers and of the
    ``floor``, with no cluster running: a LocalCluster's scheduler lives in this process,
    and even idle it slows work done here by a third. ``before`` runs untimed before each
    round of ``run``."""
    return timed_phase({'threads': timed_run(run, 'threads', root, before),
                        'single_process': timed_run(run, 'synchronous', root, before),
                        'floor': timed_run(floor, 'synchronous', root)}, rounds)


def time_on_clusters(run, two, one, rounds, root, before=None):
    """:func:`timed_phase` of ``run`` on the 2-worker and the 1-worker cluster."""
    return timed_phase({'gluonbatch': timed_run(run, two, root, before),
                        'dask_1_worker': timed_run(run, one, root, before)}, rounds)


def curation_row(case, title, rounds, records, phases):
    """The fields both curation rows share, from ``phases``, name -> the ``(medians, times,
    steal)`` of a :func:`timed_phase`: seconds in ms, records/s, ratios to the floor, and
    per phase the share of CPU time the host took (``host_steal``)."""
    medians, times, steal = {}, {}, {}
    for name, (phase_medians, phase_times, phase_steal) in phases.items():
        medians.update(phase_medians)
        times.update(phase_times)
        steal[name] = phase_steal
    return {'case': case, 'title': title, 'rounds': rounds, 'records': records,
            'out_bytes': 0, 'outputs': [],
            **ms_fields(medians, times),
            'records_per_s': {name: records / s for name, s in medians.items()},
            'ratios': {'%s/floor' % name: s / medians['floor']
                       for name, s in medians.items() if name != 'floor'},
            'host_steal': steal}


def _scaling_checks(row):
    per_s = row['records_per_s']
    return [ratio_check('records/s 2 Dask workers / 1', per_s['gluonbatch'] /
                        per_s['dask_1_worker'], ('>=', 1.5)),
            ratio_check('records/s 2 workers / 1 process', per_s['gluonbatch'] /
                        per_s['single_process'])]


def _copy_parquets(source, target):
    """The metadata floor: pyarrow reads and writes every parquet file, one process."""
    os.makedirs(target)
    for name in sorted(os.listdir(source)):
        if name.endswith('.parquet'):
            pq.write_table(pq.read_table(os.path.join(source, name)),
                           os.path.join(target, name))


def case_curation_metadata(rng, rounds, quick):
    """Case 13: filter + ``save_metadata`` over 1,000,000 records (20,000 with ``--quick``)
    in 100 shards (4): records/s on 2 Dask workers vs 1 vs one process, and the driver's
    peak memory against the eager pandas load and one partition's size."""
    records, shards = (20000, 4) if quick else (1000000, 100)
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-meta-')
    try:
        source = _write_metadata_set(os.path.join(root, 'source'), records, shards, rng)
        warmup = _write_metadata_set(os.path.join(root, 'warmup'), 2000, 2, rng)
        first = pd.read_parquet(os.path.join(source, '00000.parquet'))
        partition_mb = float(first.memory_usage(deep=True).sum()) / _MB
        del first
        def pipeline(target):
            _save_filtered(source, target)
        in_one_process = time_in_one_process(
            pipeline, lambda target: _copy_parquets(source, target), rounds, root)
        with local_clusters(2, 1) as (two, one):
            on_clusters = time_on_clusters(pipeline, two, one, rounds, root)
            peaks = {name: _peak_in_fresh_process(mode, parts, source, warmup,
                                                  os.path.join(root, name),
                                                  two.scheduler.address)
                     for name, (mode, parts) in MEMORY_RUNS.items()}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    row = curation_row('curation_metadata', 'Dask metadata %d rec, %d shards'
                        % (records, shards), rounds, records,
                        {'in_process': in_one_process, 'clusters': on_clusters})
    row['floor_is'] = 'pyarrow read + write of each parquet'
    row['driver_peak_mb'] = peaks
    row['partition_mb'] = partition_mb
    row['checks'] = _scaling_checks(row) + [
        # the peak follows the partitions in flight, not the data: 4x the data, same peak
        ratio_check('driver peak: all / a quarter', peaks['threads'] /
                    peaks['threads_quarter'], ('<=', 2)),
        ratio_check('driver peak / eager pandas peak', peaks['threads'] / peaks['eager']),
        ratio_check('driver peak / one partition', peaks['threads'] / partition_mb),
    ]
    return row
