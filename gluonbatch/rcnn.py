"""Deprecated alias of :mod:`gluonbatch.batchify.rcnn`, where the R-CNN batchifiers live.

Its names are the very objects of the new module; importing it warns.
"""
from ._core.deprecation import warn_moved
from .batchify.rcnn import FasterRCNNTrainBatchify, FeatureShapes, MaskRCNNTrainBatchify

__all__ = ['FeatureShapes', 'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify']

warn_moved(__name__, 'gluonbatch.batchify.rcnn')
