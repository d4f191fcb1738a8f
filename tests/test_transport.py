"""Multi-worker transport, proven: gluonbatch batches inside ``mx.gluon.data.DataLoader``.

Every test runs the loader the four ways MXNet can: in the main process (``num_workers=0``),
with one and two worker processes, and with a pool of two threads (``thread_pool=True``).

a. **Shared memory, no second copy.** Every batchify function is wrapped so that *inside the
   worker*, before MXNet pickles the batch, every NDArray leaf (through tuples, lists, dicts
   and namedtuples) must already be in ``cpu_shared(0)``. MXNet's pickler then sends the
   file descriptor of that very memory (``as_in_context`` of an array already in
   ``cpu_shared`` is the array itself). In the main process every NDArray leaf is checked
   again, and with worker processes its shared memory must have been created by another
   process (the worker), i.e. it arrived by file descriptor, not by a copy made here.
b. **Every sample exactly once, intact.** Sample ``i`` carries ``i`` in its values (arrays
   filled with ``i``, ``i``-dependent numbers of rows, names ``'...-i'``), so each batch
   says which samples it holds and whether their contents and padding survived. For every
   combinator, ``shuffle`` and ``last_batch``, the indices delivered per epoch are checked
   the way MXNet's own DataLoader tests do.
c. **Errors reach the main process** with their original type and message (gluonbatch's
   loaders add notes naming the dataset samples), and nothing hangs.
d. **No leaks**: 20 epochs leave /dev/shm and the open file descriptors as they were.
"""
import collections
import io
import multiprocessing
import os
import pickle
import re
import signal
import warnings
from multiprocessing.reduction import ForkingPickler

import mxnet as mx
import numpy as np
import pytest
from mxnet.gluon.data import dataloader as mx_dataloader

import gluonbatch
from gluonbatch import dataloader as gbdl
from gluonbatch.batchify import (Append, Dict, List, NamedTuple, Pad, Stack, Tuple,
                                 dict_batchify_fn, ms_batchify_fn)
from handles import left_behind, loader_handles
from helpers import SHARED, batch_leaves, mxnet_blocks, open_fds, settled
from tiers import pairwise

N = 23          # samples per epoch
BATCH = 5       # 23 = 4 * 5 + 3: a short last batch, and a rollover remainder
TIMEOUT = 30    # seconds a DataLoader waits for a worker before giving up

#: (num_workers, thread_pool): main process, 1 and 2 worker processes, 2 threads.
MODES = [(0, False), (1, False), (2, False), (2, True)]
MODE_IDS = ['main', '1proc', '2proc', '2threads']

#: A namedtuple sample and batch type; module level, so that batches holding it pickle.
Record = collections.namedtuple('Record', ['image', 'boxes'])


class Hang(Exception):
    """Raised in the main process by the watchdog when a test runs too long."""


@pytest.fixture(autouse=True)
def _watchdog():
    """Fail, rather than block the suite, if a test hangs (e.g. waits on a dead worker).

    gluonbatch's own loaders take no ``timeout``; this bounds them too. Pool workers do not
    inherit the timer.
    """
    def bark(signum, frame):
        raise Hang('the test did not finish within %d s' % (3 * TIMEOUT))

    previous = signal.signal(signal.SIGALRM, bark)
    signal.setitimer(signal.ITIMER_REAL, 3 * TIMEOUT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# --------------------------------------------------------------------------- batch walking

def check_leaves(batch):
    """Raise unless every leaf is an NDArray in cpu_shared(0) or a str (List's names).

    Returns the NDArray leaves.
    """
    arrays = []
    for path, leaf in batch_leaves(batch):
        if isinstance(leaf, mx.nd.NDArray):
            if leaf.context != SHARED:
                raise AssertionError('%s is an NDArray in %s, not in cpu_shared(0)'
                                     % (path, leaf.context))
            arrays.append(leaf)
        elif not isinstance(leaf, str):
            raise AssertionError('%s is a %s: batches hold NDArrays (and names) only'
                                 % (path, type(leaf).__name__))
    return arrays


class CheckedInWorker:
    """A batchify function that, where it runs (the worker), checks its batch's leaves.

    MXNet pickles it with every batch it sends a worker, so it is a module-level class.
    """

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, data):
        batch = self.fn(data)
        check_leaves(batch)
        return batch


def check_delivered(batch, num_workers, thread_pool):
    """Main-process half of (a): leaves in cpu_shared, mapped from a worker's memory."""
    arrays = check_leaves(batch)
    if num_workers and not thread_pool:
        for array in arrays:
            # The shared-memory block of a received NDArray records the process that
            # created it: a worker, so the batch was mapped here by file descriptor.
            creator = array._to_shared_mem()[0]
            assert creator != os.getpid(), 'batch memory was created in the main process'
    return arrays


# --------------------------------------------------------------------------- the combinators
#
# Each case: make(i) builds sample i, ``batchify`` batches samples, read(batch) returns the
# sample indices of a batch in order, raising AssertionError if any content, padding,
# length, dtype or container type is not what the samples hold.

def _ids_of(array):
    """Indices from an (B, ...) array whose row b is filled with sample b's index."""
    array = np.asarray(array)
    ids = array.reshape(len(array), -1)[:, 0]
    assert (array == ids.reshape((-1,) + (1,) * (array.ndim - 1))).all(), array
    return ids.astype(int).tolist()


def _check_padded(padded, ids, lengths_of, pad_val=-1):
    """Rows of ``padded`` (B, L, ...) hold sample i's index for lengths_of(i) rows, then pad."""
    padded = padded.asnumpy()
    assert len(padded) == len(ids)
    assert padded.shape[1] == max(lengths_of(i) for i in ids), padded.shape
    for row, idx in zip(padded, ids):
        length = lengths_of(idx)
        assert (row[:length] == idx).all() and (row[length:] == pad_val).all(), (idx, row)


def _check_lengths(lengths, expected):
    assert lengths.dtype == np.int32, lengths.dtype
    np.testing.assert_array_equal(lengths.asnumpy(), expected)


def rows(i):
    """Rows of the box labels of sample i: 1..3, but none for samples 0 and 12.

    Two samples without objects cannot make up a batch (the smallest has 3 samples): a
    batch in which no sample has a row is padded to a zero-size array, which does not cross
    to the main process (see test_a_batch_without_any_label_row_crosses_to_the_main_process).
    """
    return 0 if i % 12 == 0 else i % 3 + 1


def read_stack(batch):
    assert batch.dtype == np.float32 and batch.shape[1:] == (2, 3)
    return _ids_of(batch.asnumpy())


def read_stack_ndarray(batch):
    assert batch.dtype == np.int32, batch.dtype  # NDArray samples keep their dtype
    return _ids_of(batch.asnumpy())


def read_pad_ret_length(batch):
    padded, lengths = batch
    ids = _ids_of(padded.asnumpy()[:, 0])  # every sample has at least one row
    _check_padded(padded, ids, lambda i: i % 4 + 1)
    _check_lengths(lengths, [i % 4 + 1 for i in ids])
    return ids


def read_pad_slices(batch):
    slices, lengths = batch
    assert isinstance(slices, list) and isinstance(lengths, list)
    sizes = [len(piece) for piece in slices]
    assert sizes == [len(part) for part in np.array_split(np.arange(sum(sizes)), 2)], sizes
    ids = []
    for piece, piece_lengths in zip(slices, lengths):
        assert piece.dtype == np.int64, piece.dtype  # lists of Python ints
        piece_ids = _ids_of(piece.asnumpy()[:, :1])
        _check_padded(piece, piece_ids, lambda i: i % 3 + 1)  # each slice to its own max
        _check_lengths(piece_lengths, [i % 3 + 1 for i in piece_ids])
        ids += piece_ids
    return ids


def read_pad_axes(batch):
    padded, lengths = batch
    padded = padded.asnumpy()
    ids = _ids_of(padded[:, :, :1, :1])
    heights, widths = [i % 3 + 1 for i in ids], [i % 2 + 1 for i in ids]
    assert padded.shape == (len(ids), 2, max(heights), max(widths)), padded.shape
    for image, idx, height, width in zip(padded, ids, heights, widths):
        assert (image[:, :height, :width] == idx).all()
        assert (image[:, height:] == -1).all() and (image[:, :, width:] == -1).all()
    _check_lengths(lengths, [[h, w] for h, w in zip(heights, widths)])
    return ids


def read_append(batch):
    assert isinstance(batch, list)
    ids = []
    for array in batch:
        array = array.asnumpy()
        idx = int(array[0, 0])
        assert array.shape == (1, idx % 3 + 1) and (array == idx).all(), array
        ids.append(idx)
    return ids


def read_tuple(batch):
    assert isinstance(batch, tuple) and len(batch) == 2
    labels, boxes = batch
    assert labels.dtype == np.int32
    ids = _ids_of(labels.asnumpy())
    _check_padded(boxes, ids, rows)
    return ids


def read_list(batch):
    assert isinstance(batch, list) and all(isinstance(name, str) for name in batch), batch
    ids = [int(name.split('-')[1]) for name in batch]
    assert batch == ['sample-%d' % i for i in ids]
    return ids


def read_dict(batch):
    assert type(batch) is dict and set(batch) == {'image', 'boxes', 'name'}, batch
    ids = _ids_of(batch['image'].asnumpy())
    padded, lengths = batch['boxes']
    _check_padded(padded, ids, rows)
    _check_lengths(lengths, [rows(i) for i in ids])
    assert batch['name'] == ['sample-%d' % i for i in ids]
    return ids


def read_namedtuple(batch):
    assert type(batch) is Record, type(batch)
    ids = _ids_of(batch.image.asnumpy())
    _check_padded(batch.boxes, ids, rows)
    return ids


def read_collate(batch):
    assert type(batch) is dict
    assert set(batch) == {'image', 'label', 'score', 'flag', 'name', 'pair'}
    ids = batch['label'].asnumpy().tolist()
    assert batch['label'].dtype == np.int64 and batch['score'].dtype == np.float64
    assert batch['image'].dtype == np.uint8 and batch['flag'].dtype == np.bool_
    assert _ids_of(batch['image'].asnumpy()) == ids
    np.testing.assert_array_equal(batch['score'].asnumpy(), np.array(ids) + 0.5)
    np.testing.assert_array_equal(batch['flag'].asnumpy(), np.array(ids) % 2 == 0)
    assert batch['name'] == ['n%d' % i for i in ids]
    pair = batch['pair']
    assert type(pair) is Record and type(pair.boxes) is tuple and type(pair.boxes[1]) is list
    assert pair.image.dtype == np.int32 and _ids_of(pair.image.asnumpy()) == ids
    assert pair.boxes[0].asnumpy().tolist() == ids
    assert [field.asnumpy().tolist() for field in pair.boxes[1]] == [ids, [2 * i for i in ids]]
    return ids


def read_default_pad(batch):
    assert isinstance(batch, list) and len(batch) == 2
    images, boxes = batch
    assert images.dtype == np.float32 and images.shape[1:] == (3, 4, 4)
    ids = _ids_of(images.asnumpy())
    boxes = boxes.asnumpy()
    # padded to the most rows, and to one row of -1 when no sample has any
    assert boxes.shape == (len(ids), max(1, max(rows(i) for i in ids)), 6), boxes.shape
    for row, idx in zip(boxes, ids):
        assert (row[:rows(idx)] == idx).all() and (row[rows(idx):] == -1).all()
    return ids


def read_default(batch):
    assert isinstance(batch, list) and len(batch) == 2
    values, labels = batch
    ids = labels.asnumpy().tolist()
    assert labels.dtype == np.int64 and values.dtype == np.float32
    assert _ids_of(values.asnumpy()) == ids
    return ids


def read_tsn(batch):
    assert isinstance(batch, list) and len(batch) == 2
    clips, labels = batch
    ids = labels.asnumpy().tolist()
    expected = np.concatenate([np.full((i % 2 + 1, 2), i, np.float32) for i in ids])
    np.testing.assert_array_equal(clips.asnumpy(), expected)
    return ids


def read_ms(batch):
    assert isinstance(batch, list) and len(batch) == 2
    images, names = batch
    ids = [int(name.split('-')[1]) for name in names]
    assert names == ['ms-%d' % i for i in ids]
    assert [image.shape for image in images] == [(1, i % 3 + 1) for i in ids]
    assert all((image.asnumpy() == i).all() for image, i in zip(images, ids))
    return ids


def read_dict_fn(batch):
    assert type(batch) is dict and set(batch) == {'depth', 'meta'}
    ids = _ids_of(batch['depth'].asnumpy())
    assert type(batch['meta']) is dict
    assert batch['meta']['k'].shape == (len(ids), 1)
    assert batch['meta']['k'].asnumpy()[:, 0].tolist() == ids
    return ids


def _boxes(i):
    return np.full((rows(i), 6), i, np.float32)


#: name -> (make(i), batchify function, read(batch)); every combinator, each at the top level.
CASES = {
    'Stack': (lambda i: np.full((2, 3), i, np.float32), Stack(), read_stack),
    'Stack-ndarray': (lambda i: mx.nd.full((2, 2), i, dtype='int32'), Stack(),
                      read_stack_ndarray),
    'Pad-ret_length': (lambda i: np.full((i % 4 + 1, 2), i, np.float32),
                       Pad(pad_val=-1, ret_length=True), read_pad_ret_length),
    'Pad-num_shards': (lambda i: [i] * (i % 3 + 1),
                       Pad(pad_val=-1, num_shards=2, ret_length=True), read_pad_slices),
    'Pad-axes': (lambda i: np.full((2, i % 3 + 1, i % 2 + 1), i, np.float32),
                 Pad(axis=(1, 2), pad_val=-1, ret_length=True), read_pad_axes),
    'Append': (lambda i: np.full((i % 3 + 1,), i, np.float32), Append(), read_append),
    'Tuple': (lambda i: (i, _boxes(i)), Tuple(Stack(dtype='int32'), Pad(pad_val=-1)),
              read_tuple),
    'List': (lambda i: 'sample-%d' % i, List(), read_list),
    'Dict': (lambda i: {'image': np.full((2,), i, np.float32), 'boxes': _boxes(i),
                        'name': 'sample-%d' % i},
             Dict({'image': Stack(), 'boxes': Pad(pad_val=-1, ret_length=True),
                   'name': List()}), read_dict),
    'NamedTuple': (lambda i: Record(np.full((2, 2), i, np.float32), _boxes(i)),
                   NamedTuple(Record, {'image': Stack(), 'boxes': Pad(pad_val=-1)}),
                   read_namedtuple),
    'default_collate': (lambda i: {'image': np.full((2, 2), i, np.uint8), 'label': i,
                                   'score': i + 0.5, 'flag': i % 2 == 0, 'name': 'n%d' % i,
                                   'pair': Record(np.full((3,), i, np.int32), (i, [i, 2 * i]))},
                        gluonbatch.default_collate, read_collate),
    'default_pad_batchify_fn': (lambda i: (mx.nd.full((3, 4, 4), i), _boxes(i)),
                                gbdl.default_pad_batchify_fn, read_default_pad),
    'default_batchify_fn': (lambda i: (np.full((2,), i, np.float32), i),
                            gbdl.default_batchify_fn, read_default),
    'tsn_mp_batchify_fn': (lambda i: (mx.nd.full((i % 2 + 1, 2), i), i),
                           gbdl.tsn_mp_batchify_fn, read_tsn),
    'ms_batchify_fn': (lambda i: (mx.nd.full((1, i % 3 + 1), i), 'ms-%d' % i),
                       ms_batchify_fn, read_ms),
    'dict_batchify_fn': (lambda i: {'depth': mx.nd.full((2, 2), i),
                                    'meta': {'k': mx.nd.array([i])}},
                         dict_batchify_fn, read_dict_fn),
}


class Samples(mx.gluon.data.Dataset):
    """Sample i is make(i). Worker processes inherit it when MXNet forks them."""

    def __init__(self, make, length=N):
        self._make = make
        self._length = length

    def __len__(self):
        return self._length

    def __getitem__(self, idx):
        return self._make(idx)


def make_loader(case, num_workers, thread_pool, **kwargs):
    make, batchify, _ = CASES[case]
    return mx.gluon.data.DataLoader(Samples(make), batch_size=BATCH,
                                    batchify_fn=CheckedInWorker(batchify),
                                    num_workers=num_workers, thread_pool=thread_pool,
                                    timeout=TIMEOUT, **kwargs)


def epoch(loader, case, num_workers, thread_pool):
    """The sample indices of every batch of one pass over ``loader``, checked as in (a)."""
    read = CASES[case][2]
    batches = []
    for batch in loader:
        check_delivered(batch, num_workers, thread_pool)
        batches.append(read(batch))
        del batch
    return batches


def flat(batches):
    return [idx for batch in batches for idx in batch]


# --------------------------------------------------------------------------- a. shared memory

def test_every_case_has_ndarrays_and_structure():
    """The cases exercise what they claim: each batch has the expected leaves."""
    for case, (make, batchify, read) in CASES.items():
        batch = batchify([make(i) for i in (3, 4, 5)])
        arrays = check_leaves(batch)
        assert case == 'List' or arrays, case
        assert read(batch) == [3, 4, 5], case


def test_a_cpu_shared_batch_is_sent_as_itself():
    """The premise of (a): MXNet's pickler for NDArrays (``reduce_ndarray``) first calls
    ``as_in_context(cpu_shared(0))``, which returns an array already there unchanged, so the
    worker sends the descriptor of the batchify output itself; any other array is copied."""
    batch = Stack()([np.ones(2), np.zeros(2)])
    assert batch.as_in_context(SHARED) is batch
    plain = mx.nd.ones(2)
    assert plain.as_in_context(SHARED) is not plain


def test_checked_in_worker_catches_a_non_shared_leaf():
    """The wrapper of (a) fails for a batch with one NDArray in plain cpu memory."""
    leaky = CheckedInWorker(lambda data: {'ok': Stack()(data), 'bad': [mx.nd.array(data[0])]})
    with pytest.raises(AssertionError, match=r"batch\['bad'\]\[0\] is an NDArray in cpu\(0\)"):
        leaky([np.zeros(2), np.ones(2)])


# --------------------------------------------------------------------------- b. every sample once

def _check_epochs(loader, case, shuffle, last_batch, num_workers, thread_pool):
    """Run one epoch (two for rollover) and check which samples each delivered."""
    first_len = len(loader)
    first = epoch(loader, case, num_workers, thread_pool)
    assert len(first) == first_len
    delivered = flat(first)
    in_order = list(range(N))
    if last_batch == 'keep':
        assert [len(b) for b in first] == [BATCH] * (N // BATCH) + [N % BATCH]
        assert sorted(delivered) == in_order
        if not shuffle:
            assert delivered == in_order
        return
    # discard and rollover: only full batches, no sample twice in a pass
    full = N // BATCH * BATCH
    assert [len(b) for b in first] == [BATCH] * (N // BATCH)
    assert len(set(delivered)) == len(delivered) == full
    if not shuffle:
        assert delivered == in_order[:full]
    if last_batch == 'discard':
        return

    # rollover: the samples left over from epoch 1 open epoch 2, then epoch 2's own pass
    leftover = sorted(set(range(N)) - set(delivered))
    assert len(leftover) == N % BATCH
    second_len = len(loader)
    second = epoch(loader, case, num_workers, thread_pool)
    assert len(second) == second_len == (len(leftover) + N) // BATCH
    assert all(len(b) == BATCH for b in second)
    carried, fresh = flat(second)[:len(leftover)], flat(second)[len(leftover):]
    assert sorted(carried) == leftover             # epoch 1's pass completed, once each
    assert len(set(fresh)) == len(fresh) == len(second) * BATCH - len(leftover)
    if not shuffle:
        assert carried == leftover and fresh == in_order[:len(fresh)]


@pytest.mark.parametrize(*pairwise(case=list(CASES), mode=dict(zip(MODE_IDS, MODES)),
                                    shuffle={'ordered': False, 'shuffled': True},
                                    last_batch=['keep', 'discard', 'rollover']))
def test_every_sample_arrives_once_intact_in_shared_memory(case, mode, shuffle, last_batch):
    num_workers, thread_pool = mode
    loader = make_loader(case, num_workers, thread_pool, shuffle=shuffle,
                         last_batch=last_batch)
    _check_epochs(loader, case, shuffle, last_batch, num_workers, thread_pool)



@pytest.mark.parametrize(*pairwise(loader_type=['DetectionDataLoader',
                                                'RandomTransformDataLoader'],
                                    num_workers={'main': 0, '2proc': 2},
                                    shuffle={'ordered': False, 'shuffled': True},
                                    last_batch=['keep', 'discard', 'rollover']))
def test_gluonbatch_loaders_deliver_every_sample_once(loader_type, num_workers, shuffle,
                                                      last_batch):
    """The same checks for gluonbatch's own loaders, which run their own worker pool."""
    case = 'Tuple'
    make, batchify, _ = CASES[case]
    options = dict(batch_size=BATCH, shuffle=shuffle, last_batch=last_batch,
                   batchify_fn=CheckedInWorker(batchify), num_workers=num_workers)
    if loader_type == 'DetectionDataLoader':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')  # it is deprecated, as in gluoncv
            loader = gbdl.DetectionDataLoader(Samples(make), **options)
    else:
        # transforms are applied per batch in the worker: here, the identity twice
        loader = gbdl.RandomTransformDataLoader([lambda *s: s, lambda *s: s], Samples(make),
                                                **options)
    _check_epochs(loader, case, shuffle, last_batch, num_workers, False)


def _images_and_boxes(i):
    return np.full((3, 8, 8), i, np.float32), _boxes(i)


def test_a_batch_without_any_label_row_crosses_to_the_main_process():
    """A batch whose samples have no objects must reach the main process from a worker.

    Pad pads such a batch to shape (B, 0, 6) and Append gives (1, 0, 6) per sample: valid,
    zero-size cpu_shared NDArrays. MXNet's own pickler crashes on zero-size arrays (the
    worker dies with SIGSEGV in ``_to_shared_mem``; gluoncv's Pad hits it too); gluonbatch
    registers a reducer that sends them as shape and dtype. Detection datasets have images
    without objects, so such batches happen in training.
    """
    no_objects = np.zeros((0, 6), np.float32)
    empty = Samples(lambda i: (np.full((3, 8, 8), i, np.float32), no_objects, no_objects),
                    length=4)
    loader = mx.gluon.data.DataLoader(
        empty, batch_size=2, num_workers=1, timeout=5,
        batchify_fn=CheckedInWorker(Tuple(Stack(), Pad(pad_val=-1), Append())))
    batches = [(images.shape, boxes.shape, [a.shape for a in appended])
               for images, boxes, appended in loader]
    assert batches == [((2, 3, 8, 8), (2, 0, 6), [(1, 0, 6)] * 2)] * 2


def _reducer_for(array_type):
    """The reducer ``ForkingPickler`` uses now for ``array_type``."""
    return ForkingPickler(io.BytesIO()).dispatch_table[array_type]


def test_mxnets_own_reducer_can_be_restored_and_gluonbatchs_reinstalled():
    """Importing gluonbatch replaced MXNet's reducers; restoring puts MXNet's very functions
    back, reinstalling makes gluonbatch's the ones in force again (and a zero-size array
    pickles again: with MXNet's reducer it would crash this process)."""
    mxnet_reducers = {mx.nd.NDArray: mx_dataloader.reduce_ndarray,
                      mx.np.ndarray: mx_dataloader.reduce_np_ndarray}
    ours = {array_type: _reducer_for(array_type) for array_type in mxnet_reducers}
    assert all(ours[t] is not mxnet_reducers[t] for t in ours)
    try:
        gluonbatch.restore_mxnet_reducer()
        assert {t: _reducer_for(t) for t in mxnet_reducers} == mxnet_reducers
        array = mx.nd.ones((2, 3), ctx=SHARED)
        assert (pickle.loads(ForkingPickler.dumps(array)).asnumpy() == 1).all()
    finally:
        gluonbatch.install_reducer()
    assert {t: _reducer_for(t) for t in mxnet_reducers} == ours
    empty = mx.nd.empty((0, 6), ctx=SHARED)
    assert pickle.loads(ForkingPickler.dumps(empty)).shape == (0, 6)


# --------------------------------------------------------------------------- c. errors

class BadSample(Exception):
    """What a dataset transform raises for a sample it cannot read (module level: it pickles)."""


class ReadError(Exception):
    """An exception type whose constructor takes two arguments."""

    def __init__(self, path, reason):
        super().__init__('%s: %s' % (path, reason))


def decode(image, boxes):
    """A dataset transform that fails on sample 6."""
    idx = int(image[0, 0, 0])
    if idx == 6:
        raise BadSample('cannot decode sample %d' % idx)
    return image, boxes


def decode_or_read_error(image, boxes):
    idx = int(image[0, 0, 0])
    if idx == 6:
        raise ReadError('images/%06d.jpg' % idx, 'truncated file')
    return image, boxes


def ragged(i):
    """Sample 6's image is 3x4x8 instead of 3x8x8: Stack refuses it."""
    image, boxes = _images_and_boxes(i)
    return (image[:, :4] if i == 6 else image), boxes


#: (dataset of sample i, transform applied to the dataset or None, exception, message)
FAILURES = {
    'batchify': (ragged, None, ValueError, r'field 0: sample 1 has shape \(3, 4, 8\)'),
    'transform': (_images_and_boxes, decode, BadSample, r'cannot decode sample 6'),
}
#: samples 5..9 make batch 1 (counting from 0); batch 0 arrives before the failure
FAILING_BATCH = r'\[5, 6, 7, 8, 9\]'


def _drain(loader, delivered):
    for batch in loader:
        delivered.append(batch)
        del batch


@pytest.mark.parametrize('failure', list(FAILURES))
@pytest.mark.parametrize('num_workers,thread_pool', MODES, ids=MODE_IDS)
def test_a_worker_error_reaches_the_main_process(failure, num_workers, thread_pool):
    make, transform, error, message = FAILURES[failure]
    dataset = Samples(make) if transform is None else Samples(make).transform(transform)
    loader = mx.gluon.data.DataLoader(
        dataset, batch_size=BATCH, num_workers=num_workers, thread_pool=thread_pool,
        batchify_fn=CheckedInWorker(Tuple(Stack(), Pad(pad_val=-1))), timeout=TIMEOUT)
    delivered = []
    with pytest.raises(error, match=message):
        _drain(loader, delivered)
    assert len(delivered) == 1


def _gluonbatch_loader(loader_type, dataset, transform, num_workers):
    options = dict(batch_size=BATCH, num_workers=num_workers,
                   batchify_fn=Tuple(Stack(), Pad(pad_val=-1)))
    if loader_type == 'DetectionDataLoader':
        if transform is not None:
            dataset = dataset.transform(transform)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            return gbdl.DetectionDataLoader(dataset, **options)
    return gbdl.RandomTransformDataLoader([transform or (lambda *sample: sample)], dataset,
                                          **options)


def _assert_notes_name_the_failing_batch(error):
    notes = getattr(error, '__notes__', [])
    assert any(re.fullmatch('raised while loading dataset samples ' + FAILING_BATCH, note)
               for note in notes), notes


@pytest.mark.parametrize('failure', list(FAILURES))
@pytest.mark.parametrize('num_workers', [0, 2], ids=['main', '2proc'])
@pytest.mark.parametrize('loader_type', ['DetectionDataLoader', 'RandomTransformDataLoader'])
def test_gluonbatch_loader_errors_name_the_dataset_samples(loader_type, num_workers, failure):
    """The original error, its message unchanged; the indices are in a note."""
    make, transform, error, message = FAILURES[failure]
    loader = _gluonbatch_loader(loader_type, Samples(make), transform, num_workers)
    delivered = []
    with pytest.raises(error, match='^' + message) as info:
        _drain(loader, delivered)
    assert type(info.value) is error
    _assert_notes_name_the_failing_batch(info.value)
    assert len(delivered) == 1


@pytest.mark.parametrize('num_workers', [0, 2], ids=['main', '2proc'])
@pytest.mark.parametrize('loader_type', ['DetectionDataLoader', 'RandomTransformDataLoader'])
def test_gluonbatch_loader_errors_of_unusual_exception_types(loader_type, num_workers):
    """An exception type that cannot be rebuilt from its args is raised as itself in the main
    process; from a worker, which cannot send it, it arrives as a RuntimeError naming its
    type and message. Either way a note names the dataset samples."""
    loader = _gluonbatch_loader(loader_type, Samples(_images_and_boxes), decode_or_read_error,
                                num_workers)
    expected, prefix = (ReadError, '^') if num_workers == 0 else (RuntimeError, 'ReadError: ')
    with pytest.raises(expected, match=prefix + 'images/000006.jpg: truncated file') as info:
        _drain(loader, [])
    _assert_notes_name_the_failing_batch(info.value)


# --------------------------------------------------------------------------- d. no leaks

def _everything(i):
    """Sample i for ALL: one field per combinator case."""
    return tuple(make(i) for make, _, _ in CASES.values())


#: One batchify function running every combinator, each on its own field.
ALL = Tuple([batchify for _, batchify, _ in CASES.values()])


def _settled_counts(workers):
    """(our MXNet /dev/shm blocks, open fds of each worker) once frees ran.

    Only MXNet's blocks of this process and its workers count: loaders of earlier tests,
    finalised by a garbage collection in the middle of this one, remove their own
    semaphores from /dev/shm, and other programs may be using it too.
    """
    return settled(lambda: (len(mxnet_blocks([os.getpid()] + [w.pid for w in workers])),
                            [open_fds(worker.pid) for worker in workers]))


def test_mxnet_names_its_blocks_by_the_process_id_in_hex():
    # what mxnet_blocks counts by: the name MXNet gives the block it makes here (removed
    # from /dev/shm at once, it is seen through the block's descriptor)
    before = loader_handles()
    block = mx.nd.zeros((4,), ctx=mx.Context('cpu_shared', 0))
    mx.nd.waitall()
    made = [target for kind, _, target, _ in loader_handles() - before if kind == 'fd']
    assert made and all(target.startswith('/dev/shm/mx_%x_' % os.getpid())
                        for target in made), made
    del block


def test_blocks_of_other_programs_are_not_counted():
    # A block named like another process's (as another MXNet program would make) is not
    # ours. Its pid is one no process can have (above pid_max), so no other run's blocks,
    # nor this block for them, are miscounted.
    with open('/proc/sys/kernel/pid_max') as pid_max:
        other = int(pid_max.read()) + 1
    stranger = '/dev/shm/mx_%x_%x' % (other, os.getpid())
    before = len(mxnet_blocks([os.getpid()]))
    with open(stranger, 'wb'):
        try:
            assert len(mxnet_blocks([os.getpid()])) == before
            assert len(mxnet_blocks([other])) >= 1
        finally:
            os.unlink(stranger)


@pytest.mark.parametrize('loader_type,num_workers,thread_pool', [
    ('DataLoader', 0, False),
    pytest.param('DataLoader', 2, False, marks=pytest.mark.slow),
    ('DataLoader', 2, True),
    ('DetectionDataLoader', 2, False)], ids=['main', '2proc', '2threads', 'Detection-2proc'])
def test_twenty_epochs_leave_no_shared_memory_or_descriptors_behind(loader_type, num_workers,
                                                                     thread_pool):
    _settled_counts([])  # finalise what earlier tests left, before anything is counted
    before = set(multiprocessing.active_children())
    options = dict(batch_size=BATCH, shuffle=True, last_batch='rollover',
                   batchify_fn=CheckedInWorker(ALL), num_workers=num_workers)
    if loader_type == 'DataLoader':
        loader = mx.gluon.data.DataLoader(Samples(_everything), thread_pool=thread_pool,
                                          timeout=TIMEOUT, **options)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            loader = gbdl.DetectionDataLoader(Samples(_everything), **options)
    workers = [p for p in multiprocessing.active_children() if p not in before]
    assert len(workers) == (0 if thread_pool else num_workers)

    def run_epoch():
        for batch in loader:
            check_delivered(batch, num_workers, thread_pool)
            del batch

    run_epoch()  # warm-up: pools, caches and MXNet's own buffers settle
    shm, worker_fds = _settled_counts(workers)
    handles = loader_handles()
    for _ in range(20):
        run_epoch()
    shm_after, worker_fds_after = _settled_counts(workers)
    # MXNet 1.9 unlinks a shared block's name as soon as it is created (it is shared by file
    # descriptor), so /dev/shm must not change at all.
    assert shm_after == shm
    # Each live shared-memory NDArray holds one descriptor; none is alive now, so no pipe,
    # socket or /dev/shm file may have appeared here: no tolerance. (Only the ones that
    # appeared count: those of earlier tests' loaders may close meanwhile.)
    assert left_behind(handles) == set()
    # Workers free a batch once pickled, and the fd duplicate they keep for the main
    # process is closed once fetched. Their frees run on their own MXNet engine, which we
    # cannot wait for from here; a descriptor or two may still be closing.
    assert all(after <= start + 2 for start, after in zip(worker_fds, worker_fds_after)), (
        worker_fds, worker_fds_after)
