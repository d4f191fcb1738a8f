"""Per-process state: each process makes its own value; with ``keep_inherited`` a forked
child never frees the value it inherited (an inherited shared-memory array, freed, would
lower its parent's reference count)."""
import multiprocessing
import os
import weakref

import pytest

from gluonbatch._core.process import ProcessLocal, in_worker_process


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
