"""Drop-in for ``gluoncv.data.dataloader``: default batchify functions and loaders.

Every batch is written once into ``cpu_shared`` memory, so the ``_mp_`` variants are the
same functions as their plain twins; both names exist so that gluoncv code keeps working.
``DetectionDataLoader`` and ``RandomTransformDataLoader`` run their own worker pool; an
error while loading a batch is raised as the original exception, with notes naming the
dataset indices of the batch and, from a worker, the worker's traceback.

The names below are the public API; the modules:

- ``batchify_fns``: the default batchify functions (``default_batchify_fn`` and the rest);
- ``loaders``: ``DetectionDataLoader`` and ``RandomTransformDataLoader``;
- ``pool``: the worker pool under both loaders (``PooledLoader``), in the main process;
- ``worker``: what runs in the pool's worker processes, and the task claims they share
  with the main process;
- ``shutdown``: how the workers end: stuck ones terminated, and all of them stopped when a
  loader closes (``close()``, a ``with`` block, garbage collection);
- ``resume``: what ``seed=`` adds: the seeded batch sampler a loader builds, and its state
  for ``state_dict`` / ``load_state_dict``.

``split_to_devices``, ``ShardedLoader`` (:mod:`gluonbatch.sharding`) and ``SplitSampler``
(:mod:`gluonbatch.sampler`) are importable from here too, as from gluoncv's.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.dataloader import default_pad_batchify_fn
>>> images, labels = default_pad_batchify_fn(
...     [(np.zeros((3, 2, 2), 'float32'), np.ones((1, 5), 'float32')),
...      (np.ones((3, 2, 2), 'float32'), np.ones((3, 5), 'float32'))])
>>> images.shape, labels.shape, labels.asnumpy()[0, 1, 0]
((2, 3, 2, 2), (2, 3, 5), -1.0)
"""
from ..sampler import SplitSampler
from ..sharding import ShardedLoader, split_to_devices
from .batchify_fns import (default_batchify_fn, default_mp_batchify_fn,
                           default_mp_pad_batchify_fn, default_pad_batchify_fn,
                           tsn_mp_batchify_fn)
from .loaders import DetectionDataLoader, RandomTransformDataLoader

__all__ = ['default_batchify_fn', 'default_mp_batchify_fn', 'default_pad_batchify_fn',
           'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn', 'DetectionDataLoader',
           'RandomTransformDataLoader', 'split_to_devices', 'ShardedLoader', 'SplitSampler']
