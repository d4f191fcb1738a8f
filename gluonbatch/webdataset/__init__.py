"""Sharded image-text datasets (the NeMo Curator layout) and detection datasets in the same
layout, read at random on the CPU.

A dataset is a directory of shards ``00000.tar, 00001.tar, ...``, each with a
``00000.parquet`` beside it (one row of metadata per record) and optionally a
``00000.idx`` (NVIDIA DALI's ``wds2idx`` index, format v1.2: where each member's bytes are
in the tar). A rank reads one *part* of the shards (``num_parts``, ``part_index``). A tar holds, per
record, ``<id>.jpg`` (the image), ``<id>.txt`` (the caption) and ``<id>.json`` (metadata);
the members sharing the name before the first ``'.'`` are one record, and the parquet has
one row per record with the same id in its id column.

:class:`ImageTextPairDataset` is a gluon ``Dataset`` over such a directory:
``ds[i]`` reads only the bytes of record ``i`` (offsets from its shard's ``.idx``, or from
its shard's tar headers, scanned once when the shard is first used) and returns
``(image, caption, metadata)``; ``ds.metadata`` is a lazy Dask DataFrame, one partition
per shard. :meth:`ImageTextPairDataset.to_webdataset` writes a
filtered, renumbered copy; :func:`write_index` writes ``.idx`` files; :func:`verify` checks
every shard and lists what is wrong. :class:`ShardWindowSampler` orders an epoch to read the
shards a few at a time, shuffled within each window of shards, in equal parts per rank.

:func:`from_voc` and :func:`from_coco` convert gluoncv's on-disk Pascal VOC and MS COCO
into shards of the same layout (each record its image file's bytes, a ``txt`` naming its
objects and its annotations as ``json``, plus a ``detection.json`` manifest), and
:class:`DetectionShards` reads them: its item ``i`` is the gluoncv dataset's item ``i``.

The modules, one job each:

- ``sharded``: what every dataset read from shards has (files, lengths, ids, raw bytes);
- ``dataset``: :class:`ImageTextPairDataset`;
- ``shards``: finding the shards and splitting them into parts;
- ``tar`` and ``ustar``: tar members and their headers, one by one and in bulk;
- ``index``: the ``.idx`` index;
- ``parquet``: a shard's parquet, read with checks;
- ``records``, ``record_arrays`` and ``record_lookup``: where each record's members are;
- ``reader``: random access to the records;
- ``decode``: a record's image, caption and metadata;
- ``metadata``: the metadata as a lazy Dask DataFrame;
- ``stages``: the curation stages (image embedders and classifiers);
- ``writer``, ``copier``, ``json_ids`` and ``commit``: writing shards and metadata, all at
  once or not at all;
- ``reshard``: the writer behind ``to_webdataset``;
- ``progress``: the progress of Dask computations, a bar on a terminal or a line each;
- ``verify``: checking a whole dataset (:func:`verify`);
- ``example``: a small synthetic dataset;
- ``detection``: :class:`DetectionShards`, gluoncv's VOC and COCO items read from shards;
- ``window``: an epoch order that reads a few shards at a time (:class:`ShardWindowSampler`);
- ``detection_format``: the manifest and record annotations of detection shards;
- ``detection_sources``: the classes and splits of Pascal VOC and COCO;
- ``voc`` and ``coco``: converting VOC and COCO, in gluoncv's layouts, into detection shards
  (:func:`from_voc`, :func:`from_coco`), through ``convert``, which writes them all at once
  or not at all;
- ``detection_example``: small VOC and COCO datasets in gluoncv's layouts
  (:func:`make_voc_example`, :func:`make_coco_example`).

Examples
--------
>>> import tempfile
>>> import mxnet as mx
>>> from gluonbatch.batchify import Tuple, Pad, List
>>> from gluonbatch.webdataset import ImageTextPairDataset, make_example_dataset
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
from .coco import from_coco
from .dataset import ImageTextPairDataset
from .detection import DetectionShards
from .detection_example import make_coco_example, make_voc_example
from .example import make_example_dataset
from .index import INDEX_VERSION, write_index
from .records import IMAGE_EXTENSIONS
from .stages import (EmbeddingClassifier, ExportedEmbeddingClassifier, ExportedImageEmbedder,
                     GluonImageEmbedder, ImageClassifier, ImageEmbedder)
from .verify import Problem, Report, verify
from .voc import from_voc
from .window import ShardWindowSampler

__all__ = ['ImageTextPairDataset', 'write_index', 'make_example_dataset',
           'IMAGE_EXTENSIONS', 'INDEX_VERSION', 'ImageEmbedder', 'GluonImageEmbedder',
           'ExportedImageEmbedder', 'ImageClassifier', 'EmbeddingClassifier',
           'ExportedEmbeddingClassifier', 'verify', 'Problem', 'Report', 'from_voc', 'from_coco',
           'make_voc_example', 'make_coco_example', 'DetectionShards', 'ShardWindowSampler']
