"""Training targets computed in numpy from the boxes of a sample (or a batch of samples),
for the presets (:mod:`gluonbatch.transforms`) and the batch-target batchifiers
(``gluonbatch.batchify.detection``) alike.

- ``ssd``: SSD's targets, equal to gluoncv's ``SSDTargetGenerator``;
- ``yolo``: YOLOv3's targets and their layout on the network's outputs;
- ``center_net``: CenterNet's targets;
- ``rpn``: the RPN targets of Faster and Mask R-CNN;
- ``rpn_anchors``: the anchors the RPN targets are made for, per image size;
- ``iou``: the box IoU all of them share;
- ``labels``: a batch of detection labels as padded arrays;
- ``errors``: the errors of the target generators.
"""
