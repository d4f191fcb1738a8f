"""Image-text curation, NeMo Curator's side: :class:`ImageTextPairDataset` with its metadata
as a lazy Dask DataFrame, the embedder and classifier stages, filtering and resharding.

Examples
--------
>>> import tempfile
>>> import mxnet as mx
>>> from gluonbatch.batchify import Tuple, Pad, List
>>> from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
>>> tmp = tempfile.TemporaryDirectory()
>>> path = make_example_dataset(tmp.name, num_shards=2, samples_per_shard=3)
>>> ds = ImageTextPairDataset.from_webdataset(path, id_col='key')
>>> len(ds), [name[-9:] for name in ds.tar_files]
(6, ['00000.tar', '00001.tar'])
>>> image, caption, meta = ds[4]
>>> image.dtype, image.shape[2], type(caption).__name__, meta['key']
(<class 'numpy.uint8'>, 3, 'str', '000011')
>>> loader = mx.gluon.data.DataLoader(ds, batch_size=4,
...                                   batchify_fn=Tuple(Pad(axis=(0, 1)), List(), List()))
>>> [(images.shape[0], len(captions)) for images, captions, metas in loader]
[(4, 4), (2, 2)]
>>> tmp.cleanup()
"""
from .example import make_example_dataset
from .image_text import ImageTextPairDataset
from .stages import (EmbeddingClassifier, ExportedEmbeddingClassifier, ExportedImageEmbedder,
                     GluonImageEmbedder, ImageClassifier, ImageEmbedder)

__all__ = ['ImageTextPairDataset', 'make_example_dataset', 'ImageEmbedder',
           'GluonImageEmbedder', 'ExportedImageEmbedder', 'ImageClassifier',
           'EmbeddingClassifier', 'ExportedEmbeddingClassifier']
