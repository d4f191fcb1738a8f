"""The shard format and its I/O: reading, writing, the index, the all-or-nothing commit and
``verify``.

A dataset is a directory of shards ``00000.tar, 00001.tar, ...``, each with a
``00000.parquet`` beside it (one row of metadata per record) and optionally a ``00000.idx``
(NVIDIA DALI's ``wds2idx`` index, format v1.2: where each member's bytes are in the tar). A
tar holds, per record, members named ``<id>.<ext>`` (``<id>.jpg``, ``<id>.txt``,
``<id>.json``, ...); the members sharing the name before the first ``'.'`` are one record,
and the parquet has one row per record with the same id in its id column. The format is
NeMo Curator's; this package needs only numpy, pyarrow and MXNet's arrays (Pillow for
WebP images, tqdm for a progress bar on a terminal, when they are used).

:class:`ShardDataset` is what every dataset read from shards builds on
(:class:`gluonbatch.curation.ImageTextPairDataset`,
:class:`gluonbatch.detection.DetectionShards`); :func:`write_index` writes ``.idx`` files;
:func:`verify` checks every shard and lists what is wrong.

Examples
--------
>>> import tempfile
>>> from gluonbatch.shards import verify
>>> from gluonbatch.detection import from_voc, make_voc_example
>>> with tempfile.TemporaryDirectory() as tmp:
...     shards = from_voc(make_voc_example(tmp + '/voc', num_images=4), tmp + '/shards',
...                       samples_per_shard=2, progress=False)
...     report = verify(shards)
...     print(list(report), report.shards, report.records)
[] 4 8
"""
from .dataset import ShardDataset
from .index import INDEX_VERSION, write_index
from .records import IMAGE_EXTENSIONS
from .verify import Problem, RecordRules, Report, verify

__all__ = ['ShardDataset', 'write_index', 'INDEX_VERSION', 'IMAGE_EXTENSIONS', 'verify',
           'Problem', 'Report', 'RecordRules']
