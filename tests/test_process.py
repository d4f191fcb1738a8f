"""Per-process state: each process makes its own value; with ``keep_inherited`` a forked
child never frees the value it inherited (an inherited shared-memory array, freed, would
lower its parent's reference count)."""
import json
import multiprocessing
import os
import subprocess
import sys
import weakref

import pytest

from gluonbatch._core.process import (BoundedCache, ProcessLocal, file_identity,
                                     in_worker_process)


FORK = multiprocessing.get_context('fork')


class Value:
    """Something a weak reference can watch."""


def _in_child(local, parent_value_ref, results):
    value = local.get()
    parent_value = parent_value_ref()
    results.put((value is not parent_value, os.getpid(), in_worker_process(),
                 parent_value is not None))


@pytest.mark.parametrize('keep_inherited', [True, False])
def test_a_forked_child_makes_its_own_value(keep_inherited):
    local = ProcessLocal(Value, keep_inherited=keep_inherited)
    parent_value = weakref.ref(local.get())  # only the ProcessLocal holds the value
    assert local.get() is parent_value()
    results = FORK.Queue()
    child = FORK.Process(target=_in_child, args=(local, parent_value, results))
    child.start()
    own_value, pid, in_worker, inherited_alive = results.get(timeout=60)
    child.join(60)
    assert own_value and pid != os.getpid()
    assert in_worker and not in_worker_process()
    # kept: the child replaced the value without freeing its copy; else the copy is freed
    assert inherited_alive == keep_inherited
    assert local.get() is parent_value()  # the parent's is untouched


def test_bounded_cache_keeps_the_newest_within_its_bytes_and_drops_the_oldest():
    cache = BoundedCache(100, len)
    made = []

    def make(value):
        def factory():
            made.append(value)
            return value
        return factory

    assert cache.get('a', make(b'a' * 40)) == b'a' * 40
    assert cache.get('b', make(b'b' * 40)) == b'b' * 40
    assert cache.get('a', make(b'x')) == b'a' * 40          # served, not made again
    assert cache.get('c', make(b'c' * 40)) == b'c' * 40     # 120 bytes: 'b' is oldest
    assert cache.keys() == ['a', 'c'] and made == [b'a' * 40, b'b' * 40, b'c' * 40]
    assert cache.get('d', make(b'd' * 500)) == b'd' * 500   # the newest is kept anyway
    assert cache.keys() == ['d']


def test_file_identity_changes_with_any_write(tmp_path):
    path = tmp_path / 'f'
    path.write_bytes(b'12345')
    before = file_identity(path)
    stat = os.stat(path)
    path.write_bytes(b'54321')  # same size; the modification time put back
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_identity(path) != before
    assert file_identity(path) == file_identity(path)


# a process reporting how many mappings of its own a 4 MiB array takes
_MALLINFO = """
import ctypes, json
import numpy as np

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        'arena', 'ordblks', 'smblks', 'hblks', 'hblkhd', 'usmblks', 'fsmblks', 'uordblks',
        'fordblks', 'keepcost')]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2

def mapped_for_an_array():
    before = libc.mallinfo2().hblks
    array = np.ones(1 << 19)  # 4 MiB
    mapped = libc.mallinfo2().hblks - before
    return mapped, float(array.sum())
"""

_HEAP_SCRIPT = _MALLINFO + """
from gluonbatch._core.heap import heap_for_large_arrays
outside = mapped_for_an_array()
with heap_for_large_arrays():
    inside = mapped_for_an_array()
after = mapped_for_an_array()
print(json.dumps([outside, inside, after]))
"""


def test_heap_for_large_arrays_keeps_large_arrays_on_the_heap_on_a_worker():
    """As on a distributed worker (the nanny sets MALLOC_TRIM_THRESHOLD_), in a process of
    its own: a 4 MiB array is a mapping of its own outside the block, on the heap inside
    it, and a mapping again once the block is left (the environment's settings back)."""
    result = subprocess.run([sys.executable, '-c', _HEAP_SCRIPT], capture_output=True,
                            text=True, env=dict(os.environ, MALLOC_TRIM_THRESHOLD_='65536'),
                            check=True)
    outside, inside, after = json.loads(result.stdout)
    assert (outside, inside, after) == ([1, 1 << 19], [0, 1 << 19], [1, 1 << 19])


@pytest.mark.slow  # a fresh interpreter's allocator settings
def test_heap_for_large_arrays_leaves_a_process_without_fixed_settings_alone():
    """Started without the malloc variables (glibc adapts its thresholds itself) or with
    one that is not a number: the block computes the same and changes nothing."""
    for environ in ({}, {'MALLOC_TRIM_THRESHOLD_': 'not a number'}):
        env = {key: value for key, value in os.environ.items() if not key.startswith('MALLOC_')}
        result = subprocess.run([sys.executable, '-c', _HEAP_SCRIPT], capture_output=True,
                                text=True, env=dict(env, **environ), check=True)
        assert [sums for _, sums in json.loads(result.stdout)] == [1 << 19] * 3


_KEEP_SCRIPT = _MALLINFO + """
from gluonbatch._core.heap import keep_freed_heap
kept = keep_freed_heap()
print(json.dumps([kept, keep_freed_heap(), mapped_for_an_array()]))
"""


@pytest.mark.slow  # fresh interpreters' allocator settings
def test_keep_freed_heap_puts_large_arrays_on_the_heap_unless_the_start_fixed_it():
    """Once per process: a 4 MiB array is a heap block after it; a process started with a
    malloc variable keeps the setting it was started with (the array its own mapping)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith('MALLOC_')}
    for environ, kept, mappings in (({}, True, 0), ({'MALLOC_TRIM_THRESHOLD_': '65536'},
                                                    False, 1)):
        result = subprocess.run([sys.executable, '-c', _KEEP_SCRIPT], capture_output=True,
                                text=True, env=dict(env, **environ), check=True)
        assert json.loads(result.stdout) == [kept, kept, [mappings, 1 << 19]]
