"""gluonbatch: fast, shared-memory mini-batches for MXNet Gluon computer-vision training.

The names most users need are importable from here. The package holds

- ``batchify``: the batchify functions, the detection and R-CNN batchifiers among them;
- ``collate``: ``default_collate``, for samples of any nesting;
- ``dataloader``: :class:`DataLoader` (MXNet's, surviving its workers; seeded, resumable)
  and a drop-in for ``gluoncv.data.dataloader``;
- ``sharding``: batches split onto devices; ``sampler``: the dataset split onto ranks;
- ``seeded``: seeded loading, the same batches for any workers, devices or ranks, resumable;
- ``memory``: where batches live, and shared-memory recycling;
- ``targets``: detection training targets in numpy (SSD, YOLOv3, CenterNet, RPN);
- ``transforms``: the detection presets (they need OpenCV);
- ``webdataset``: sharded image-text datasets, read at random, resharded and curated, and
  detection datasets converted to shards;
- ``datasets``: gluoncv's VOC and COCO datasets, their JPEGs decoded faster (same items);
- ``examples``: the example detection loaders; ``cli``: the ``gluonbatch`` command (which
  ``__main__`` runs: ``python -m gluonbatch``);
- ``_core``: the machinery under them all.

>>> import gluonbatch
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).shape
(2, 2)
"""
from . import dataloader
from .dataloader import DataLoader
from ._core.checks import BatchifyUsageError
from .batchify import (Append, CenterNetTrainBatchify, Dict, List, NamedTuple, NormalizedStack,
                       Pad, SSDTrainBatchify, Stack, Tuple, YOLO3TrainBatchify)
from .collate import Collate, default_collate
from .memory import SharedMemoryError, get_memory, set_memory, use_memory
from .batchify.rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from ._core.pickling import install_reducer, restore_mxnet_reducer

__version__ = '0.1.0'

# DataLoader workers send batches with ForkingPickler; gluonbatch's reducer must be the one
# registered for NDArray (see gluonbatch._core.pickling; restore_mxnet_reducer() undoes it).
install_reducer()

__all__ = ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
           'NormalizedStack', 'SSDTrainBatchify', 'YOLO3TrainBatchify', 'CenterNetTrainBatchify',
           'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify', 'Collate', 'default_collate',
           'DataLoader', 'dataloader', 'set_memory', 'get_memory', 'use_memory', 'SharedMemoryError',
           'BatchifyUsageError', 'install_reducer', 'restore_mxnet_reducer', '__version__']
