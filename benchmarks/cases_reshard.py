"""Case 14: resharding 100,000 records with ``to_webdataset`` on Dask's schedulers and in
one process, and a user's first reads of a dataset.

As :mod:`~benchmarks.cases_curation` (whose timing helpers this case shares), the
row has no gluoncv contender: ``gluonbatch`` is the job on a 2-worker
``distributed.LocalCluster``, beside 1 worker, Dask's threads and its synchronous
scheduler; the floor is copying each shard file. All five run in the same interleaved
rounds, with the clusters up: the one-process contenders each run in a fresh process
(:func:`reshard_seconds`, after an untimed first run on a dataset of a few batches), away
from the clusters' scheduler, which lives in the benchmark's process (the idle clusters'
processes run beside every contender). So all five are timed over the same minutes, under
the same conditions on the whole (a busy virtual machine host, the disk's writeback),
which phases run minutes apart are not. Each process keeps the shard
records it has read (keyed by the files' identity), so every timed round first gives the
source files a new modification time: each round loads the indexes again, as a new job
would. The first reads are timed in fresh processes (:func:`fresh_reads`), where nothing is
loaded yet.
"""
import functools
import os
import shutil
import statistics
import tempfile
import time

import dask
import numpy as np

from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
from gluonbatch.shards.tar import scan_tar

from .cases_curation import (curation_row, local_clusters, run_script, timed_phase,
                             timed_run)
from .harness import host_steal
from .rows import ratio_check, value_check

__all__ = ['case_curation_reshard', 'fresh_reads', 'reshard_seconds']


def _copy_shards(source, target):
    """The resharding floor: every shard file copied, one process."""
    os.makedirs(target)
    for name in sorted(os.listdir(source)):
        shutil.copyfile(os.path.join(source, name), os.path.join(target, name))


def _touch_sources(source):
    """A new modification time for every ``.tar``, ``.idx`` and ``.parquet`` of ``source``:
    their file identities change, so no process reuses shard records it read before."""
    now = time.time_ns()
    for name in os.listdir(source):
        if name.endswith(('.tar', '.idx', '.parquet')):
            os.utime(os.path.join(source, name), ns=(now, now))


def _reshard(source, target, samples_per_shard):
    """The job timed: open ``source``, keep the records wider than 8 pixels (a lazy column),
    write them to ``target``."""
    ds = ImageTextPairDataset.from_webdataset(source, 'key')
    ds.metadata['keep'] = ds.metadata['width'] > 8
    ds.to_webdataset(target, 'keep', samples_per_shard=int(samples_per_shard))


def reshard_seconds(scheduler, source, target, samples_per_shard, warmup):
    """Seconds the benchmark's resharding of ``source`` into ``target`` takes in this
    process on Dask's ``scheduler`` (``'synchronous'`` or ``'threads'``), after an untimed
    first run on the small dataset ``warmup`` (written beside it and removed): what a process
    pays once (modules imported lazily, thread pools) is not timed.

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.curation import make_example_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     source = make_example_dataset(os.path.join(tmp, 's'), num_shards=2,
    ...                                   samples_per_shard=4, index=True)
    ...     seconds = reshard_seconds('synchronous', source, os.path.join(tmp, 'out'), '4',
    ...                               source)
    ...     written = sorted(os.listdir(os.path.join(tmp, 'out')))
    >>> seconds > 0, written[:3]
    (True, ['00000.idx', '00000.parquet', '00000.tar'])
    """
    with dask.config.set(scheduler=scheduler):
        first = target + '-warmup'
        _reshard(warmup, first, samples_per_shard)
        shutil.rmtree(first)
        start = time.perf_counter()
        _reshard(source, target, samples_per_shard)
        return time.perf_counter() - start


_ONE_PROCESS_SCRIPT = ('import json, sys\n'
                       'from benchmarks.cases_reshard import reshard_seconds\n'
                       'print(json.dumps(reshard_seconds(*sys.argv[1:])))\n')


_FRESH_MODES = ('idx', 'scan', 'random', 'sequential')


def fresh_reads(mode, source, *args):
    """Milliseconds a user's first reads of the dataset ``source`` (id column ``'key'``)
    take; meant to run in a fresh process, where no shard's records are loaded yet.

    Parameters
    ----------
    mode : str
        ``'idx'``, args ``i``: open with the ``.idx`` files and read record ``i``; returns
        ``{'open_first': ms}``. ``'scan'``, args ``i`` and the tar of its shard: that tar's
        :func:`~gluonbatch.shards.tar.scan_tar` alone, then open without the ``.idx``
        files and read record ``i``; returns ``{'scan_tar': ms, 'open_first': ms}``.
        ``'random'``, args a seed and a count: open, then read ``count`` records at random
        positions; ``'sequential'``, args a start and a count: open, then read ``count``
        consecutive records from ``start``. Both return ``{'per_read': ms}``, the mean
        over the reads (not the opening), the shard loads they trigger included.
    source : str
    *args : int or str
        As above; strings (a command line's) are converted.

    Returns
    -------
    dict of str -> float

    Raises
    ------
    ValueError
        For another mode, or (``'scan'``) a tar that is not record ``i``'s shard.

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.curation import make_example_dataset
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = make_example_dataset(tmp, num_shards=2, samples_per_shard=4, index=True)
    ...     first = fresh_reads('scan', path, 5, os.path.join(path, '00001.tar'))
    ...     per_read = fresh_reads('sequential', path, '2', '4')['per_read']
    >>> sorted(first), per_read > 0
    (['open_first', 'scan_tar'], True)
    """
    if mode not in _FRESH_MODES:
        raise ValueError('fresh_reads: mode %r is not one of %s' % (mode, ', '.join(_FRESH_MODES)))
    clock = time.perf_counter
    if mode in ('idx', 'scan'):
        i = int(args[0])
        start = clock()
        if mode == 'scan':
            scan_tar(args[1])
        scanned = clock()
        ds = ImageTextPairDataset.from_webdataset(source, 'key', use_index=mode == 'idx')
        ds.read_raw(i)
        seconds = {'open_first': clock() - scanned}
        if mode == 'scan':
            seconds['scan_tar'] = scanned - start
            shard_tar = ds.tar_files[ds.reader.locate(i)[0]]
            if shard_tar != os.path.abspath(args[1]):
                raise ValueError('fresh_reads: record %d of %s is in %s, not in %s'
                                 % (i, source, shard_tar, args[1]))
    else:
        first, count = int(args[0]), int(args[1])
        ds = ImageTextPairDataset.from_webdataset(source, 'key')
        positions = (np.random.default_rng(first).integers(0, len(ds), count).tolist()
                     if mode == 'random' else range(first, first + count))
        start = clock()
        for i in positions:
            ds.read_raw(i)
        seconds = {'per_read': (clock() - start) / count}
    ds.close()
    return {name: value * 1e3 for name, value in seconds.items()}


#: Reads per fresh process in the random against consecutive reads.
_READS = 200

_FRESH_SCRIPT = ('import json, sys\n'
                 'import gluonbatch.curation\n'
                 'from benchmarks.cases_reshard import fresh_reads\n'
                 'print(json.dumps(fresh_reads(*sys.argv[1:])))\n')


def _first_reads(source, records, shards, processes, rng):
    """``{name: [ms per fresh process]}`` of :func:`fresh_reads`, ``processes`` rounds of
    one fresh process per mode, each round at a new random record (with and without
    ``.idx`` the same one) and random positions; ``without_idx/scan_tar`` is the ratio of
    the two times in the same process (the page cache equally warm)."""
    tars = sorted(os.path.join(source, name) for name in os.listdir(source)
                  if name.endswith('.tar'))
    samples = {name: [] for name in ('with_idx', 'without_idx', 'scan_tar',
                                     'without_idx/scan_tar', 'random', 'sequential')}
    for _ in range(processes):
        i = int(rng.integers(records))
        with_idx = run_script(_FRESH_SCRIPT, 'first read', 'idx', source, i)
        scan = run_script(_FRESH_SCRIPT, 'first read without .idx', 'scan', source, i,
                           tars[i // (records // shards)])
        random = run_script(_FRESH_SCRIPT, 'random reads', 'random', source,
                             int(rng.integers(2 ** 31)), _READS)
        sequential = run_script(_FRESH_SCRIPT, 'consecutive reads', 'sequential', source,
                                 int(rng.integers(records - _READS + 1)), _READS)
        for name, value in (('with_idx', with_idx['open_first']),
                            ('without_idx', scan['open_first']), ('scan_tar', scan['scan_tar']),
                            ('without_idx/scan_tar', scan['open_first'] / scan['scan_tar']),
                            ('random', random['per_read']),
                            ('sequential', sequential['per_read'])):
            samples[name].append(value)
    return samples


def _reshard_checks(row, first):
    """The resharding goals, from the row's records/s and the medians ``first`` of
    :func:`_first_reads`."""
    per_s = row['records_per_s']
    one = per_s['single_process']
    return [
        value_check('records/s one process', one, 'rec/s', ('>=', 60000)),
        value_check('records/s copy floor', per_s['floor'], 'rec/s'),
        ratio_check('records/s 2 workers / 1 process', per_s['gluonbatch'] / one, ('>=', 1.7)),
        ratio_check('records/s 1 worker / 1 process', per_s['dask_1_worker'] / one,
                    ('>=', 0.9)),
        ratio_check('records/s 2 Dask workers / 1', per_s['gluonbatch'] /
                    per_s['dask_1_worker']),
        value_check('open + first read with .idx', first['with_idx'], 'ms', ('<=', 20)),
        # without an index the shard's tar is scanned: at most that scan plus the opening
        ratio_check('no .idx: open+first / scan_tar', first['without_idx/scan_tar'],
                    ('<=', 1.25)),
        ratio_check('reads random / consecutive', first['random'] / first['sequential'],
                    ('<=', 3)),
    ]


def case_curation_reshard(rng, rounds, quick):
    """Case 14: ``to_webdataset`` of 100,000 records (2,000 with ``--quick``) of small
    JPEGs in 10 shards (4), filtered on a lazy column: records/s in one process, on 2 Dask
    workers and on 1, against copying the shard files; then, in fresh processes, opening
    the dataset and reading a first record (with and without ``.idx``), and reads at random
    against consecutive positions.

    Every process keeps the shard records it read while the files stay the same (path,
    size, inode, modification and change times), so before each timed ``to_webdataset``
    round, untimed, every source ``.tar``, ``.idx`` and ``.parquet`` gets a new modification
    time: each round, in every process, loads its shards' records again, as a first run
    does.
    """
    records, shards = (2000, 4) if quick else (100000, 10)
    # each fresh process pays the imports (seconds): one round in the smoke mode
    processes = 1 if quick else 5
    root = tempfile.mkdtemp(prefix='gluonbatch-bench-reshard-')
    try:
        source = make_example_dataset(os.path.join(root, 'source'), num_shards=shards,
                                      samples_per_shard=records // shards, min_size=8,
                                      max_size=16, seed=int(rng.integers(2 ** 31)), index=True)
        # a few 8 MB batches: the first run's heap grows to what the timed run needs
        warmup = make_example_dataset(os.path.join(root, 'warmup'), num_shards=2,
                                      samples_per_shard=min(records // 2, 2500), min_size=8,
                                      max_size=16, seed=int(rng.integers(2 ** 31)),
                                      index=True)
        per_shard = records // shards
        reshard = functools.partial(_reshard, source, samples_per_shard=per_shard)

        def in_a_fresh_process(scheduler):
            return lambda target: run_script(_ONE_PROCESS_SCRIPT, 'one-process resharding',
                                             scheduler, source, target, per_shard, warmup)

        touch = functools.partial(_touch_sources, source)
        with local_clusters(2, 1) as (two, one):
            timed = timed_phase({
                'gluonbatch': timed_run(reshard, two, root, touch),
                'dask_1_worker': timed_run(reshard, one, root, touch),
                'single_process': timed_run(in_a_fresh_process('synchronous'), None, root,
                                            touch),
                'threads': timed_run(in_a_fresh_process('threads'), None, root, touch),
                'floor': timed_run(lambda target: _copy_shards(source, target),
                                   'synchronous', root)}, rounds)
        with host_steal() as first_reads_steal:
            fresh = _first_reads(source, records, shards, processes, rng)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    row = curation_row('curation_reshard', 'Dask reshard %d rec, %d shards'
                        % (records, shards), rounds, records, {'rounds': timed})
    first = {name: statistics.median(values) for name, values in fresh.items()}
    row['floor_is'] = 'copying each shard file'
    row['fresh_processes'], row['reads_per_process'] = processes, _READS
    row['first_record_ms'] = {name: first[name]
                              for name in ('with_idx', 'without_idx', 'scan_tar')}
    row['read_ms_per_record'] = {name: first[name] for name in ('random', 'sequential')}
    row['fresh_samples'] = fresh
    row['host_steal']['first_reads'] = first_reads_steal['share']
    row['checks'] = _reshard_checks(row, first)
    return row
