"""Detection train and validation presets, drop-in for ``gluoncv.data.transforms.presets``.

``from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform`` replaces
``from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform`` (likewise
``.yolo``, ``.center_net`` and ``.rcnn``): same arguments, same random draws from the same
generators in the same order, so a run seeded the gluoncv way sees the same augmentations.
Their ``load_test`` and ``transform_test`` (test-time images for a detector) return
gluoncv's NDArrays, equal to the bit.

What differs, on purpose:

- Images and targets come back as C-contiguous float32 **numpy** arrays where gluoncv returns
  NDArrays (gluonbatch's batchify functions take both; this saves a copy per sample).
- Pixel work runs in OpenCV on uint8 or on the output-size image where the result allows, so
  images equal gluoncv's up to rounding: at most 2/255 of the pixel range anywhere, 0.1/255
  on average (before normalization).
- Every train preset takes ``normalize=False`` to return its image HWC before gluoncv's
  ``to_tensor`` / ``normalize``, for batchify functions that normalize as they write.
- The SSD, YOLOv3 and CenterNet train presets take ``deferred=True`` to return their image
  as a :class:`~gluonbatch.transforms.deferred.DeferredImage`, whose last pass runs when
  gluonbatch's batchify functions write it into the batch (the same batch, one copy
  fewer).

Inputs are an ``mx.nd.NDArray`` or numpy HWC uint8 image and a numpy ``(N, 5+)`` label,
one row per box ``(xmin, ymin, xmax, ymax, class, ...)``; neither is modified.

The modules: ``presets`` (one module per detector) and the pieces they are made of, one
job each:

- ``draws``: the random draws of the SSD-family presets, in gluoncv's order;
- ``boxes``: box arithmetic, following gluoncv's dtype rules;
- ``color``: colour operations as affine matrices;
- ``pixels``: the OpenCV pixel kernels;
- ``windows``: the crop window of an expanded canvas, built and resized without it;
- ``reach``: how much of a crop window a resize's outputs read;
- ``jitter``: CenterNet's colour jitter;
- ``affine``: CenterNet's affine warp of pixels and boxes;
- ``polygons``: Mask R-CNN's instance polygons;
- ``inference``: the test-time images of the presets' ``load_test`` and ``transform_test``;
- ``deferred``: the presets' image with its last pass deferred to the batch;
- ``targets``, ``inputs``, ``scratch``: earlier paths (deprecated) of
  :mod:`gluonbatch.targets` and of two modules of gluonbatch's machinery.

The presets need OpenCV (``pip install gluonbatch[transforms]``); what the batchify functions
share with them (their targets, :mod:`gluonbatch.targets`, and the input checks) lives
outside this package, so ``gluonbatch.batchify`` never imports OpenCV.
"""
from . import presets

__all__ = ['presets']
