"""The worker-kill measurement (``python -m benchmarks.worker_kills``) runs and reports
gluonbatch's loader surviving every kill."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow  # fresh interpreters, one per run
def test_gluonbatch_survives_every_kill_of_the_measurement(tmp_path):
    # Two runs: the first kills late in the epoch (the loader's close() reaps the worker),
    # the second early (a replacement loads its batches).
    out = tmp_path / 'kills.json'
    result = subprocess.run([sys.executable, '-m', 'benchmarks.worker_kills', '--runs', '2',
                             '--which', 'gluonbatch', '--json', str(out)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'gluonbatch' in result.stdout and '2/2' in result.stdout  # streams identical
    raw = json.loads(out.read_text())['gluonbatch']
    for run in raw['runs']:
        assert run['result'] == 'completed' and run['hang'] is None, run
        assert run['stream'] == raw['no kill']['stream'], run
        assert not run['tmp_left'] and not run['shm_left'] and not run.get('children'), run
    assert any(run['restarts'] for run in raw['runs'])
