"""Example detection loaders for SSD, YOLOv3, Faster and Mask R-CNN and CenterNet, built the
way gluoncv's train scripts build them, over an embedded synthetic dataset (or Pascal VOC,
MS COCO, detection shards), and the picture of a padded batch: what ``gluonbatch demo``,
``gluonbatch show`` and the loader scripts run. They need gluoncv
(``pip install gluonbatch[examples]``).

Examples
--------
The embedded data: the same pictures in every run, process and machine, labelled as
gluoncv's VOC dataset labels them.

>>> from gluonbatch.examples.synthetic import SyntheticDetection
>>> image, label = SyntheticDetection(length=4, seed=1)[0]
>>> image.dtype, image.shape[2], label.shape[1]
(<class 'numpy.uint8'>, 3, 6)
"""

__all__: list[str] = []  # the modules hold the API
