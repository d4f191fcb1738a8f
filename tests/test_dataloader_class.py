"""gluonbatch.DataLoader as a drop-in for mx.gluon.data.DataLoader: its signature, what it
brings (seeds, state, thread pool, numpy mode, worker hygiene) and its argument checks."""
import hashlib
import inspect
import json

import cv2
import mxnet as mx
import numpy as np
import pytest
import threadpoolctl
from hypothesis import given, settings, strategies as st

from gluonbatch import DataLoader, Stack
from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.samplers import SeededBatchSampler


class Noisy(mx.gluon.data.Dataset):
    def __len__(self):
        return 24

    def __getitem__(self, index):
        return (np.random.uniform(size=3) + index).astype('float32')


def digests(loader):
    return [hashlib.sha256(batch.asnumpy().tobytes()).hexdigest() for batch in loader]


def test_the_signature_is_mxnets_with_seed_and_max_restarts_after_it():
    ours = list(inspect.signature(DataLoader).parameters)
    theirs = list(inspect.signature(mx.gluon.data.DataLoader).parameters)
    assert ours[:len(theirs)] == theirs
    assert ours[len(theirs):len(theirs) + 2] == ['seed', 'max_restarts']


def test_positional_arguments_mean_what_they_mean_to_mxnet():
    data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(5)])
    ours = DataLoader(data, 2, False, None, 'discard', None, Stack())
    theirs = mx.gluon.data.DataLoader(data, 2, False, None, 'discard', None, Stack())
    assert [b.asnumpy().tolist() for b in ours] == [b.asnumpy().tolist() for b in theirs]


@pytest.mark.parametrize('num_workers', [1, 2])
def test_threads_and_processes_give_the_seeded_batches_of_zero_workers(num_workers):
    alone = digests(DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3))
    with DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3, num_workers=num_workers,
                    thread_pool=True) as threads:
        assert digests(threads) == alone
        assert threads.worker_pids == []
    with DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3,
                    num_workers=num_workers) as processes:
        assert digests(processes) == alone
        assert len(processes.worker_pids) == num_workers


@pytest.mark.parametrize('thread_pool', [False, True])
def test_an_error_in_a_thread_or_worker_keeps_its_type_and_names_the_batch(thread_pool):
    class Broken(Noisy):
        def __getitem__(self, index):
            if index == 5:
                raise KeyError('image-5')
            return super().__getitem__(index)

    with DataLoader(Broken(), batch_size=4, num_workers=2, thread_pool=thread_pool) as loader:
        with pytest.raises(KeyError) as raised:
            list(loader)
    assert 'raised while loading dataset samples [4, 5, 6, 7]' in raised.value.__notes__


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_numpy_mode_batches_are_numpy_arrays(num_workers):
    data = mx.gluon.data.SimpleDataset([np.full(2, i, 'float32') for i in range(6)])
    with mx.util.np_shape(True), mx.util.np_array(True):
        with DataLoader(data, batch_size=3, num_workers=num_workers) as loader:
            batches = list(loader)
    assert all(isinstance(batch, mx.np.ndarray) for batch in batches)
    assert [batch.asnumpy()[:, 0].tolist() for batch in batches] == [[0, 1, 2], [3, 4, 5]]


class Threads(mx.gluon.data.Dataset):
    """Each sample: the OpenCV and OpenBLAS thread counts where it is read."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        blas = [entry['num_threads'] for entry in threadpoolctl.threadpool_info()
                if entry['internal_api'] == 'openblas']
        return np.array([cv2.getNumThreads(), max(blas)], 'float32')


@pytest.mark.parametrize('num_workers', [1, 2])
def test_workers_run_opencv_and_blas_on_one_thread_and_leave_the_parent_alone(num_workers):
    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        with DataLoader(Threads(), batch_size=2, num_workers=num_workers) as loader:
            seen = np.concatenate([batch.asnumpy() for batch in loader])
        assert seen.tolist() == [[1, 1]] * 4
        assert cv2.getNumThreads() == 2
    finally:
        cv2.setNumThreads(before)


def test_set_epoch_during_a_pass_takes_effect_as_it_ends():
    loader = DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3)
    for number, _ in enumerate(loader):
        if number == 1:
            loader.set_epoch(5)
    assert (loader.state_dict()['epoch'], loader.state_dict()['batch']) == (5, 0)
    fresh = DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3)
    fresh.set_epoch(5)
    assert digests(loader) == digests(fresh)


@settings(max_examples=20, deadline=None)
@given(epoch=st.integers(0, 3), batch=st.integers(0, 6))
def test_a_sampler_state_and_a_loader_state_load_into_each_other(epoch, batch):
    sampler = SeededBatchSampler(len(Noisy()), 4, seed=3)
    sampler.load_state_dict({'epoch': epoch, 'batch': batch})
    loader = DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3)
    loader.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    expected = [[key.index for key in b] for b in sampler.batches(*(
        (epoch, batch) if batch < 6 else (epoch + 1, 0)))]
    assert len(digests(loader)) == len(expected)
    back = SeededBatchSampler(len(Noisy()), 4, seed=3)
    back.load_state_dict(loader.state_dict())
    assert back.state_dict() == {key: value for key, value in loader.state_dict().items()
                                 if key != 'format'}


@pytest.mark.parametrize('value', [-1, 1.5, True, '2'])
def test_bad_max_restarts_is_refused(value):
    error = ValueError if value == -1 else TypeError
    with pytest.raises(error, match='max_restarts'):
        DataLoader(Noisy(), batch_size=2, max_restarts=value)


def test_gluoncvs_loaders_are_layers_over_it():
    assert issubclass(DetectionDataLoader, DataLoader)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_mxnets_seeded_route_through_this_loader_gives_the_seeded_batches(num_workers):
    from gluonbatch.seeded import SeededDataset
    sampler = SeededBatchSampler(len(Noisy()), 4, seed=3)
    with DataLoader(SeededDataset(Noisy()), batch_sampler=sampler,
                    num_workers=num_workers) as loader:
        first = next(iter(loader))
        assert (loader.state_dict()['epoch'], loader.state_dict()['batch']) == (0, 1)
        rest = digests(loader)
    seeded = digests(DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3))
    assert [hashlib.sha256(first.asnumpy().tobytes()).hexdigest()] + rest == seeded


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_state_loaded_during_a_pass_has_the_last_word(num_workers):
    with DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3,
                    num_workers=num_workers) as loader:
        later = dict(loader.state_dict(), epoch=2, batch=3)
        for number, _ in enumerate(loader):
            if number == 1:
                loader.load_state_dict(later)
        assert (loader.state_dict()['epoch'], loader.state_dict()['batch']) == (2, 3)
        resumed = digests(loader)
    fresh = DataLoader(Noisy(), batch_size=4, shuffle=True, seed=3)
    fresh.load_state_dict(later)
    assert resumed == digests(fresh)


def test_a_stuck_thread_raises_after_timeout_instead_of_hanging():
    import threading
    release = threading.Event()

    class Stuck(Noisy):
        def __getitem__(self, index):
            if index == 0:
                release.wait(60)
            return super().__getitem__(index)

    loader = DataLoader(Stuck(), batch_size=4, num_workers=2, thread_pool=True, timeout=1)
    try:
        with pytest.raises(RuntimeError, match='loader thread is stuck'):
            list(loader)
    finally:
        release.set()
        loader.close()


def test_a_child_forked_elsewhere_does_not_keep_the_workers_channels_open():
    """A worker sees its channel end when the loader closes it, however many other
    processes were forked meanwhile (MXNet's own loader's workers, say)."""
    import multiprocessing
    import os
    import signal
    loader = DataLoader(Noisy(), batch_size=4, num_workers=1)
    (worker,) = [child for child in multiprocessing.active_children()
                 if child.pid in loader.worker_pids]
    read_end, write_end = os.pipe()
    other = os.fork()
    if other == 0:  # holds whatever it inherited until told to go
        os.read(read_end, 1)
        os._exit(0)
    try:
        loader.close()
        assert worker.exitcode == 0  # left on its own: not killed after the grace period
    finally:
        os.write(write_end, b'x')
        os.waitpid(other, 0)
        os.close(read_end)
        os.close(write_end)


def test_gluoncvs_loaders_pass_max_restarts_on():
    import warnings
    from gluonbatch.dataloader import RandomTransformDataLoader
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DetectionDataLoader is deprecated, as in gluoncv
        with pytest.raises(ValueError, match='max_restarts'):
            DetectionDataLoader(Noisy(), batch_size=2, max_restarts=-1)
    with pytest.raises(ValueError, match='max_restarts'):
        RandomTransformDataLoader([lambda x: x], Noisy(), batch_size=2, max_restarts=-1)
