"""The worker pool of DetectionDataLoader and RandomTransformDataLoader
(gluonbatch.dataloader.pool), exercised through those public loaders."""
import copyreg
import errno
import gc
import multiprocessing
import os
import re
import signal
import threading
import time
import traceback
import warnings

import mxnet as mx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch.batchify import Stack
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader
from gluonbatch.memory import use_recycling
from helpers import examples, replacement_warnings, settled, shm_bytes
from tiers import each_value


class Filled(mx.gluon.data.Dataset):
    """Sample i: a 2-vector filled with ``offset + i``; holds a lock, which cannot be pickled."""

    def __init__(self, offset, length=7):
        self.offset, self.length = offset, length
        self.lock = threading.Lock()

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        with self.lock:
            return np.full(2, self.offset + idx, 'float32')


def detection_loader(dataset, batchify_fn=Stack(), **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UserWarning)  # deprecated, still supported
        return DetectionDataLoader(dataset, batchify_fn=batchify_fn, **kwargs)


def firsts(batches):
    return [batch.asnumpy()[:, 0].tolist() for batch in batches]


@pytest.mark.parametrize('num_workers', [1, 2])
def test_two_pools_at_once_keep_their_own_datasets(num_workers):
    # Each pool's workers hold their own loader's dataset and transform, even while the
    # other loader's workers run.
    tens = detection_loader(Filled(10), batch_size=3, num_workers=num_workers)
    hundreds = RandomTransformDataLoader([lambda x: -x], Filled(100), batch_size=2,
                                         num_workers=num_workers, last_batch='discard')
    pairs = list(zip(tens, hundreds))
    assert firsts(a for a, _ in pairs) == [[10, 11, 12], [13, 14, 15], [16]]
    assert firsts(b for _, b in pairs) == [[-100, -101], [-102, -103], [-104, -105]]


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_unpicklable_dataset_and_batchify_function(num_workers):
    # Nothing is pickled on the way to the workers: they inherit it.
    stack = Stack()
    loader = detection_loader(Filled(0, 5), lambda samples: stack(samples) * 2, batch_size=2,
                              num_workers=num_workers)
    assert firsts(loader) == [[0, 2], [4, 6], [8]]
    assert firsts(loader) == [[0, 2], [4, 6], [8]]  # a second pass reuses the pool


# --------------------------------------------------------------------------- errors

class LabelError(Exception):
    """A custom exception type with an attribute besides its arguments."""

    def __init__(self, message, index):
        super().__init__(message, index)
        self.index = index


class LockedError(Exception):
    """Holds a lock: cannot be pickled."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


class RenamedArgsError(Exception):
    """Pickles, but cannot be rebuilt: its constructor wants two arguments, args has one."""

    def __init__(self, message, extra):
        super().__init__('%s (%s)' % (message, extra))


# What sample i raises, by kind; each call makes an equal, fresh exception.
ERRORS = [
    lambda idx: KeyError('missing-key-%d' % idx),
    lambda idx: FileNotFoundError(errno.ENOENT, 'No such file or directory',
                                  '/data/image-%d.jpg' % idx),
    lambda idx: LabelError('label of sample %d is negative' % idx, idx),
    lambda idx: ValueError('bad sample %d' % idx),
]
def rebuild_renamed(message):
    """What a copyreg reducer would rebuild a RenamedArgsError with."""
    return RenamedArgsError(message, 'x')


UNPICKLABLE = [lambda idx: LockedError('locked at %d' % idx),
               lambda idx: RenamedArgsError('renamed at %d' % idx, 'x')]
KINDS = ERRORS + UNPICKLABLE


class Failing(mx.gluon.data.Dataset):
    """Sample ``fail_at`` raises ``KINDS[kind](fail_at)``; both are shared with forked workers."""

    def __init__(self, length=10):
        self.length = length
        self.fail_at = multiprocessing.Value('i', -1)
        self.kind = multiprocessing.Value('i', 0)

    def __len__(self):
        return self.length

    def error_for(self, idx):
        return KINDS[self.kind.value](idx)

    def __getitem__(self, idx):
        if idx == self.fail_at.value:
            raise self.error_for(idx)  # the line the tracebacks must show
        return np.full(2, idx, 'float32')


RAISING_LINE = 'raise self.error_for(idx)'
BATCH = 3
@pytest.fixture(scope='module')
def loaders():
    """Per worker count, one (dataset, loader) for the module: starting pools is slow."""
    made = {}
    yield made
    made.clear()  # the loaders' pools stop with them
    gc.collect()


def first_error(loaders, num_workers, kind, fail_at):
    """The error iterating the loader raises, and how many batches arrived before it."""
    if num_workers not in loaders:
        dataset = Failing()
        loaders[num_workers] = dataset, detection_loader(dataset, batch_size=BATCH,
                                                         num_workers=num_workers)
    dataset, loader = loaders[num_workers]
    dataset.kind.value, dataset.fail_at.value = kind, fail_at
    arrived = 0
    try:
        for _ in loader:
            arrived += 1
    except Exception as error:  # noqa: the test inspects whatever arrives
        return error, arrived
    finally:
        dataset.fail_at.value = -1
    raise AssertionError('no error was raised')


def batch_indices(fail_at, length=10):
    start = fail_at // BATCH * BATCH
    return list(range(start, min(start + BATCH, length)))


def check_notes(error, fail_at, num_workers):
    notes = error.__notes__
    assert notes[0] == 'raised while loading dataset samples %s' % batch_indices(fail_at)
    printed = ''.join(traceback.format_exception(error))
    assert notes[0] in printed  # Python prints the notes with the traceback
    if num_workers == 0:
        assert len(notes) == 1
        assert RAISING_LINE in printed  # the real traceback, in this process
        return
    assert len(notes) == 2
    header, *lines = notes[1].splitlines()
    pid = int(re.fullmatch(r'in DataLoader worker process (\d+):', header).group(1))
    assert pid != os.getpid()
    assert lines[0] == 'Traceback (most recent call last):'
    assert any('in __getitem__' in line for line in lines)
    assert RAISING_LINE in notes[1]


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@settings(max_examples=examples(12), deadline=None)
@given(kind=st.integers(0, len(ERRORS) - 1), fail_at=st.integers(0, 9))
def test_errors_arrive_unchanged_with_notes(loaders, num_workers, kind, fail_at):
    error, arrived = first_error(loaders, num_workers, kind, fail_at)
    expected = ERRORS[kind](fail_at)
    assert type(error) is type(expected)
    assert error.args == expected.args and str(error) == str(expected)
    assert vars(error).keys() - {'__notes__'} == vars(expected).keys()
    for name, value in vars(expected).items():  # LabelError.index
        assert getattr(error, name) == value
    if isinstance(expected, OSError):
        assert (error.errno, error.strerror, error.filename) == (
            errno.ENOENT, 'No such file or directory', '/data/image-%d.jpg' % fail_at)
    assert arrived == fail_at // BATCH  # the batches before the failing one arrived
    check_notes(error, fail_at, num_workers)


def test_what_travels_does_not_depend_on_copyreg(monkeypatch):
    """A library may register a reducer for every exception type (``distributed`` does,
    through ``tblib``); the workers' errors travel, or not, as without it."""
    monkeypatch.setitem(copyreg.dispatch_table, RenamedArgsError,
                        lambda error: (rebuild_renamed, ('renamed at 7',)))
    for num_workers in (1, 2):  # new loaders: their workers inherit the reducer
        dataset = Failing()
        fresh = {num_workers: (dataset, detection_loader(dataset, batch_size=BATCH,
                                                         num_workers=num_workers))}
        error, _ = first_error(fresh, num_workers, len(ERRORS) + 1, 7)
        assert type(error) is RuntimeError and 'RenamedArgsError' in str(error)


def test_key_error_message_is_not_requoted(loaders):
    error, _ = first_error(loaders, 2, 0, 4)
    assert repr(error) == "KeyError('missing-key-4')" and str(error) == "'missing-key-4'"


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('kind', range(len(UNPICKLABLE)))
def test_exceptions_that_cannot_travel_still_name_type_and_message(loaders, num_workers, kind):
    expected = UNPICKLABLE[kind](7)
    error, _ = first_error(loaders, num_workers, len(ERRORS) + kind, 7)
    if num_workers == 0:  # nothing to send: the exception itself
        assert type(error) is type(expected) and error.args == expected.args
    else:
        assert type(error) is RuntimeError
        message = str(error)
        assert '%s: %s' % (type(expected).__qualname__, expected) in message, message
    check_notes(error, 7, num_workers)


@pytest.mark.parametrize('num_workers', [0, 2])
def test_an_exception_raised_again_gets_one_note(num_workers):
    # A dataset that raises one stored exception object every time: the notes do not pile up.
    stored = KeyError('always the same')

    class Raising(Filled):
        def __getitem__(self, idx):
            raise stored

    loader = detection_loader(Raising(0, 3), batch_size=3, num_workers=num_workers)
    for _ in range(3):
        with pytest.raises(KeyError) as info:
            list(loader)
        assert [note for note in info.value.__notes__ if 'dataset samples' in note] == [
            'raised while loading dataset samples [0, 1, 2]']


# --------------------------------------------------------------------------- arguments

NON_INTEGERS = st.one_of(st.booleans(), st.floats(), st.text(max_size=3),
                         st.sampled_from(['2', 2.0, b'1', [1]]))


def make_loader(which, **kwargs):
    if which == 'detection':
        return detection_loader(Filled(0, 4), batch_size=2, **kwargs)
    return RandomTransformDataLoader([lambda x: x], Filled(0, 4), batch_size=2, **kwargs)


# These were clamped (negative num_workers to 0, prefetch and interval up to 1) or
# converted with int() before; now they are errors.
@settings(max_examples=examples(30), deadline=None)
@given(which=st.sampled_from(['detection', 'random']), value=NON_INTEGERS)
def test_non_integer_num_workers_is_a_type_error(which, value):
    with pytest.raises(TypeError, match='num_workers must be an integer'):
        make_loader(which, num_workers=value)


@settings(max_examples=examples(30), deadline=None)
@given(which=st.sampled_from(['detection', 'random']), value=st.integers(max_value=-1))
def test_negative_num_workers_is_a_value_error(which, value):
    with pytest.raises(ValueError, match='num_workers must be an integer >= 0'):
        make_loader(which, num_workers=value)


@settings(max_examples=examples(30), deadline=None)
@given(name=st.sampled_from(['prefetch', 'interval']), value=NON_INTEGERS)
def test_non_integer_prefetch_or_interval_is_a_type_error(name, value):
    with pytest.raises(TypeError, match='%s must be an integer' % name):
        make_loader('random', **{name: value})


@settings(max_examples=examples(30), deadline=None)
@given(name=st.sampled_from(['prefetch', 'interval']), value=st.integers(max_value=0))
def test_prefetch_or_interval_below_one_is_a_value_error(name, value):
    with pytest.raises(ValueError, match='%s must be an integer >= 1' % name):
        make_loader('random', **{name: value})


def test_interval_none_is_a_type_error():
    with pytest.raises(TypeError, match='interval'):
        make_loader('random', interval=None)


@pytest.mark.parametrize('kwargs', [dict(num_workers=np.int64(1), prefetch=np.int32(1)),
                                    dict(num_workers=0, prefetch=None, interval=np.int8(2)),
                                    dict(num_workers=2, prefetch=1, interval=3)])
def test_valid_numbers_of_any_integer_type(kwargs):
    assert firsts(make_loader('random', **kwargs)) == [[0, 1], [2, 3]]


Labelled = __import__('collections').namedtuple('Labelled', ['image', 'labels'])


class LabelledSamples(mx.gluon.data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, idx):
        return Labelled(np.full((2, 2), idx, 'float32'), np.arange(idx % 3 + 1, dtype='float32'))


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_pinned_batches_keep_every_container_type(num_workers):
    from gluonbatch.batchify import Dict, List, NamedTuple, Pad, Tuple
    batchify = Tuple(NamedTuple(Labelled, [Stack(), Pad(pad_val=-1)]),
                     Dict({'labels': Pad()}), List())
    loader = RandomTransformDataLoader(
        [lambda image, labels: (Labelled(image, labels), {'labels': labels}, 'name')],
        LabelledSamples(),
        batch_size=3, pin_memory=True, num_workers=num_workers, batchify_fn=batchify)
    batches = list(loader)
    assert len(batches) == 2
    for number, (record, mapping, names) in enumerate(batches):
        assert type(record) is Labelled and isinstance(mapping, dict)
        assert names == ['name'] * 3
        for array in (record.image, record.labels, mapping['labels']):
            assert array.context == mx.context.cpu_pinned(0)
        first = 3 * number
        np.testing.assert_array_equal(record.image.asnumpy()[:, 0, 0], [first, first + 1,
                                                                        first + 2])


# --------------------------------------------------------------------------- dead workers

LOADERS = ['detection', 'random']


def pooled(which, dataset, **kwargs):
    """One of the two pooled loaders over ``dataset``; the random one's transform keeps
    samples as they are."""
    if which == 'detection':
        return detection_loader(dataset, **kwargs)
    return RandomTransformDataLoader([lambda x: x], dataset, batchify_fn=Stack(), **kwargs)


def in_worker(dataset):
    return os.getpid() != dataset.main


def wait_until(condition, what):
    """Wait for ``condition()``; a guard fails the test if it never holds."""
    for _ in range(6000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError('waited in vain for ' + what)


def gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class Killing(mx.gluon.data.Dataset):
    """Sample ``kill_at`` kills the worker process loading it (once), after noting its pid
    in ``killed``; otherwise sample i is a 2-vector filled with i."""

    def __init__(self, kill_at, length=10):
        self.main, self.length = os.getpid(), length
        self.kill_at = multiprocessing.Value('q', kill_at, lock=False)
        self.killed = multiprocessing.Value('q', 0, lock=False)

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        if idx == self.kill_at.value and in_worker(self):
            self.kill_at.value = -1
            self.killed.value = os.getpid()
            os.kill(os.getpid(), signal.SIGKILL)
        return np.full(2, idx, 'float32')


ALL_OF_TEN = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_worker_dying_while_loading_is_replaced_and_its_batch_loaded_again(which,
                                                                             num_workers):
    dataset = Killing(kill_at=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = pooled(which, dataset, batch_size=3, num_workers=num_workers, timeout=30)
        assert firsts(loader) == ALL_OF_TEN
    pid = dataset.killed.value
    assert pid > 0 and gone(pid)
    (said,) = replacement_warnings(caught)
    assert said.startswith('DataLoader worker process %d killed by signal 9 (SIGKILL) while '
                           'loading dataset samples [0, 1, 2]' % pid)
    assert firsts(loader) == ALL_OF_TEN


class DiesAfterSending(mx.gluon.data.Dataset):
    """Batches of two samples (i filled with i). The first worker process to start its
    second batch after batch 0 waits for ``go``, notes its pid in ``dead``, the batch it
    sent before in ``sent`` and the one it started in ``dying``, and kills itself."""

    def __init__(self, length=20):
        self.main, self.length = os.getpid(), length
        self.go = multiprocessing.Value('q', 0, lock=False)
        self.sent = multiprocessing.Value('q', -1, lock=False)
        self.dying = multiprocessing.Value('q', -1, lock=False)
        self.dead = multiprocessing.Value('q', 0)  # its lock picks the one worker to die
        self.loaded = []  # in each worker: the batches after batch 0 it loaded

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        batch = idx // 2
        if in_worker(self) and idx % 2 == 0 and batch > 0:
            if self.loaded and self._chosen():
                wait_until(lambda: self.go.value, 'the main process to receive batch 0')
                self.sent.value = self.loaded[0]
                self.dying.value = batch
                self.dead.value = os.getpid()
                os.kill(os.getpid(), signal.SIGKILL)
            self.loaded.append(batch)
        return np.full(2, idx, 'float32')

    def _chosen(self):
        with self.dead.get_lock():
            if self.dead.value:
                return False
            self.dead.value = -1
            return True


@pytest.mark.parametrize('which', LOADERS)
@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_batch_sent_by_a_worker_that_died_is_received_all_the_same(which, num_workers):
    dataset = DiesAfterSending()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = pooled(which, dataset, batch_size=2, num_workers=num_workers, timeout=30)
        batches = iter(loader)
        assert firsts([next(batches)]) == [[0, 1]]
        dataset.go.value = 1
        # (dead until reaped: the loader reaps it when it next waits for a batch)
        wait_until(lambda: dataset.dead.value > 0, 'the worker to kill itself')
        # Its descriptors travelled inside the message: the batch it sent arrives.
        assert firsts(batches) == [[i, i + 1] for i in range(2, 20, 2)]
    pid, sent, dying = dataset.dead.value, dataset.sent.value, dataset.dying.value
    assert gone(pid)
    (said,) = replacement_warnings(caught)
    assert 'process %d' % pid in said and str([2 * dying, 2 * dying + 1]) in said
    assert str([2 * sent, 2 * sent + 1]) not in said  # received, not loaded again
    assert firsts(loader) == [[i, i + 1] for i in range(0, 20, 2)]


class Stuck(Filled):
    """Sample 0 blocks the worker loading it, noting its pid in ``stuck``, until
    ``release`` is set."""

    def __init__(self, length=5):
        super().__init__(0, length)
        self.main = os.getpid()
        self.stuck = multiprocessing.Value('q', 0, lock=False)
        self.release = multiprocessing.Value('q', 0, lock=False)

    def __getitem__(self, idx):
        if idx == 0 and in_worker(self) and not self.release.value:
            self.stuck.value = os.getpid()
            wait_until(lambda: self.release.value, 'the test to release the worker')
        return super().__getitem__(idx)


@pytest.mark.parametrize('num_workers', [1, 2])
def test_a_batch_that_stalls_every_worker_is_a_poison_batch(num_workers):
    dataset = Stuck()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        loader = pooled('detection', dataset, batch_size=2, num_workers=num_workers,
                        timeout=1)
        with pytest.raises(RuntimeError) as info:
            list(loader)
    message = str(info.value)
    assert message.startswith('dataset samples [0, 1] are a poison batch'), message
    assert message.count('stopped answering for 1 s') == 2
    # those loading the poison batch: another test process may starve a healthy worker
    assert len([said for said in replacement_warnings(caught) if '[0, 1]' in said]) == 2
    dataset.release.value = 1
    # The loader goes on: the next pass delivers every batch.
    assert firsts(loader) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize('value', ['3', True, [1], 1j])
def test_non_number_timeout_is_a_type_error(value):
    with pytest.raises(TypeError, match='timeout must be a number of seconds'):
        make_loader('random', timeout=value)
    with pytest.raises(TypeError, match='timeout must be a number of seconds'):
        make_loader('detection', timeout=value)


@pytest.mark.parametrize('value', [0, -1, -0.5, float('nan')])
def test_timeout_not_above_zero_is_a_value_error(value):
    with pytest.raises(ValueError, match='timeout must be a number of seconds > 0'):
        make_loader('random', timeout=value)


@pytest.mark.parametrize('value', [np.int64(5), np.float32(0.5), 7, 2.5, float('inf'), None])
def test_timeout_of_any_real_number_type(value):
    assert firsts(make_loader('detection', num_workers=1, timeout=value)) == [[0, 1], [2, 3]]


# --------------------------------------------------------------------------- early breaks

SAMPLE_FLOATS = 1 << 19  # 2 MiB of float32 per sample
BATCH_BYTES = 2 * 4 * SAMPLE_FLOATS  # batches of two samples


class Large(mx.gluon.data.Dataset):
    """Sample i: 2 MiB of float32 filled with i."""

    def __len__(self):
        return 24

    def __getitem__(self, idx):
        return np.full(SAMPLE_FLOATS, idx, 'float32')


def held_after_breaks(loader, workers, counts):
    """``/dev/shm`` bytes this process and ``workers`` hold beyond what they held at first,
    after each number of passes in ``counts`` broken off after their first batch."""
    pids = [os.getpid()] + workers
    baseline = settled(lambda: shm_bytes(pids))
    held, breaks = [], 0
    for count in counts:
        while breaks < count:
            for batch in loader:
                assert batch.asnumpy()[:, :2].tolist() == [[0, 0], [1, 1]]
                break
            del batch
            breaks += 1
        held.append(settled(lambda: shm_bytes(pids)) - baseline)
    return held


def new_loader(which, num_workers):
    """A pooled loader of ``Large`` batches, and the pids of its worker processes."""
    children = set(multiprocessing.active_children())
    loader = pooled(which, Large(), batch_size=2, num_workers=num_workers)
    workers = [child.pid for child in multiprocessing.active_children()
               if child not in children]
    assert len(workers) == num_workers
    return loader, workers


@pytest.mark.parametrize(*each_value(which=LOADERS, num_workers=[1, 2]))
def test_breaking_off_passes_frees_their_batches(which, num_workers):
    # Recycling off: every batch has a segment of its own, so what is held is what is in
    # flight, and none is kept for reuse.
    with use_recycling(False):
        loader, workers = new_loader(which, num_workers)
    held = held_after_breaks(loader, workers, [5, 40])
    prefetch = 2 * num_workers  # the default
    # At most the batches in flight when the last pass broke off, however many broke off.
    assert all(bytes_ <= prefetch * BATCH_BYTES + (1 << 20) for bytes_ in held), held


@pytest.mark.parametrize('num_workers', [1, 2])
def test_breaking_off_passes_frees_their_batches_with_recycling(num_workers):
    # Workers keep the segments of their busiest moment for reuse; the docs' shared-memory
    # page sizes that at (2 prefetch + 3 num_workers) batches, each at most 1/8 larger.
    # Before, every break kept prefetch more batches busy for good.
    loader, workers = new_loader('detection', num_workers)
    held = held_after_breaks(loader, workers, [5, 40])
    prefetch = 2 * num_workers
    bound = (2 * prefetch + 3 * num_workers) * BATCH_BYTES * 9 // 8
    assert all(bytes_ <= bound for bytes_ in held), held


@pytest.mark.parametrize('num_workers', [1, 2])
def test_errors_of_batches_left_behind_are_not_raised_later(num_workers):
    dataset = Failing()
    dataset.fail_at.value = 7  # batch 2, in flight when the first pass breaks off
    loader = detection_loader(dataset, batch_size=BATCH, num_workers=num_workers)
    for batch in loader:
        assert firsts([batch]) == [[0, 1, 2]]
        break
    dataset.fail_at.value = -1
    assert firsts(loader) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]


@pytest.mark.parametrize(*each_value(which=LOADERS, num_workers=[0, 1, 2]))
def test_passes_after_early_breaks_deliver_every_batch(which, num_workers):
    loader = pooled(which, Filled(0, 11), batch_size=2, num_workers=num_workers)
    everything = [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10]]
    for stop in [0, 1, 3, 0, 4, 0]:
        for number, batch in enumerate(loader):
            assert firsts([batch]) == [everything[number]]
            if number == stop:
                break
        assert firsts(loader) == everything
    assert firsts(loader) == everything
