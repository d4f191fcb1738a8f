"""Per-process state: the one place gluonbatch keeps state for a process and reacts to
``fork``.

A DataLoader worker is a forked copy of the main process: it inherits thread pools
without their threads and file handles whose offsets it would share with its parent.
Every such object is a :class:`ProcessLocal`, made on first use in each process, so a
forked child makes its own instead of using its parent's. Pure caches are the opposite:
what the parent computed stays true in the child, so :func:`shared_by_key` objects are
kept across a fork.

A child must not free what it inherited: freeing an inherited shared-memory array lowers the
count that the process which made it reads before reusing its memory. So
``ProcessLocal(keep_inherited=True)`` keeps the parent's value, and once a process has sent
or received an NDArray through gluonbatch's reducer (:func:`note_shared_arrays`), the
children it forks start with their garbage collector leaving inherited objects alone
(``gc.freeze()``). The children of any other process (of a program that merely imported
gluonbatch) are left as Python makes them.

Examples
--------
>>> import os
>>> pids = ProcessLocal(os.getpid)
>>> pids.get() == os.getpid()
True
>>> pids.get() is pids.get()
True
"""
import functools
import gc
import multiprocessing
import multiprocessing.util
import os
import threading
import uuid
import weakref
from collections.abc import Callable, Hashable
from typing import Any, ClassVar

__all__ = ['ProcessLocal', 'shared_by_key', 'SharedByToken', 'in_worker_process',
           'share_temp_dir', 'note_shared_arrays', 'BoundedCache', 'file_identity']

# Bumped in every forked child; a ProcessLocal made in another generation is stale.
_generation = 0
_lock = threading.Lock()
# Whether this process maps shared-memory arrays that another process counts on.
_holds_shared_arrays = False


def note_shared_arrays():
    """Note that this process has sent or received an NDArray by shared memory (the reducer
    calls it), so that the children it forks from now on leave inherited objects to it."""
    global _holds_shared_arrays
    _holds_shared_arrays = True


def _after_fork_in_child():
    global _generation, _lock
    _generation += 1
    # The parent's lock may have been held by a thread that does not exist here.
    _lock = threading.Lock()
    if _holds_shared_arrays:
        # Collecting a batch the parent had dropped but not yet collected would free a
        # shared-memory mapping twice, lowering a count the process that made the batch
        # relies on before reusing it (measured: a child's gc.collect() took a recycled
        # segment the training process still mapped from 3 to 2). The child inherits the
        # note: its children freeze too.
        gc.freeze()


os.register_at_fork(after_in_child=_after_fork_in_child)


class ProcessLocal:
    """A value made by ``factory()`` once per process, made again in a forked child.

    Parameters
    ----------
    factory : callable
        Makes the value; called at most once per process, under a lock.
    keep_inherited : bool, default False
        In a forked child, keep the parent's value referenced (unused) instead of dropping
        it, so the child never frees it: for values whose freeing reaches into the parent.

    Examples
    --------
    >>> cache = ProcessLocal(dict)
    >>> cache.get()['k'] = 1
    >>> cache.get()
    {'k': 1}
    """

    def __init__(self, factory, keep_inherited=False):
        self._factory = factory
        self._value = None
        self._generation = None
        self._inherited = [] if keep_inherited else None  # parents' values, never freed

    def get(self):
        """This process's value, made now if this process has none yet."""
        if self._generation == _generation:
            return self._value
        with _lock:
            if self._generation != _generation:
                if self._inherited is not None and self._generation is not None:
                    self._inherited.append(self._value)
                self._value = self._factory()
                self._generation = _generation
        return self._value


def in_worker_process():
    """Whether this process was started by ``multiprocessing``, as DataLoader workers are.

    >>> in_worker_process()
    False
    """
    return multiprocessing.parent_process() is not None


def share_temp_dir():
    """Make this process's multiprocessing temp directory now, so that the processes it
    starts from now on use it instead of making their own; its path.

    A process that sends a file descriptor to another (a DataLoader worker sending a batch)
    listens on a socket in multiprocessing's temp directory, a ``pymp-*`` directory in
    ``tempfile.gettempdir()`` made on first use and removed by the process's exit
    handlers. A worker that is terminated or killed runs none, so its directory would stay
    for good. A process started after its parent made one uses the parent's (its
    configuration is copied from the parent's), and the parent removes it, with whatever
    killed workers left in it, as it exits.

    >>> import os
    >>> os.path.basename(share_temp_dir()).startswith('pymp-')
    True
    """
    return multiprocessing.util.get_temp_dir()


# Pure caches by key, held weakly: each lives as long as something uses it.
_shared: weakref.WeakValueDictionary[Hashable, Any] = weakref.WeakValueDictionary()


def shared_by_key(key, factory):
    """The live object for ``key`` in this process, made by ``factory()`` if there is none.

    For pure caches only: objects made before a fork stay in use in the child (a DataLoader
    worker keeps the caches of the batchify function it inherited, although the function is
    pickled anew with every batch). Objects are held weakly; ``factory`` must return an
    object that supports weak references.

    >>> class Cache(dict):
    ...     pass
    >>> first = shared_by_key('example-key', Cache)
    >>> shared_by_key('example-key', Cache) is first
    True
    """
    with _lock:
        value = _shared.get(key)
        if value is None:
            value = factory()
            _shared[key] = value
        return value


class SharedByToken:
    """A base for objects some of whose attributes pickle as a token instead of their value.

    MXNet's DataLoader pickles the batchify function with every batch it sends a worker;
    what is large and never changes (anchors, per-process caches) need not travel. The
    attributes named in ``BY_TOKEN`` are kept with :func:`shared_by_key` under a token made
    for this object alone, and pickle as that token: a copy unpickled in this process, or in
    a child forked after the object was made (a DataLoader worker), uses the very same
    values. Elsewhere, ``BY_TOKEN[name]`` makes a fresh value if it is callable (a cache);
    if it is a string, the value cannot be made there and unpickling raises ValueError,
    which the string completes (what the attribute holds).

    Examples
    --------
    >>> import copy, pickle
    >>> class Holder(SharedByToken):
    ...     BY_TOKEN = {'_big': 'its big list'}
    ...     def __init__(self, big):
    ...         self.name = 'small'
    ...         self._share_by_token(_big=big)
    >>> class Big(list):
    ...     pass
    >>> holder = Holder(Big(range(10000)))
    >>> len(pickle.dumps(holder.__getstate__())) < 200  # what pickling sends
    True
    >>> twin = copy.copy(holder)  # made from that state, as unpickling does
    >>> twin._big is holder._big, twin.name
    (True, 'small')
    """

    #: ``{attribute: factory or description}`` of the attributes that pickle as the token.
    BY_TOKEN: ClassVar[dict[str, str | Callable[[], object]]] = {}

    def _share_by_token(self, **values):
        """Keep ``values`` (objects that support weak references) under a new token."""
        self._token = uuid.uuid4().hex
        for name in self.BY_TOKEN:
            value = values[name]
            setattr(self, name, shared_by_key((self._token, name), lambda: value))

    def __getstate__(self):
        return {name: value for name, value in self.__dict__.items()
                if name not in self.BY_TOKEN}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name, factory in self.BY_TOKEN.items():
            if isinstance(factory, str):
                factory = functools.partial(self._unknown_token, factory)
            setattr(self, name, shared_by_key((self._token, name), factory))

    def _unknown_token(self, what):
        raise ValueError(
            'cannot unpickle this %s in process %d: it pickles %s as a token naming them in '
            'the process that made it, and only that process and the processes it forks '
            'after making it (DataLoader workers) know the token; make the %s in this '
            'process instead' % (type(self).__name__, os.getpid(), what, type(self).__name__))


class BoundedCache:
    """A pure cache held strongly, the least recently used entries dropped beyond
    ``max_bytes``: for what is costly to build and stays valid while its key does (a key
    made of :func:`file_identity` values, say), so that objects dropped between tasks
    (a Dask worker unpickles new ones for each task) find it again. Kept across a fork, like
    :func:`shared_by_key`'s caches.

    Parameters
    ----------
    max_bytes : int
        The entries' total size (``nbytes(value)``) kept; the newest entry is kept whatever
        its size.
    nbytes : callable
        The size of a value in bytes.

    Examples
    --------
    >>> cache = BoundedCache(100, len)
    >>> len(cache.get('a', lambda: 'x' * 60)), len(cache.get('b', lambda: 'y' * 60))
    (60, 60)
    >>> cache.keys(), cache.peek('a'), len(cache.peek('b'))
    (['b'], None, 60)
    """

    def __init__(self, max_bytes, nbytes):
        self.max_bytes, self.nbytes = max_bytes, nbytes
        self._entries = {}  # key -> (value, bytes), oldest first
        self._lock = ProcessLocal(threading.Lock)

    def get(self, key, factory):
        """The value for ``key``, made by ``factory()`` (outside the lock) if absent."""
        with self._lock.get():
            entry = self._entries.pop(key, None)
            if entry is not None:
                self._entries[key] = entry  # now the most recently used
                return entry[0]
        value = factory()
        with self._lock.get():
            self._entries[key] = (value, self.nbytes(value))
            total = sum(size for _, size in self._entries.values())
            while total > self.max_bytes and len(self._entries) > 1:
                total -= self._entries.pop(next(iter(self._entries)))[1]
        return value

    def peek(self, key):
        """The value for ``key`` if held (its recency unchanged), else None."""
        with self._lock.get():
            entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def keys(self):
        """The keys held, least recently used first."""
        with self._lock.get():
            return list(self._entries)


def file_identity(path):
    """What says a file is still the one read: ``(path, size, inode, modification and change
    times in ns)``; a file rewritten or replaced since has another identity (the change time
    moves on any write, even one whose modification time is put back).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as handle:
    ...     before = file_identity(handle.name)
    ...     _ = handle.write(b'more'); handle.flush()
    ...     before == file_identity(handle.name)
    False
    """
    stat = os.stat(path)
    return (os.path.abspath(path), stat.st_size, stat.st_ino, stat.st_mtime_ns,
            stat.st_ctime_ns)
