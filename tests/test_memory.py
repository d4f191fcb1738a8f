"""Where batches live (set_memory / GLUONBATCH_MEMORY) and shared memory that fails safely."""
import os
import pathlib
import shutil
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

import gluonbatch
from gluonbatch.batchify import Pad, Stack
from helpers import SHARED

HERE = pathlib.Path(__file__).resolve().parent
PLAIN = mx.cpu(0)


@pytest.fixture
def memory_setting():
    """Run a test with a memory setting and restore the previous one afterwards."""
    with gluonbatch.use_memory(gluonbatch.get_memory()):
        yield gluonbatch.set_memory


@pytest.mark.parametrize('mode, context', [('shared', SHARED), ('cpu', PLAIN), ('auto', PLAIN)])
def test_memory_setting_in_the_main_process(memory_setting, mode, context):
    memory_setting(mode)
    assert gluonbatch.get_memory() == mode
    padded, lengths = Pad(ret_length=True)([[1, 2], [3]])
    assert padded.context == context and lengths.context == context
    assert gluonbatch.Append()([np.ones(2)])[0].context == context
    assert gluonbatch.default_collate([{'a': 1}, {'a': 2}])['a'].context == context
    np.testing.assert_array_equal(padded.asnumpy(), [[1, 2], [3, 0]])


def test_bad_setting_is_refused():
    with pytest.raises(ValueError, match="one of shared, auto, cpu, got 'gpu'"):
        gluonbatch.set_memory('gpu')


class RecordsContext:
    """A batchify function that also reports, from inside the worker, where it allocated."""

    def __call__(self, samples):
        batch = Stack()(samples)
        return batch, str(batch.context)


@pytest.mark.parametrize('num_workers, thread_pool, inside', [
    (2, False, 'cpu_shared(0)'), (1, False, 'cpu_shared(0)'), (0, False, 'cpu(0)'),
    (2, True, 'cpu(0)')])
def test_auto_uses_shared_memory_only_in_worker_processes(memory_setting, num_workers,
                                                          thread_pool, inside):
    memory_setting('auto')
    data = mx.gluon.data.SimpleDataset([np.full((4,), i, np.float32) for i in range(6)])
    loader = mx.gluon.data.DataLoader(data, batch_size=3, batchify_fn=RecordsContext(),
                                      num_workers=num_workers, thread_pool=thread_pool)
    seen = []
    for batch, allocated_in in loader:
        assert allocated_in == inside
        # worker batches travel by file descriptor and arrive as the same shared memory
        assert batch.context == (SHARED if inside == 'cpu_shared(0)' else PLAIN)
        seen.extend(batch.asnumpy()[:, 0].tolist())
    assert sorted(seen) == list(range(6))


@pytest.mark.parametrize('value, expected', [
    ('shared', 'cpu_shared(0)'),
    pytest.param('cpu', 'cpu(0)', marks=pytest.mark.slow),  # a fresh interpreter each
    pytest.param('auto', 'cpu(0)', marks=pytest.mark.slow)])
def test_environment_variable(value, expected):
    code = 'import gluonbatch; print(gluonbatch.Stack()([[1], [2]]).context)'
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            env=dict(os.environ, GLUONBATCH_MEMORY=value), check=True)
    assert result.stdout.strip() == expected


def test_bad_environment_variable_names_itself():
    code = 'import gluonbatch; gluonbatch.Stack()([[1], [2]])'
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                            env=dict(os.environ, GLUONBATCH_MEMORY='disk'))
    assert result.returncode != 0
    assert 'GLUONBATCH_MEMORY must be one of shared, auto, cpu' in result.stderr


def _private_small_shm_available():
    if shutil.which('unshare') is None or os.geteuid() != 0:
        return False
    probe = subprocess.run(['unshare', '-m', 'sh', '-c',
                            'mount -t tmpfs -o size=16m tmpfs /dev/shm'], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not _private_small_shm_available(),
                    reason='needs root and unshare to mount a private 16 MiB /dev/shm')
def test_oversized_batches_raise_and_the_process_survives():
    script = ('mount -t tmpfs -o size=16m tmpfs /dev/shm && exec %s %s'
              % (sys.executable, HERE / 'shm_scenarios.py'))
    result = subprocess.run(['unshare', '-m', 'sh', '-c', script], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]  # no Bus error, no crash
    lines = dict((line.rsplit(' ', 1)[0], line.rsplit(' ', 1)[1])
                 for line in result.stdout.splitlines())
    expected = {}
    for name in ('stack', 'pad', 'append', 'tuple', 'rcnn', 'collate'):
        expected.update({'%s main' % name: 'SharedMemoryError',
                         '%s main-after' % name: 'ok',
                         '%s workers' % name: 'SharedMemoryError',
                         '%s workers-after' % name: 'ok'})
    expected['reserve main'] = 'SharedMemoryError'
    # Workers recycle (the setting is on), and give idle segments back when room runs out.
    expected.update({'recycled workers': 'ok', 'recycled pooled': '3',
                     'recycled released': '3'})
    assert lines == expected


def test_the_free_space_check_counts_a_margin(monkeypatch):
    class Stats:  # a 100 MiB tmpfs with 10 MiB free
        f_frsize, f_blocks, f_bavail = 4096, 25600, 2560

    monkeypatch.setattr(os, 'statvfs', lambda path: Stats)
    mib = np.zeros(1 << 18, np.float32)
    assert Stack()([mib] * 8).shape == (8, 1 << 18)  # 8 MiB + 1 MiB margin fits in 10 MiB
    with pytest.raises(gluonbatch.SharedMemoryError, match=r'9.5 MiB .* 10.0 MiB free of '
                                                           r'100.0 MiB'):
        Stack()([np.zeros(1 << 17, np.float32)] * 19)  # 19 half MiB


def test_use_memory_is_scoped_and_restores_on_error():
    before = gluonbatch.get_memory()
    with pytest.raises(KeyError):
        with gluonbatch.use_memory('cpu'):
            assert Stack()([[1], [2]]).context == PLAIN
            raise KeyError('inside')
    assert gluonbatch.get_memory() == before
    assert Stack()([[1], [2]]).context == SHARED
    with pytest.raises(ValueError, match="one of shared, auto, cpu, got 'disk'"):
        with gluonbatch.use_memory('disk'):
            pass
    assert gluonbatch.get_memory() == before


def test_a_setting_of_the_wrong_type_is_a_type_error():
    with pytest.raises(TypeError, match='the memory setting must be one of shared, auto, cpu, '
                                        r'got 3 \(int\)'):
        gluonbatch.set_memory(3)
