"""Detection data: gluoncv's Pascal VOC and MS COCO converted to shards (:func:`from_voc`,
:func:`from_coco`) and read back (:class:`DetectionShards`, whose item ``i`` is the gluoncv
dataset's item ``i``; a curation step's output too, :meth:`DetectionShards.to_webdataset`),
checked whole by :func:`verify`, small example datasets in gluoncv's layouts, and gluoncv's own
``VOCDetection``, ``COCODetection`` and ``COCOInstance`` with their JPEGs decoded faster.

Reading detection shards for training needs neither Dask nor pandas; gluoncv's datasets are
imported (with gluoncv) when first named.

Examples
--------
>>> import tempfile
>>> from gluonbatch.detection import DetectionShards, from_voc, make_voc_example
>>> with tempfile.TemporaryDirectory() as tmp:
...     root = make_voc_example(tmp + '/voc', num_images=3, size=(64, 48))
...     shards = DetectionShards(from_voc(root, tmp + '/shards', progress=False))
...     image, label = shards[0]
...     print(len(shards), image.shape[2], label.shape[1])
6 3 6
"""
from .coco import from_coco
from .dataset import DetectionShards
from .examples import make_coco_example, make_voc_example
from .verify import verify
from .voc import from_voc

__all__ = ['from_voc', 'from_coco', 'DetectionShards', 'verify', 'make_voc_example',
           'make_coco_example', 'VOCDetection', 'COCODetection', 'COCOInstance']

_GLUONCV_DATASETS = ('VOCDetection', 'COCODetection', 'COCOInstance')


def __getattr__(name):
    # gluoncv is heavy and optional: its datasets are imported when first named
    if name in _GLUONCV_DATASETS:
        from . import gluoncv_datasets
        return getattr(gluoncv_datasets, name)
    raise AttributeError('module %r has no attribute %r' % (__name__, name))
