"""Example detection loaders (SSD, YOLOv3, Faster R-CNN, Mask R-CNN, CenterNet) on embedded data.

They need gluoncv (``pip install gluonbatch[examples]``).
"""
