"""Loading batches: :class:`gluonbatch.DataLoader`, MXNet's loader whose runs survive their
workers, seeded and resumable, and a drop-in for ``gluoncv.data.dataloader`` on it (its
batchify functions, ``DetectionDataLoader`` and ``RandomTransformDataLoader``).

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
