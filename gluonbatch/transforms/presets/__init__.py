"""gluoncv's detection presets, one module per detector under gluoncv's names: the train
and validation transforms of SSD, YOLOv3, Faster and Mask R-CNN and CenterNet, and each
detector's ``load_test`` and ``transform_test``, which make files or decoded images the
network's test-time input with that detector's defaults. Every train preset is a
:class:`~gluonbatch.transforms.presets.Preset`: its random choices drawn from the
generators it is given, then applied.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.transforms.presets import yolo
>>> tensor, original = yolo.transform_test(np.zeros((60, 80, 3), 'uint8'), short=32)
>>> tensor.shape, original.shape
((1, 3, 32, 43), (32, 43, 3))
"""
from . import center_net, rcnn, ssd, yolo
from .protocol import Generators, Preset, global_generators

__all__ = ['ssd', 'yolo', 'rcnn', 'center_net', 'Preset', 'Generators', 'global_generators']
