"""One thread per DataLoader worker (:func:`gluonbatch._core.threads.one_thread_per_worker`):
in a forked worker OpenCV and the BLAS libraries run on one thread, whether loaded before
the call or after it, and the process that forked it keeps its own settings."""
import json
import multiprocessing
import os
import subprocess
import sys
import time
import traceback

import cv2
import numpy as np
import pytest
import threadpoolctl

from gluonbatch._core import threads
from gluonbatch._core.threads import LOAD_TIME_VARIABLES, one_thread_per_worker


def openblas_threads():
    """The thread count of each OpenBLAS loaded in this process (numpy's, OpenCV's...)."""
    return [pool['num_threads'] for pool in threadpoolctl.threadpool_info()
            if pool['internal_api'] == 'openblas']


def _worker(send, image):
    try:
        one_thread_per_worker()
        one_thread_per_worker()  # a second call changes nothing
        # OpenCV still works, its parent's pool threads absent here
        cv2.GaussianBlur(image, (5, 5), 1)
        send.send({'opencv': cv2.getNumThreads(), 'openblas': openblas_threads(),
                   'environ': {name: os.environ.get(name)
                               for name in LOAD_TIME_VARIABLES + ('OPENBLAS_CORETYPE',)}})
    except BaseException:
        send.send({'error': traceback.format_exc()})


def test_a_forked_worker_runs_on_one_thread_and_its_parent_as_before(monkeypatch):
    """The parent runs OpenCV's pool on 2 threads and lets them go idle, the state in which
    ``cv2.setNumThreads(1)`` in a forked child hangs; the child's call does not, and leaves
    OpenCV and every OpenBLAS on one thread there, and the parent's settings as they were."""
    monkeypatch.setenv('OPENBLAS_CORETYPE', 'kept as it was')  # read only when loading
    for name in LOAD_TIME_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    image = np.zeros((1000, 1000, 3), np.uint8)
    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        with threadpoolctl.threadpool_limits(2, user_api='blas'):
            parent_blas = openblas_threads()
            assert max(parent_blas) == 2  # else the child's 1 would prove nothing
            cv2.GaussianBlur(image, (5, 5), 1)
            time.sleep(0.05)  # the pool's threads go idle
            context = multiprocessing.get_context('fork')
            receive, send = context.Pipe(duplex=False)
            process = context.Process(target=_worker, args=(send, image), daemon=True)
            process.start()
            try:
                assert receive.poll(60), 'the worker sent nothing in 60 s: it hung'
                report = receive.recv()
            finally:
                process.join(10)
                if process.is_alive():
                    process.kill()
                    process.join()
            assert 'error' not in report, report.get('error')
            assert report['opencv'] == 1
            assert report['openblas'] and set(report['openblas']) == {1}
            assert report['environ'] == dict({name: '1' for name in LOAD_TIME_VARIABLES},
                                             OPENBLAS_CORETYPE='kept as it was')
            assert process.exitcode == 0
            assert cv2.getNumThreads() == 2
            assert openblas_threads() == parent_blas
            assert not any(name in os.environ for name in LOAD_TIME_VARIABLES)
    finally:
        cv2.setNumThreads(before)


# Run by a fresh interpreter: the module loaded from its file (importing gluonbatch would
# import MXNet, and MXNet OpenCV), the call, then OpenCV and numpy imported.
LOADED_AFTER = r"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location('threads', sys.argv[1])
threads = importlib.util.module_from_spec(spec)
spec.loader.exec_module(threads)
loaded = sorted(name for name in ('cv2', 'numpy') if name in sys.modules)
threads.one_thread_per_worker()
import cv2, numpy, threadpoolctl
print(json.dumps({'loaded': loaded, 'opencv': cv2.getNumThreads(),
                  'openblas': [pool['num_threads'] for pool in threadpoolctl.threadpool_info()
                               if pool['internal_api'] == 'openblas']}))
"""


def test_libraries_loaded_after_the_call_run_on_one_thread():
    """OpenCV and numpy imported after the call read its environment variables: one thread,
    where the environment the process started with asked for two."""
    environ = dict(os.environ, OPENCV_FOR_THREADS_NUM='2', OPENBLAS_NUM_THREADS='2',
                   OMP_NUM_THREADS='2')
    result = subprocess.run([sys.executable, '-c', LOADED_AFTER, threads.__file__],
                            capture_output=True, text=True, env=environ, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.splitlines()[-1])
    assert report['loaded'] == []
    assert report['opencv'] == 1
    assert report['openblas'] and set(report['openblas']) == {1}


def _stack_and_count_copy_threads(samples):
    """Stack's batch, and how many of gluonbatch's copy threads this process runs."""
    import threading

    import mxnet as mx

    from gluonbatch.batchify import Stack

    batch = Stack()(samples)
    copying = sum(thread.name.startswith('gluonbatch-copy') for thread in threading.enumerate())
    return batch, mx.nd.array([copying])


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_worker_writes_its_batches_on_one_thread(num_workers):
    """A batch large enough for copy threads (25 MB) is written by the worker's own thread,
    as its OpenCV runs: the workers are the parallelism. The training process keeps its
    copy threads. The batches are the same."""
    from gluonbatch import DataLoader

    images = [np.full((3, 256, 256), index, np.float32) for index in range(32)]
    loader = DataLoader(images, batch_size=32, batchify_fn=_stack_and_count_copy_threads,
                        num_workers=num_workers)
    (batch, copying), = list(loader)
    np.testing.assert_array_equal(batch.asnumpy(), np.stack(images))
    if num_workers:
        assert copying.asscalar() == 0
    elif (os.cpu_count() or 1) > 1:
        assert copying.asscalar() > 0
