"""Batchify functions: turn a list of samples into a mini-batch.

A drop-in for ``gluoncv.data.batchify``: ``Stack``, ``Pad``, ``Append`` and ``Tuple`` return
what gluoncv returns for every input gluoncv handles, and ``List``, ``Dict`` and
``NamedTuple`` combine fields the way GluonNLP users know; the detection batchifiers (SSD,
YOLOv3, CenterNet, Faster and Mask R-CNN) return training batches, targets included. Every
NDArray returned is written once, in ``cpu_shared(0)`` with the default memory setting, so
DataLoader worker processes hand batches over by file descriptor, uncopied.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.batchify import Tuple, Stack, Pad
>>> samples = [(np.zeros((2, 2)), [1, 2, 3]), (np.ones((2, 2)), [4])]
>>> images, labels = Tuple(Stack(), Pad(pad_val=-1))(samples)
>>> images.shape, images.context
((2, 2, 2), cpu_shared(0))
>>> labels.asnumpy()
array([[ 1,  2,  3],
       [ 4, -1, -1]])
"""
from .rcnn import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from .arrays import Append, Pad, Stack
from .detection import CenterNetTrainBatchify, SSDTrainBatchify, YOLO3TrainBatchify
from .fields import Dict, List, NamedTuple, Tuple
from .gluoncv_fns import dict_batchify_fn, ms_batchify_fn
from .images import NormalizedStack

__all__ = ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
           'ms_batchify_fn', 'dict_batchify_fn', 'FasterRCNNTrainBatchify',
           'MaskRCNNTrainBatchify', 'NormalizedStack', 'SSDTrainBatchify',
           'YOLO3TrainBatchify', 'CenterNetTrainBatchify']
