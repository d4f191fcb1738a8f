"""Example detection loaders (SSD, YOLOv3, Faster R-CNN, Mask R-CNN, CenterNet) on embedded data.

They need gluoncv (``pip install gluonbatch[examples]``).

- ``ssd``, ``yolo``, ``rcnn``, ``center_net``: the loaders of each detector, as gluoncv's
  train scripts build them;
- ``runner``: what they share: options, datasets, timed iteration and the summary;
- ``synthetic``: the embedded detection dataset they read;
- ``picture``: a drawing of one padded detection batch;
- ``show``: the first batch of a loader, drawn (``gluonbatch show``).
"""
