"""N-worker data-parallel training on MXNet's distributed kvstore, all on 127.0.0.1.

scripts/launch_local.py starts 1 scheduler, 1 server and 2 workers running
scripts/dist_train.py; every worker writes a report of the samples it loaded and of its
final parameters.
"""
import ast
import importlib
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from gluonbatch.curation import ImageTextPairDataset, make_example_dataset

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAUNCH = os.path.join(ROOT, 'scripts', 'launch_local.py')
TRAIN = os.path.join(ROOT, 'scripts', 'dist_train.py')
NUM_WORKERS = 2


def _loopback_ok():
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(('127.0.0.1', 0))
            sock.listen(1)
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _loopback_ok(),
                                reason='this machine forbids binding TCP ports on 127.0.0.1')


def _launch(train_args, timeout=300, launcher_args=(), num_workers=NUM_WORKERS):
    """Run the training script on the local cluster; ``timeout`` only bounds a hang."""
    command = [sys.executable, LAUNCH, '--num-workers', str(num_workers),
               '--timeout', str(timeout - 5), *launcher_args,
               '--', sys.executable, TRAIN, *train_args]
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout + 15,
                          env=env, cwd=ROOT)


def _reports(directory, num_workers=NUM_WORKERS):
    reports = []
    for rank in range(num_workers):
        with open(os.path.join(directory, 'rank%d.json' % rank)) as report:
            reports.append(json.load(report))
    return reports


def _explain(result):
    return 'exit %d\nstdout:\n%s\nstderr:\n%s' % (result.returncode, result.stdout[-4000:],
                                                  result.stderr[-4000:])


def _check_sync(reports, steps):
    assert [r['rank'] for r in reports] == list(range(NUM_WORKERS))
    assert all(r['num_workers'] == NUM_WORKERS and r['steps'] == steps for r in reports)
    # identical parameters on every worker after the steps, and training moved them
    assert len({r['digest'] for r in reports}) == 1
    assert reports[0]['params'] == reports[1]['params']
    assert all(r['losses'][0] != r['losses'][-1] for r in reports)


@pytest.mark.parametrize('samples, last_part', [(64, 'drop'),
                                                pytest.param(67, 'pad', marks=pytest.mark.slow)])
def test_two_workers_split_the_data_and_agree(tmp_path, samples, last_part):
    batch_size = 8
    part = samples // NUM_WORKERS if last_part == 'drop' else -(-samples // NUM_WORKERS)
    steps = -(-part // batch_size)  # exactly one epoch
    result = _launch(['--steps', str(steps), '--samples', str(samples), '--batch-size',
                      str(batch_size), '--last-part', last_part, '--report-dir',
                      str(tmp_path)])
    assert result.returncode == 0, _explain(result)
    reports = _reports(tmp_path)
    _check_sync(reports, steps)
    seen = [r['seen']['0'] for r in reports]
    assert [len(s) for s in seen] == [part] * NUM_WORKERS  # equal parts
    for ids in seen:
        assert len(set(ids)) == len(ids)
    union = set(seen[0]) | set(seen[1])
    if last_part == 'drop':
        assert not set(seen[0]) & set(seen[1])  # disjoint
        assert len(union) == samples - samples % NUM_WORKERS
    else:
        assert union == set(range(samples))  # complete
        assert len(set(seen[0]) & set(seen[1])) == (-samples) % NUM_WORKERS


@pytest.mark.slow
def test_seeded_global_batches_are_the_same_on_1_2_and_4_ranks(tmp_path):
    """With --loader-seed, every step's global batch (the ranks' batches concatenated in
    rank order: sample ids and the hashes of their augmented images) is the one 1 rank
    loads with the whole global batch, over an epoch boundary, the last batch padded.
    (The in-process sibling: tests/test_seeded_elastic.py.)"""
    global_batch, steps = 8, 5  # 20 samples: 3 batches an epoch
    runs = {}
    for ranks in (1, 2, 4):
        directory = tmp_path / str(ranks)
        result = _launch(['--steps', str(steps), '--samples', '20', '--batch-size',
                          str(global_batch // ranks), '--loader-seed', '9', '--report-dir',
                          str(directory)], num_workers=ranks)
        assert result.returncode == 0, _explain(result)
        reports = _reports(directory, ranks)
        assert [r['batches_per_epoch'] for r in reports] == [3] * ranks
        assert all(len(r['batches']) == steps for r in reports)
        runs[ranks] = [[name for r in reports for name in r['batches'][step]]
                       for step in range(steps)]
    assert runs[2] == runs[1] and runs[4] == runs[1]
    names = [name for batch in runs[1] for name in batch]
    ids = [int(name.split(':')[0]) for name in names]
    assert len(ids) == 40 and sorted(ids[:20]) == list(range(20))  # an epoch, in its order
    assert ids[20:24] == ids[:4]  # its last batch padded from the order's start
    assert len(set(names)) == 40  # with augmentations of their own, as every other sample


def test_webdataset_shards_by_rank(tmp_path):
    data = make_example_dataset(str(tmp_path / 'wds'), num_shards=4, samples_per_shard=3)
    reports_dir = tmp_path / 'reports'
    result = _launch(['--steps', '2', '--batch-size', '3', '--webdataset', data,
                      '--report-dir', str(reports_dir)])
    assert result.returncode == 0, _explain(result)
    reports = _reports(reports_dir)
    _check_sync(reports, 2)
    seen = [set(r['seen']['0']) for r in reports]
    everything = set(ImageTextPairDataset.from_webdataset(data, 'key').metadata['key'])
    assert not seen[0] & seen[1] and seen[0] | seen[1] == everything


def test_a_failing_worker_stops_everything(tmp_path):
    result = _launch(['--steps', '50', '--fail-rank', '1'], timeout=120)
    # stopped, not timed out (the launcher's timeout ends a run with 124)
    assert result.returncode == 3, _explain(result)
    assert 'exited with status 3; stopping the others' in result.stderr
    pids = [int(pid) for pid in re.findall(r'started \w+ pid (\d+)', result.stderr)]
    assert len(pids) == 2 + NUM_WORKERS
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_the_launcher_times_out():
    """A command that never ends is stopped by the launcher's timeout (the test's own
    timeout only bounds a launcher that never stops it)."""
    command = [sys.executable, LAUNCH, '--num-workers', '1', '--timeout', '1', '--',
               sys.executable, '-c', 'import threading; threading.Event().wait()']
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 124, result.stderr
    assert 'timed out' in result.stderr


def test_the_launcher_needs_a_command():
    result = subprocess.run([sys.executable, LAUNCH, '--num-workers', '2'],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and 'command' in result.stderr


def test_the_training_script_names_objects_that_exist():
    with open(TRAIN, encoding='utf-8') as script:
        docstring = ast.get_docstring(ast.parse(script.read()))
    names = re.findall(r'gluonbatch(?:\.\w+)+', docstring)
    assert 'gluonbatch.samplers.split.SplitSampler' in names
    for name in names:
        module, _, attribute = name.rpartition('.')
        assert hasattr(importlib.import_module(module), attribute), name


def test_detection_shards_split_equally_by_rank(tmp_path):
    """--shards: every rank reads its equal part of the window order; together the parts
    are the dataset, each record once."""
    from gluonbatch.detection import DetectionShards, from_voc, make_voc_example

    root = make_voc_example(str(tmp_path / 'voc'), num_images=12, size=(64, 48), seed=2)
    shards = from_voc(root, str(tmp_path / 'shards'), splits=[(2007, 'trainval')],
                      samples_per_shard=3)
    reports_dir = tmp_path / 'reports'
    result = _launch(['--steps', '2', '--batch-size', '3', '--shards', shards,
                      '--shard-window', '2', '--report-dir', str(reports_dir)])
    assert result.returncode == 0, _explain(result)
    reports = _reports(reports_dir)
    _check_sync(reports, 2)
    seen = [r['seen']['0'] for r in reports]
    assert [len(names) for names in seen] == [6, 6]
    dataset = DetectionShards(shards)
    assert sorted(seen[0] + seen[1]) == sorted(dataset.record_id(i) for i in range(12))
