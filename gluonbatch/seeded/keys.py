"""Random streams as functions of counters: the one home of seeded loading's derivations.

Every random number a seeded loader uses comes from a key hashed (BLAKE2b) from the
loader's ``seed`` and counters -- the epoch, a sample's position in the epoch's order, a
batch's number -- under a purpose tag, so keys of neighbouring counters are independent
(unlike ``seed + index``) and nothing depends on which process or thread asks, or when:

- :func:`epoch_order`: the permutation of an epoch, from ``(seed, epoch)``;
  :func:`window_generator`: the draws of an epoch's order over shards (the shards'
  order, then each window's samples'), from ``(seed, epoch)`` too;
- :func:`seed_sample`: before a sample is read, Python's :mod:`random`, numpy's global
  generator and the ``numpy.random.RandomState`` objects a dataset or transform owns
  (:func:`owned_generators`, CenterNet's for one) are all set from
  ``(seed, epoch, position)``, and MXNet's generator too for a sample read on its own; a
  ``random.Random`` or ``numpy.random.Generator`` one owns cannot be, and is warned about;
- :func:`seed_batch`: MXNet's generator, once per batch, from the key of the batch's first
  sample (a :class:`BatchStart`): ``mx.random.seed`` reseeds MXNet's 1024 parallel
  generators, about 1.4 ms of CPU, a sixth of an SSD300 sample's whole work (gluoncv's and
  gluonbatch's detection presets draw nothing from MXNet's generator);
- :func:`batch_choice`: a choice made per batch (a multi-scale loader's input size), from
  ``(seed, epoch, batch number)``.

:func:`read_seeded` seeds and reads one sample under a per-process lock, so threads that
load samples at once do not draw from each other's seeded generators (MXNet's generator is
each thread's own).

Examples
--------
>>> import random
>>> import numpy as np
>>> seed_sample(7, epoch=0, position=3)
>>> first = random.random(), np.random.randint(1000)
>>> seed_sample(7, epoch=0, position=3)
>>> (random.random(), np.random.randint(1000)) == first
True
>>> epoch_order(7, 0, 6).tolist() == epoch_order(7, 0, 6).tolist() != epoch_order(7, 1, 6).tolist()
True
"""
import collections
import functools
import hashlib
import numbers
import random
import threading
import types
import warnings
from collections.abc import Iterable
from typing import Any, Self

import mxnet as mx
import numpy as np

from .._core.checks import check_int
from .._core.process import ProcessLocal

__all__ = ['SampleKey', 'BatchStart', 'check_seed', 'check_epoch', 'epoch_order',
           'seed_sample', 'seed_batch', 'batch_choice', 'bucket_generator',
           'window_generator', 'owned_generators', 'read_seeded']

#: What a key is for: its tag in the hash, so that two purposes never share a key.
_ORDER, _SAMPLE, _OWNED, _CHOICE, _BATCH, _BUCKET, _WINDOW = (
    b'order', b'sample', b'owned', b'choice', b'batch', b'bucket', b'window')
#: Seeds, epochs and positions are packed as unsigned 64-bit numbers.
_LIMIT = 2 ** 64
#: Epochs are below this: a pass's last batch may roll over into the next epoch, whose
#: number must still pack into 64 bits (and a numpy int64 holds every epoch).
EPOCH_LIMIT = 2 ** 63
#: Containers larger than this are not searched for generators (a dataset's records).
_SEARCH_ITEMS = 64
#: How many attributes deep :func:`owned_generators` looks (dataset, transform, closure...).
_SEARCH_DEPTH = 5

# One lock per process (a forked child must not inherit one held by a parent's thread).
_read_lock = ProcessLocal(threading.RLock)


class _BatchRead(threading.local):
    """Per thread: how many keys of the batch it reads are still to come."""

    left = 0


_batch_read = ProcessLocal(_BatchRead)


class SampleKey(collections.namedtuple('SampleKey', 'seed epoch position index')):
    """What a seeded sampler hands the dataset for one sample: the dataset ``index`` to
    read, and the ``(seed, epoch, position)`` its random draws come from. ``position``
    counts through the epoch's order (past its end for a padded last batch), so two
    samples of an epoch never share their draws, even when they read the same index."""

    __slots__ = ()


class BatchStart(SampleKey):
    """The first key of a batch of ``size`` keys: a :class:`SampleKey` (equal to the plain
    one) whose reading seeds MXNet's generator for the whole batch (:func:`read_seeded`).
    A :class:`~gluonbatch.samplers.KeyBatch` starts with one.

    >>> key = BatchStart(7, 0, 8, 3, size=4)
    >>> key == SampleKey(7, 0, 8, 3), key.size
    (True, 4)
    """

    size: int  # the keys of the batch; set by __new__

    def __new__(cls, seed: int, epoch: int, position: int, index: Any, size: int) -> Self:
        key = super().__new__(cls, seed, epoch, position, index)
        key.size = size
        return key

    def __reduce__(self) -> tuple[type['BatchStart'], tuple[Any, ...]]:
        return BatchStart, (*self, self.size)


def check_seed(seed: int, name: str = 'seed') -> int:
    """``seed`` as an int in ``[0, 2**64)``: TypeError if not an integer, else ValueError.

    >>> check_seed(2 ** 64)
    Traceback (most recent call last):
    ...
    ValueError: seed must be an integer in [0, 2**64), got 18446744073709551616
    """
    seed = check_int(seed, name)
    if not 0 <= seed < _LIMIT:
        raise ValueError('%s must be an integer in [0, 2**64), got %d' % (name, seed))
    return seed


def check_epoch(epoch: int, name: str = 'epoch') -> int:
    """``epoch`` as an int in ``[0, 2**63)``: TypeError if not an integer, else ValueError.

    >>> check_epoch(10 ** 30, "state['epoch']")
    Traceback (most recent call last):
    ...
    ValueError: state['epoch'] must be below 2**63, got 1000000000000000000000000000000
    """
    epoch = check_int(epoch, name, minimum=0)
    if epoch >= EPOCH_LIMIT:
        raise ValueError('%s must be below 2**63, got %d' % (name, epoch))
    return epoch


def _digest(tag, counters, size=64):
    """``size`` bytes hashed from ``counters`` (non-negative ints) under ``tag``."""
    packed = b''.join(int(counter).to_bytes(8, 'little') for counter in counters)
    return hashlib.blake2b(packed, digest_size=size, person=tag).digest()


def _generator(tag, counters):
    """A numpy Generator (Philox) keyed from ``counters`` under ``tag``."""
    key = int.from_bytes(_digest(tag, counters, 16), 'little')
    return np.random.Generator(np.random.Philox(key=key))


def epoch_order(seed: int, epoch: int, length: int) -> np.ndarray:
    """The permutation of ``range(length)`` for ``epoch`` (an int64 array), drawn by a
    Philox generator keyed from ``(seed, epoch)``.

    >>> sorted(epoch_order(0, 5, 4).tolist())
    [0, 1, 2, 3]
    """
    return _generator(_ORDER, (seed, epoch)).permutation(length).astype(np.int64)


def bucket_generator(seed: int, epoch: int, bucket: int) -> np.random.Generator:
    """The generator of the draws that arrange bucket ``bucket`` of ``epoch`` (its sort
    direction, its batches' order)."""
    return _generator(_BUCKET, (seed, epoch, bucket))


def window_generator(seed: int, epoch: int) -> np.random.Generator:
    """The generator of the draws that arrange ``epoch`` over shards, window by window
    (:class:`~gluonbatch.samplers.ShardWindowSampler`): the shards' order, then the
    samples' order in each window.

    >>> window_generator(3, 1).integers(1000) == window_generator(3, 1).integers(1000)
    True
    """
    return _generator(_WINDOW, (seed, epoch))


def seed_sample(seed: int, epoch: int, position: int,
                owned: Iterable[np.random.RandomState] = (), mxnet: bool = True) -> None:
    """Set Python's :mod:`random`, numpy's global generator, every ``RandomState`` in
    ``owned`` and, with ``mxnet``, MXNet's generator from ``(seed, epoch, position)``: each
    its own part of one key (the ``owned`` ones keys of their own)."""
    digest = _digest(_SAMPLE, (seed, epoch, position))
    random.seed(int.from_bytes(digest[:16], 'little'))
    np.random.seed(np.frombuffer(digest[16:32], np.uint32))
    if mxnet:
        mx.random.seed(int.from_bytes(digest[32:36], 'little') >> 1)  # MXNet takes an int32
    for number, state in enumerate(owned):
        state.seed(np.frombuffer(_digest(_OWNED, (seed, epoch, position, number), 16),
                                 np.uint32))


def seed_batch(seed: int, epoch: int, position: int) -> None:
    """Set MXNet's generator for the batch whose first sample is ``(seed, epoch,
    position)``: once per batch, its samples then draw from it in turn."""
    digest = _digest(_BATCH, (seed, epoch, position), 4)
    mx.random.seed(int.from_bytes(digest, 'little') >> 1)  # MXNet takes an int32


def batch_choice(seed: int, epoch: int, number: int, choices: int) -> int:
    """An int in ``range(choices)`` for batch ``number`` of ``epoch``.

    >>> batch_choice(3, 0, 10, 5) == batch_choice(3, 0, 10, 5)
    True
    """
    return int.from_bytes(_digest(_CHOICE, (seed, epoch, number), 8), 'little') % choices


def owned_generators(*roots: object) -> list[np.random.RandomState]:
    """The ``numpy.random.RandomState`` objects ``roots`` hold (numpy's global one aside):
    found in their attributes, the attributes of those, ``functools.partial`` arguments,
    the objects of bound methods, the variables closures hold and small lists, tuples and
    dicts, a few levels deep, each once, in a fixed order.

    A ``random.Random`` (other than the :mod:`random` module's own) or a
    ``numpy.random.Generator`` met on the way cannot be reseeded from a key: a
    ``RuntimeWarning`` names its holder's type, its path and its type, once per process
    for each (a worker process forked after the warning stays silent about it).

    >>> class Jitter:
    ...     def __init__(self):
    ...         self.rng = np.random.RandomState(123)
    >>> jitter = Jitter()
    >>> owned_generators([jitter, jitter]) == [jitter.rng]
    True
    >>> import warnings
    >>> class Coin:
    ...     def __init__(self):
    ...         self.rng = random.Random(0)
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter('always')
    ...     owned_generators(Coin())
    []
    >>> print(caught[0].message)  # doctest: +ELLIPSIS
    Coin holds a random.Random at Coin.rng, which seeded loading cannot reseed: ...
    """
    found, seen, unreachable = [], set(), []
    shared = np.random.mtrand._rand  # the global generator, seeded on its own

    def visit(value, depth, path, holder):
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, np.random.RandomState):
            if value is not shared:
                found.append(value)
            return
        if isinstance(value, (random.Random, np.random.Generator)):
            if value is not random._inst:  # the module's own: random.seed sets it
                unreachable.append((holder, path, value))
            return
        if depth == 0 or isinstance(value, (type, types.ModuleType, np.ndarray, mx.nd.NDArray,
                                            str, bytes, numbers.Number)):
            return
        if isinstance(value, functools.partial):
            children = [('.func', value.func)]
            children += [('.args[%d]' % i, arg) for i, arg in enumerate(value.args)]
            children += [('.keywords[%r]' % (k,), v) for k, v in value.keywords.items()]
        elif isinstance(value, types.MethodType):  # a bound method: ``preset.__call__``
            children = [('.__self__', value.__self__)]
        elif isinstance(value, types.FunctionType):  # ``lambda x, y: preset(x, y)``
            holder = value
            children = [('.<closure %s>' % name, cell) for name, cell in _closed_over(value)]
        elif isinstance(value, (list, tuple)):
            children = ([('[%d]' % i, item) for i, item in enumerate(value)]
                        if len(value) <= _SEARCH_ITEMS else ())
        elif isinstance(value, dict):
            children = ([('[%r]' % (k,), v) for k, v in value.items()]
                        if len(value) <= _SEARCH_ITEMS else ())
        else:
            attributes = getattr(value, '__dict__', None)
            holder = value
            children = ([('.%s' % name, v) for name, v in attributes.items()]
                        if isinstance(attributes, dict) else ())
        for step, child in children:
            visit(child, depth - 1, path + step, holder)

    for root in roots:
        visit(root, _SEARCH_DEPTH, _name_of(root), root)
    for holder, path, generator in unreachable:
        _warn_unreachable(holder, path, generator)
    return found


#: What :func:`owned_generators` warned about in this process (and in its parent before a
#: fork): ``(holder type, path, generator type)``.
_warned: set = set()
_warned_lock = ProcessLocal(threading.Lock)


def _name_of(value):
    """How a warning names ``value``: a function by its name, anything else by its type's."""
    if isinstance(value, (types.FunctionType, types.MethodType)):
        return value.__name__
    return type(value).__name__


def _warn_unreachable(holder, path, generator):
    """Warn, once per process for each holder type, path and generator type, that the
    generator at ``path`` is left unseeded."""
    key = (type(holder) if not isinstance(holder, types.FunctionType) else holder.__code__,
           path, type(generator))
    with _warned_lock.get():
        if key in _warned:
            return
        _warned.add(key)
    kind = ('numpy.random.Generator' if isinstance(generator, np.random.Generator)
            else '%s.%s' % (type(generator).__module__, type(generator).__qualname__))
    warnings.warn('%s holds a %s at %s, which seeded loading cannot reseed: its draws will '
                  'not follow the seed (they differ between runs and between workers). Hold '
                  'a numpy.random.RandomState instead (seeded loading reseeds those it finds), '
                  'or draw from numpy\'s global generator (numpy.random).'
                  % (('function ' if isinstance(holder, types.FunctionType) else '')
                     + _name_of(holder), kind, path), RuntimeWarning, stacklevel=3)


def _closed_over(function):
    """The names and values of ``function``'s free variables (those assigned yet)."""
    values = []
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            values.append((name, cell.cell_contents))
        except ValueError:  # an empty cell: the variable is not assigned yet
            pass
    return values


def read_seeded(dataset: Any, key: SampleKey,
                owned: Iterable[np.random.RandomState] = ()) -> Any:
    """``dataset[key.index]``, read with the generators seeded from ``key`` (and the
    ``owned`` ones), holding this process's seeding lock.

    A :class:`BatchStart` seeds MXNet's generator for its batch (each thread has its own:
    threads loading batches at once do not draw from each other's), and the batch's other
    keys, read after it in the same thread, leave it be. A key read on its own seeds
    MXNet's generator itself.
    """
    batch = _batch_read.get()
    with _read_lock.get():
        if isinstance(key, BatchStart):
            seed_batch(key.seed, key.epoch, key.position)
            batch.left = key.size
        in_batch, batch.left = batch.left > 0, max(batch.left - 1, 0)
        try:
            seed_sample(key.seed, key.epoch, key.position, owned, mxnet=not in_batch)
            return dataset[key.index]
        except BaseException:
            batch.left = 0  # the batch's other keys will not be read
            raise
