"""The ImageNet channel statistics, the one home of the numbers: gluoncv's presets
normalize images with them by default, and its model-zoo backbones were trained with them.
Batchify functions, presets, Dask stages and examples all import them from here (this
module imports nothing).

Examples
--------
>>> IMAGENET_MEAN, IMAGENET_STD
((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
"""

__all__ = ['IMAGENET_MEAN', 'IMAGENET_STD']

#: Per-channel (RGB) mean of pixel values scaled to [0, 1].
IMAGENET_MEAN = (0.485, 0.456, 0.406)
#: Per-channel (RGB) standard deviation of pixel values scaled to [0, 1].
IMAGENET_STD = (0.229, 0.224, 0.225)
