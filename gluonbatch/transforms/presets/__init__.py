"""The presets, one module per detector as in ``gluoncv.data.transforms.presets``.

- ``ssd``: SSD's train and validation transforms and its augmentation;
- ``yolo``: YOLOv3's, on SSD's augmentation;
- ``rcnn``: Faster R-CNN's and Mask R-CNN's;
- ``center_net``: CenterNet's.

Each also has gluoncv's ``load_test`` and ``transform_test``, which make images (files, or
decoded arrays) the network's test-time input, with that detector's defaults.
"""
from . import center_net, rcnn, ssd, yolo

__all__ = ['ssd', 'yolo', 'rcnn', 'center_net']
