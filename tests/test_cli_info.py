"""``gluonbatch info`` and ``gluonbatch --version``: the versions gluonbatch runs with, and
each optional part found (its version) or missing (the extra that installs it)."""
import os
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import gluonbatch
from gluonbatch import cli
from gluonbatch.cli.info import OPTIONAL_PARTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_info_lists_the_versions_and_every_optional_part(capsys):
    assert cli.main(['info']) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ['gluonbatch   ' + gluonbatch.__version__,
                         'Python       %d.%d.%d' % sys.version_info[:3],
                         'MXNet        ' + mx.__version__, 'numpy        ' + np.__version__]
    parts = {line.split()[0]: line for line in lines if line.startswith('  ')}
    assert list(parts) == [name for name, _, _, _ in OPTIONAL_PARTS]
    assert {'simplejpeg', 'pyarrow', 'Pillow', 'tqdm', 'pandas', 'dask', 'distributed',
            'gluoncv'} <= set(parts)
    import simplejpeg  # the test stack has it: found, with its version
    assert parts['simplejpeg'].split()[1] == simplejpeg.__version__
    assert lines[-1].startswith('shared-memory recycling: ')


def test_a_missing_part_names_the_extra_that_installs_it():
    script = ("import sys; sys.modules['simplejpeg'] = sys.modules['dask'] = None; "
              "from gluonbatch.cli import main; sys.exit(main(['info']))")
    done = subprocess.run([sys.executable, '-c', script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    parts = {line.split()[0]: line for line in done.stdout.splitlines()
             if line.startswith('  ')}
    assert parts['simplejpeg'].split()[1] == 'missing'
    assert "JPEG" in parts['simplejpeg'] and "pip install 'gluonbatch[jpeg]'" in parts[
        'simplejpeg']
    assert "pip install 'gluonbatch[curation]'" in parts['dask']
    assert 'missing' not in parts['pyarrow']


def test_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as exit:
        cli.main(['--version'])
    assert exit.value.code == 0
    assert capsys.readouterr().out == 'gluonbatch %s\n' % gluonbatch.__version__
