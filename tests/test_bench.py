"""Smoke test of the benchmarks (the source tree's ``benchmarks`` package, ``make bench``):
one case runs in quick mode as ``python -m benchmarks`` and writes well-formed JSON (every
case in the slow tier); without gluoncv it stops with one line naming what to install; the
installed package neither holds nor imports them.

No wall-clock assertions: timings depend on the machine; only the shape of the results is
checked.
"""
import json
import math
import os
import pathlib
import subprocess
import sys
import time

import pytest

from benchmarks import runner
from benchmarks.cases_curation import quick_session, run_script
from benchmarks.harness import host_steal
from helpers import imported_names

ROOT = pathlib.Path(__file__).resolve().parents[1]
# `python -m benchmarks ARGS` in a fresh interpreter where `import gluoncv` raises
# ImportError, after importing the chart's module (which must not need gluoncv either)
WITHOUT_GLUONCV = ("import sys; sys.modules['gluoncv'] = None; "
                   "from benchmarks.plot import plot_ratios; "
                   "from benchmarks.runner import main; sys.exit(main(sys.argv[1:]))")

CASES = ['pad_labels', 'pad_images', 'stack_numpy', 'stack_ndarray', 'rcnn_c4', 'rcnn_fpn',
         'loader', 'webdataset', 'memory', 'loader_recycled', 'worker_batchify',
         'rcnn_loader_recycled', 'curation_metadata', 'curation_reshard', 'transforms_ssd',
         'transforms_yolo', 'transforms_center_net', 'transforms_rcnn', 'transforms_loader_ssd',
         'transforms_loader_yolo', 'transforms_loader_center_net', 'batch_targets_ssd',
         'batch_targets_yolo', 'batch_targets_center_net', 'seeded_loader', 'resume',
         'shards', 'jpeg_loader_ssd', 'jpeg_loader_yolo', 'jpeg_loader_center_net']
CONTENDERS = {'gluonbatch', 'gluoncv', 'floor'}
#: What the curation cases time: 2 Dask workers (the gluonbatch column), and the rest.
CURATION_CONTENDERS = {'gluonbatch', 'dask_1_worker', 'threads', 'single_process', 'floor'}
#: The loader cases' contender batching presets made without targets with the batchify
#: function that computes the batch's targets.
LOADER_BATCH_TARGETS = {'batch targets'}
#: The goals of the loader cases (that contender vs gluoncv) and the batch targets cases.
LOADER_GOALS = {'ssd': 4, 'yolo': 4, 'center_net': 3}
BATCH_TARGETS_GOALS = {'ssd': 10, 'yolo': 20, 'center_net': 20}
#: Cases timing more than the three contenders, and what else they time.
MORE_CONTENDERS = {'loader_recycled': {'gluonbatch, recycling off'},
                   'rcnn_loader_recycled': {'gluonbatch, recycling off'},
                   'worker_batchify': {'warm copy'},
                   **{'transforms_loader_' + kind: LOADER_BATCH_TARGETS
                      for kind in ('ssd', 'yolo', 'center_net')},
                   **{'batch_targets_' + kind: {'gluonbatch in a worker'}
                      for kind in ('ssd', 'yolo', 'center_net')}}
#: Cases that time contenders of their own (no gluoncv, no floor), and their goals.
OWN_CONTENDERS = {'seeded_loader': {'gluonbatch', 'seeded', 'mxnet', 'mxnet seeded'},
                  'resume': {'first batch', 'last batch', 'state_dict'}}
OWN_GOALS = {'seeded_loader': [('x', {'op': '<=', 'bound': 1.02}),
                               ('x', {'op': '<=', 'bound': 1.02}),
                               ('%', {'op': '<=', 'bound': 2.0})],
             'resume': [('x', {'op': '<=', 'bound': 1.1}), ('ms', {'op': '<=', 'bound': 1.0})]}
#: The goals of the resharding case: records/s in one process, 2 workers and 1 against it,
#: open + first read with .idx, without it against the tar scan, random against
#: consecutive reads.
RESHARD_GOALS = [('rec/s', {'op': '>=', 'bound': 60000}), ('x', {'op': '>=', 'bound': 1.7}),
                 ('x', {'op': '>=', 'bound': 0.9}), ('ms', {'op': '<=', 'bound': 20}),
                 ('x', {'op': '<=', 'bound': 1.25}), ('x', {'op': '<=', 'bound': 3})]
#: The goals of the shards case: images/s from shards over files (CPU, then wall clock,
#: reported only), raw reads over a copy, opening 1,000 shards.
SHARDS_GOALS = [('x', {'op': '>=', 'bound': 1.0}), ('x', None),
                ('x', {'op': '>=', 'bound': 0.5}), ('ms', {'op': '<=', 'bound': 1000.0})]
#: The goals of the JPEG cases: SSD300's images/s with 2 workers and CPU ms per image with 1
#: (the other kinds report theirs without a goal).
JPEG_GOALS = {'ssd': [{'op': '>=', 'bound': 900.0}, {'op': '<=', 'bound': 2.0}],
              'yolo': [], 'center_net': []}
#: The stages SSD300's split times in a worker, in pipeline order.
JPEG_STAGES = ['decode', 'draws', 'geometry', 'targets', 'colour and batch write']
#: The goals of the recycling cases.
RECYCLING_GOALS = {'loader_recycled': [{'op': '>=', 'bound': 4}, {'op': '>=', 'bound': 3}],
                   'worker_batchify': [{'op': '<=', 'bound': 1.5}],
                   'rcnn_loader_recycled': []}


def run_benchmarks(args):
    """``python -m benchmarks ARGS`` from the repository's root (as ``make bench``)."""
    result = subprocess.run([sys.executable, '-m', 'benchmarks'] + args, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stderr


def test_one_quick_case_prints_its_table_and_writes_its_results(tmp_path):
    out = tmp_path / 'bench.json'
    code, report, stderr = run_benchmarks(['--quick', '--only', 'pad_labels', '--json',
                                           str(out)])
    assert code == 0, stderr[-3000:]
    assert 'gluoncv / gluonbatch' in report and 'goals met' in report
    check_results(json.loads(out.read_text()), ['pad_labels'])


@pytest.mark.slow
def test_quick_run_writes_results_for_every_case(tmp_path, capsys):
    # one round a case: every case's code, checks and goals run; more rounds repeat them
    out = tmp_path / 'bench.json'
    assert runner.main(['--quick', '--repeats', '1', '--json', str(out)]) == 0
    report = capsys.readouterr().out
    assert 'goals met' in report
    check_results(json.loads(out.read_text()), CASES)


def check_results(results, cases):
    """The JSON of a quick run of ``cases``, case by case."""
    assert results['quick'] is True
    assert {'cpu_count', 'mxnet', 'numpy', 'gluoncv'} <= set(results['machine'])
    assert [case['case'] for case in results['cases']] == cases
    for case in results['cases']:
        check_case(case)


def check_case(case):
    """One case's results: its contenders, times, ratios, checks and goals."""
    if case['case'].startswith('curation'):  # no gluoncv: Dask schedulers instead
        assert set(case['medians_ms']) == CURATION_CONTENDERS
        assert set(case['records_per_s']) == CURATION_CONTENDERS
        assert set(case['ratios']) == {name + '/floor' for name in CURATION_CONTENDERS
                                       if name != 'floor'}
        # each phase says how much of the machine a virtual machine's host took
        assert all(share is None or 0 <= share <= 1
                   for share in case['host_steal'].values())
    elif case['case'] in OWN_CONTENDERS:
        assert set(case['medians_ms']) == OWN_CONTENDERS[case['case']]
        assert [(check['unit'], check['goal']) for check in case['checks']] == OWN_GOALS[
            case['case']]
    else:
        more = MORE_CONTENDERS.get(case['case'], set())
        assert set(case['medians_ms']) == CONTENDERS | more
    assert all(ms > 0 and math.isfinite(ms) for ms in case['medians_ms'].values())
    assert all(len(times) == case['rounds'] for times in case['times_ms'].values())
    assert all(r > 0 and math.isfinite(r) for r in case['ratios'].values())
    assert case['checks']
    for check in case['checks']:
        assert math.isfinite(check['value'])
        if check['goal'] is None:
            assert check['passed'] is None
        else:
            assert check['goal']['op'] in ('>=', '<=')
            assert isinstance(check['passed'], bool)
    if case['case'].startswith('stack'):
        assert set(case['host_temporaries_pct']) == CONTENDERS
    if case['case'] == 'loader':  # information only: epochs of a 2-worker DataLoader
        assert set(case['batches_per_s']) == CONTENDERS
        assert all(check['goal'] is None for check in case['checks'])
    if case['case'] == 'worker_batchify':
        assert case['workers_timed'] in (1, 2)
    if case['case'] == 'shards':
        assert set(case['images_per_s']) == {'shards', 'files', 'decode only'}
        assert set(case['records_per_s']) == {'read_raw', 'copy'}
        assert case['open_ms'] > 0 and case['open_shards'] > 0
        assert [(check['unit'], check['goal']) for check in case['checks']] == SHARDS_GOALS
    if case['case'] in RECYCLING_GOALS:
        goals = [check['goal'] for check in case['checks'] if check['goal'] is not None]
        assert goals == RECYCLING_GOALS[case['case']]
    if case['case'] == 'curation_metadata':
        assert set(case['host_steal']) == {'in_process', 'clusters'}
        assert set(case['driver_peak_mb']) == {'threads', 'threads_quarter', 'cluster',
                                               'eager'}
        assert case['driver_peak_mb']['eager'] > 0 and case['partition_mb'] > 0
    if case['case'] == 'curation_reshard':  # first reads timed in fresh processes
        assert set(case['first_record_ms']) == {'with_idx', 'without_idx', 'scan_tar'}
        assert set(case['read_ms_per_record']) == {'random', 'sequential'}
        # one phase: the one-process contenders in fresh processes, the clusters up
        assert set(case['host_steal']) == {'rounds', 'first_reads'}
        assert all(len(values) == case['fresh_processes']
                   for values in case['fresh_samples'].values())
        assert all(ms > 0 for ms in case['first_record_ms'].values())
        goals = [(check['unit'], check['goal']) for check in case['checks']
                 if check['goal'] is not None]
        assert goals == RESHARD_GOALS
    if case['case'].startswith('transforms_loader'):  # images/s
        kind = case['case'][len('transforms_loader_'):]
        assert set(case['images_per_s']) == CONTENDERS | LOADER_BATCH_TARGETS
        goals = [check['goal'] for check in case['checks'] if check['goal'] is not None]
        assert goals == [{'op': '>=', 'bound': LOADER_GOALS[kind]}]
        assert {'gluoncv/' + name for name in LOADER_BATCH_TARGETS} <= set(case['ratios'])
    elif case['case'].startswith('transforms_'):  # per sample: the 4x goal
        goals = [check['goal'] for check in case['checks'] if check['goal'] is not None]
        assert goals == [{'op': '>=', 'bound': 4}]
    if case['case'].startswith('batch_targets_'):  # one batch's targets
        kind = case['case'][len('batch_targets_'):]
        goals = [check['goal'] for check in case['checks'] if check['goal'] is not None]
        assert goals == [{'op': '>=', 'bound': BATCH_TARGETS_GOALS[kind]}]
        assert case['out_bytes'] > 0 and case['outputs']
        assert 'gluoncv/gluonbatch in a worker' in case['ratios']
    if case['case'] == 'seeded_loader':  # images/s and per CPU second, seeded or not
        assert set(case['images_per_s']) == set(case['images_per_cpu_s']) == OWN_CONTENDERS[
            'seeded_loader']
        assert case['seeding_ms'] > 0
    if case['case'] == 'resume':
        assert 0 < case['state_bytes'] < 1024
    if case['case'].startswith('jpeg_loader'):  # images/s, CPU per image with 1 worker
        kind = case['case'][len('jpeg_loader_'):]
        assert set(case['images_per_s']) == CONTENDERS
        assert case['one_worker_cpu_ms'] > 0 and case['decode_cpu_ms'] > 0
        assert case['ratios']['one worker/decode'] == pytest.approx(
            case['one_worker_cpu_ms'] / case['decode_cpu_ms'])
        goals = [check['goal'] for check in case['checks'] if check['goal'] is not None]
        assert goals == JPEG_GOALS[kind]
        if kind == 'ssd':  # the split timed in a worker, and the rest of that loader's CPU
            assert list(case['stages_ms']) == JPEG_STAGES
            assert all(ms > 0 for ms in case['stages_ms'].values())
            # the stages are part of what the loader's processes spent: plumbing is the rest
            assert 0 < case['plumbing_ms'] < case['split_cpu_ms']
            assert sum(case['stages_ms'].values()) < case['split_cpu_ms']
        else:
            assert 'stages_ms' not in case
    if case['case'] == 'webdataset':  # per record; one goal: random vs sequential reads
        assert set(case['records_per_s']) == CONTENDERS
        assert set(case['raw_read_us_per_record']) == {'random', 'in_order', 'sequential',
                                                       'tarfile_stream', 'verify'}
        assert case['reshard_mb_per_s'] > 0 and case['copyfile_mb_per_s'] > 0
        goals = [check for check in case['checks'] if check['goal'] is not None]
        assert [check['goal'] for check in goals] == [{'op': '<=', 'bound': 2}]


def run_without_gluoncv(args):
    result = subprocess.run([sys.executable, '-c', WITHOUT_GLUONCV] + args, cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize('args', [[], pytest.param(['--quick', '--only', 'pad_labels'],
                                                 marks=pytest.mark.slow)])
def test_benchmarks_without_gluoncv_exit_2_naming_the_extra(args):
    code, stdout, stderr = run_without_gluoncv(args)
    assert code == 2, stderr[-3000:]
    assert stdout == ''
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and 'Traceback' not in stderr, stderr[-3000:]
    assert lines[0].startswith('python -m benchmarks: error: ')
    assert "pip install 'gluonbatch[examples]'" in lines[0]


def test_benchmarks_help_and_the_chart_need_no_gluoncv():
    code, stdout, stderr = run_without_gluoncv(['--help'])  # imports both
    assert code == 0 and 'usage: python -m benchmarks' in stdout, stderr[-3000:]


def test_the_benchmarks_are_the_source_trees():
    # pyarrow installs a package of the same name; pytest.ini puts the source tree first
    assert pathlib.Path(runner.__file__).resolve().parent == ROOT / 'benchmarks'


def test_the_wheel_holds_no_benchmarks(monkeypatch):
    from distutils.core import run_setup  # setuptools' own, as setup.py imports it

    monkeypatch.chdir(ROOT)  # setup.py finds its packages from where it is run

    packages = run_setup(str(ROOT / 'setup.py'), stop_after='init').packages
    assert 'gluonbatch' in packages and 'gluonbatch.shards' in packages
    assert not [name for name in packages if name.split('.')[0] == 'benchmarks'
                or name.startswith('gluonbatch.bench')], packages


def test_the_package_imports_no_benchmarks():
    importers = []
    for path in (ROOT / 'gluonbatch').rglob('*.py'):
        module = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
        names = imported_names(path.read_text(encoding='utf-8'), module,
                               path.name == '__init__.py')
        if any(name.split('.')[0] == 'benchmarks' for name in names):
            importers.append(str(path.relative_to(ROOT)))
    assert not importers


def test_the_gluonbatch_command_has_no_bench():
    from gluonbatch.cli import build_parser

    with pytest.raises(SystemExit) as stop:
        build_parser().parse_args(['bench'])
    assert stop.value.code == 2


#: Prints this run's parent process and which of ``fractions`` (preloaded) and ``colorsys``
#: it found imported; then imports ``colorsys``, which a later fresh run must not find.
PARENT_AND_IMPORTED = ("import json, os, sys; seen = [os.getppid(), 'fractions' in "
                       "sys.modules, 'colorsys' in sys.modules]; import colorsys; "
                       "print(json.dumps(seen))")


def test_quick_session_forks_each_fresh_run_from_one_preloaded_process():
    with quick_session(preload=['fractions']):
        first = run_script(PARENT_AND_IMPORTED, 'first')
        second = run_script(PARENT_AND_IMPORTED, 'second')
        with pytest.raises(RuntimeError, match=r'the failing run failed:(.|\n)*ZeroDivision'):
            run_script('1 / 0', 'failing')
        assert run_script('import json, sys; print(json.dumps(sys.argv[1:]))', 'args',
                          1, 'b') == ['1', 'b']
    server = first[0]
    assert server != os.getpid() and first == second == [server, True, False]
    # outside the session: a fresh interpreter started by this process, nothing preloaded
    assert run_script(PARENT_AND_IMPORTED, 'fresh') == [os.getpid(), False, False]


@pytest.mark.skipif(not os.path.exists('/proc/stat'), reason='the system reports no steal')
def test_host_steal_is_a_share_of_the_block_where_the_system_reports_it():
    with host_steal() as steal:
        assert steal['share'] is None  # set on leaving the block
        sum(range(10 ** 6))
    assert 0 <= steal['share'] <= 1


def _burn(seconds):
    """Run ``seconds`` of CPU on this thread."""
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass


class _Burns:
    """Items that each run ``seconds`` of CPU on the thread reading them."""

    def __init__(self, length, seconds):
        self.length, self.seconds = length, seconds

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        _burn(self.seconds)
        return index


@pytest.mark.parametrize('workers', [0, 1, 2])
def test_epoch_costs_count_the_loaders_cpu_once_and_not_the_readings(monkeypatch, workers):
    """A loader's CPU per batch counts what its processes ran, once (each item burns 50 ms
    of CPU wherever it is read), but not the reading of the workers' counters (made to
    burn 0.3 s here); the epoch's wall seconds per batch are appended."""
    from benchmarks import cases_seeded
    from gluonbatch import DataLoader

    read = cases_seeded.children_cpu_seconds
    monkeypatch.setattr(cases_seeded, 'children_cpu_seconds', lambda: _burn(0.3) or read())
    loader = DataLoader(_Burns(8, 0.05), batch_size=4, num_workers=workers)
    try:
        walls = []
        per_batch = cases_seeded.epoch_costs(loader, 2, walls)
    finally:
        loader.close()
    assert 4 * 0.05 <= per_batch < 1.5 * 4 * 0.05
    assert len(walls) == 1 and walls[0] > 0
