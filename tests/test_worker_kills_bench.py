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
    out = tmp_path / 'kills.json'
    result = subprocess.run([sys.executable, '-m', 'benchmarks.worker_kills', '--runs', '2',
                             '--which', 'gluonbatch', '--json', str(out)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'gluonbatch' in result.stdout and '2/2' in result.stdout
    assert out.exists() and json.loads(out.read_text())
