"""gluonbatch: fast, shared-memory mini-batches for MXNet Gluon computer-vision training.

>>> import gluonbatch
>>> gluonbatch.Stack()([[1, 2], [3, 4]]).shape
(2, 2)
"""
from . import dataloader
from ._core.checks import BatchifyUsageError
from .batchify import (Append, CenterNetTrainBatchify, Dict, List, NamedTuple, NormalizedStack,
                       Pad, SSDTrainBatchify, Stack, Tuple, YOLO3TrainBatchify)
from .collate import Collate, default_collate
from .memory import SharedMemoryError, get_memory, set_memory, use_memory
from .batchify.rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from ._core.pickling import install as _install_reducer

__version__ = '0.1.0'

# DataLoader workers send batches with ForkingPickler; gluonbatch's reducer must be the one
# registered for NDArray (see gluonbatch._core.pickling).
_install_reducer()

__all__ = ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
           'NormalizedStack', 'SSDTrainBatchify', 'YOLO3TrainBatchify', 'CenterNetTrainBatchify',
           'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify', 'Collate', 'default_collate',
           'dataloader', 'set_memory', 'get_memory', 'use_memory', 'SharedMemoryError',
           'BatchifyUsageError', '__version__']
