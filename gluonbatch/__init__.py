"""gluonbatch: fast, shared-memory mini-batches for MXNet Gluon computer-vision training.

The names most users need are importable from here: the batchify functions, ``Collate``,
the memory settings and :class:`DataLoader`, MXNet's loader made to survive its workers,
seeded and resumable. The README's "Where things are" maps the rest.

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
