"""Shared test settings and fixtures."""
import functools
import gc
import os

import numpy as np
import pytest
from hypothesis import settings

from helpers import (FULL_TIER_EXAMPLES, build_zoo_net, local_cluster, make_dataset,
                     ssd_anchors_of)

# The full tier (`make test-all`, CI) runs hypothesis's default number of examples, and
# every property test its own count (helpers.examples). CI runs a fixed, reproducible set
# of examples; developers get fresh ones on every run.
# No deadline: the suite runs two test files at once on two cores, so an example's time
# says more about the machine than about the code.
settings.register_profile('ci', max_examples=FULL_TIER_EXAMPLES, derandomize=True,
                          print_blob=True, deadline=None)
settings.register_profile('dev', max_examples=FULL_TIER_EXAMPLES, print_blob=True,
                          deadline=None)
FULL_TIER = 'ci' if os.environ.get('CI') else 'dev'
# The everyday tier (`make test`: --hypothesis-profile=quick): the full tier's profile with a
# quarter of the examples, every test's own count scaled alike.
settings.register_profile('quick', settings.get_profile(FULL_TIER),
                          max_examples=FULL_TIER_EXAMPLES // 4)
# the default; pytest's --hypothesis-profile, read after this file is loaded, overrides it
settings.load_profile(FULL_TIER)


@pytest.fixture
def data(tmp_path):
    """A WebDataset of three shards (3, 2 and 4 records) written by the test helpers:
    ``(directory, records)``."""
    path = str(tmp_path / 'data')
    return path, make_dataset(path)


@pytest.fixture(scope='module')
def cluster():
    """A local ``distributed`` cluster of two worker processes on 127.0.0.1 and its client,
    ``(cluster, client)``, until the module's last test is done. Dask computes on it only
    where a test says so (``dask.config.set(scheduler=client)``, or the scheduler's
    address), so the tests of a module may run in any order."""
    distributed = pytest.importorskip('distributed')
    local = local_cluster()
    # not the default scheduler: a test computes on it only where it says so, whatever
    # the order the tests run in
    client = distributed.Client(local, set_as_default=False)
    yield local, client
    client.close(timeout=20)
    local.close(timeout=20)  # bounded: a worker killed by a test may never say goodbye


# --------------------------------------------------------------------------------------
# gluoncv's networks, built once per session: tests read them and never change them (a
# test that changes a network builds its own)


@pytest.fixture(scope='session')
def zoo_net():
    """``zoo_net(name, anchors_only=False)``: gluoncv's model-zoo network ``name`` as
    :func:`helpers.build_zoo_net` builds it, the same object for the whole session."""
    return functools.lru_cache(maxsize=None)(build_zoo_net)


@pytest.fixture(scope='session')
def zoo_ssd_anchors(zoo_net):
    """``zoo_ssd_anchors(name, width, height)``: the anchors of SSD network ``name`` for a
    ``width`` x ``height`` image (a train-mode forward), computed once per session. At the
    session's end they must still be what they were: no test may write into them."""
    computed = {}

    def anchors(name, width, height):
        key = name, width, height
        if key not in computed:
            array = ssd_anchors_of(zoo_net(name), width, height)
            computed[key] = array, array.asnumpy().copy()
        return computed[key][0]

    yield anchors
    for key, (array, original) in computed.items():
        np.testing.assert_array_equal(array.asnumpy(), original,
                                      err_msg='a test changed the anchors of %s %dx%d' % key)



@pytest.fixture(autouse=True, scope='module')
def _collector_skips_what_earlier_modules_made():
    """Before each test module, what is alive (modules, gluoncv, the session's networks,
    what earlier modules keep) is moved out of the garbage collector's sight.

    MXNet's DataLoader runs a full collection whenever one is made, and a full collection
    over everything pytest, MXNet and gluoncv have loaded costs more than most tests here.
    Garbage is collected first; what the module's tests make is collected as usual.
    """
    gc.collect()
    gc.freeze()
