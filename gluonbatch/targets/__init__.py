"""Detection training targets in numpy, computed from the boxes of a sample or of a whole
batch, for the presets (:mod:`gluonbatch.transforms`) and the batch-target batchifiers
(``gluonbatch.batchify``) alike; nothing here needs OpenCV. Each generator returns the
targets of gluoncv's (SSD, YOLOv3, CenterNet, and the RPN of Faster and Mask R-CNN).

Examples
--------
CenterNet's five maps for one box, on a 16 x 16 output grid:

>>> import numpy as np
>>> from gluonbatch.targets.center_net import CenterNetTargetGenerator
>>> maps = CenterNetTargetGenerator(num_class=3, output_width=16, output_height=16)(
...     np.array([[2., 2., 9., 7.]]), np.array([1.]))
>>> [m.shape for m in maps]
[(3, 16, 16), (2, 16, 16), (2, 16, 16), (2, 16, 16), (2, 16, 16)]
>>> float(maps[0][1].max()), maps[1][:, 4, 5].tolist()
(1.0, [7.0, 5.0])
"""

__all__: list[str] = []  # the modules hold the API
