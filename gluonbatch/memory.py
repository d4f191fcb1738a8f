"""Where batches live, and the error a batch that does not fit in shared memory raises.

A batch that does not fit in the free shared memory raises :class:`SharedMemoryError` (a
``MemoryError``), in the main process or through the DataLoader from a worker, where MXNet
alone would kill the process with "Bus error".

Where batches live is a setting, ``set_memory(mode)`` or the ``GLUONBATCH_MEMORY``
environment variable:

* ``'shared'`` (default, as gluoncv): always ``cpu_shared``;
* ``'auto'``: ``cpu_shared`` only in worker processes, which send batches to the main
  process by file descriptor; plain ``cpu`` memory in the main process (``num_workers=0``,
  ``thread_pool=True``), where shared memory buys nothing and its page faults cost more;
* ``'cpu'``: never shared memory.

DataLoader worker processes write batches into **recycled** shared memory, segments of
batches the training process has let go of (on by default; the docs' shared-memory page
tells how and why it is safe). ``set_recycling(False)`` or ``GLUONBATCH_RECYCLE=0`` turns it
off; :func:`recycling_stats` shows what a process's pool holds and did.

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
