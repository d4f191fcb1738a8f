"""Deprecated alias of :mod:`gluonbatch.targets`, where the detection targets live.

``gluonbatch.transforms.targets.ssd`` (and ``.yolo``, ``.center_net``, ``.rpn``,
``.rpn_anchors``, ``.iou``, ``.labels``, ``.errors``) is the very module
``gluonbatch.targets.ssd`` (and so on); importing any of them warns once.
"""
import sys

from .._core.deprecation import warn_moved
from ..targets import center_net, errors, iou, labels, rpn, rpn_anchors, ssd, yolo

warn_moved(__name__, 'gluonbatch.targets')

# the old submodule paths name the new modules themselves
for _module in (center_net, errors, iou, labels, rpn, rpn_anchors, ssd, yolo):
    sys.modules[__name__ + _module.__name__[len('gluonbatch.targets'):]] = _module
