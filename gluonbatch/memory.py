"""Where batches live, and the error a batch that does not fit in shared memory raises.

MXNet sizes a file in ``/dev/shm`` for every ``cpu_shared`` array; that succeeds even when
the tmpfs has no room, and the first write past its free space kills the process with
SIGBUS ("Bus error"). gluonbatch checks the free space before every shared allocation and
then reserves the pages, so a batch that does not fit raises :class:`SharedMemoryError`
instead, in the main process or in a DataLoader worker.

Where batches live is a setting, ``set_memory(mode)`` or the ``GLUONBATCH_MEMORY``
environment variable:

* ``'shared'`` (default, as gluoncv): always ``cpu_shared``;
* ``'auto'``: ``cpu_shared`` only in worker processes, which send batches to the main
  process by file descriptor; plain ``cpu`` memory in the main process (``num_workers=0``,
  ``thread_pool=True``), where shared memory buys nothing and its page faults cost more;
* ``'cpu'``: never shared memory.

In DataLoader worker processes, batches are written into **recycled** shared memory: a
worker keeps the segments of the batches it sent and reuses one once the main process has
let go of it (MXNet's shared reference count and the worker's own count of the arrays using
it both say so), which saves the page faults of fresh memory, most of the cost of a large
batch. ``set_recycling(False)`` or
``GLUONBATCH_RECYCLE=0`` turns it off; :func:`recycling_stats` shows what a process's pool
holds and did.

Examples
--------
>>> import gluonbatch
>>> gluonbatch.set_memory('cpu')
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).context
cpu(0)
>>> gluonbatch.set_memory('shared')
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).context
cpu_shared(0)
"""
from ._core.memory_settings import (MODES, get_memory, get_recycling, recycling_stats,
                                   recycling_unavailable, set_memory, set_recycling,
                                   use_memory, use_recycling, use_shared_memory)
from ._core.shm import SharedMemoryError

__all__ = ['MODES', 'SharedMemoryError', 'set_memory', 'get_memory', 'use_memory',
           'use_shared_memory', 'set_recycling', 'get_recycling', 'use_recycling',
           'recycling_unavailable', 'recycling_stats']
