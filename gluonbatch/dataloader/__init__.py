"""``gluonbatch.DataLoader``, and a drop-in for ``gluoncv.data.dataloader``.

- ``loader``: :class:`DataLoader`, MXNet's DataLoader whose runs survive their workers;
- ``loaders``: gluoncv's ``DetectionDataLoader`` and ``RandomTransformDataLoader`` on it;
- ``pool``: its worker processes, started, replaced and stopped (the whole story is there);
  ``worker``: what runs in them; ``channel``: the messages between them and the loader;
  ``thread_pool``: workers as threads (``thread_pool=True``);
- ``resume``: what ``seed=`` adds: the seeded batch sampler and the loader's state;
- ``batchify_fns``: gluoncv's default batchify functions. Every batch is written once into
  ``cpu_shared`` memory, so the ``_mp_`` variants are the same functions as their plain
  twins; both names exist so that gluoncv code keeps working.

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
from .batchify_fns import (default_batchify_fn, default_mp_batchify_fn,
                           default_mp_pad_batchify_fn, default_pad_batchify_fn,
                           tsn_mp_batchify_fn)
from .loader import DataLoader
from .loaders import DetectionDataLoader, RandomTransformDataLoader

__all__ = ['DataLoader', 'default_batchify_fn', 'default_mp_batchify_fn', 'default_pad_batchify_fn',
           'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn', 'DetectionDataLoader',
           'RandomTransformDataLoader']
