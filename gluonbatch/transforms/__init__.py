"""Detection train and validation presets at native speed, a drop-in for
``gluoncv.data.transforms.presets``.

``from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform`` replaces gluoncv's
import of the same name (likewise ``.yolo``, ``.center_net`` and ``.rcnn``): same
arguments, same fields, and the same random draws from the same generators in the same
order, so a run seeded the gluoncv way sees the same augmentations. Images and targets come
back as C-contiguous float32 numpy arrays instead of NDArrays, the images within 2/255 of
the pixel range of gluoncv's; ``normalize=False`` returns the image HWC before
``to_tensor`` / ``normalize`` and ``deferred=True`` leaves its last pass to the batchify
function that writes it (SSD, YOLOv3, CenterNet). ``load_test`` and ``transform_test``
return gluoncv's NDArrays, equal to the bit. Inputs -- an NDArray or numpy HWC uint8 image
and an ``(N, 5+)`` label of rows ``(xmin, ymin, xmax, ymax, class, ...)`` -- are never
modified.

The presets need OpenCV (``pip install gluonbatch[transforms]``); the training targets
they share with the batchify functions live in :mod:`gluonbatch.targets`, so
``gluonbatch.batchify`` never imports OpenCV.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.transforms.presets.ssd import SSDDefaultValTransform
>>> image = np.zeros((64, 128, 3), 'uint8')
>>> label = np.array([[8, 6, 40, 30, 1]], 'float32')
>>> tensor, boxes = SSDDefaultValTransform(32, 32)(image, label)
>>> tensor.shape, tensor.dtype, boxes.tolist()
((3, 32, 32), dtype('float32'), [[2.0, 3.0, 10.0, 15.0, 1.0]])
"""
from . import presets

__all__ = ['presets']
