"""The detection layout on shards: the manifest ``detection.json`` and a record's annotations.

A detection dataset is the usual shard directory (``NNNNN.tar`` with ``.parquet`` and
``.idx``) plus ``detection.json``, written in the same commit as the shards: what the
records hold (their source, classes, whether they carry polygons) and how many records
each shard has, so opening the dataset reads this one file and nothing per shard.

Each record has three members, adjacent in its tar (one read gets them all): the image
file's bytes as they were (``jpg``, or the source's own extension), ``txt``, the class
names of its objects (so the records also read as an image-text dataset), and ``json``,
its annotations:

``label``
    The rows of gluoncv's label array for this image (nested lists; Python floats
    survive JSON exactly), with ``label_dtype`` its numpy dtype.
``segm``
    Instance datasets only: per label row, that object's polygons as flat coordinate
    lists, as in the source annotations.
``objects``, ``image``
    The source's annotations of the image and its objects, for curation steps.
"""
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import numpy as np

from .._core.typing import PathLike
from .._core.wording import plural

__all__ = ['MANIFEST', 'FORMAT', 'ID_COL', 'make_manifest', 'write_manifest', 'read_manifest',
           'encode_annotations', 'decode_annotations', 'record_label', 'record_polygons']

#: The manifest's file name in a dataset directory.
MANIFEST = 'detection.json'
#: The manifest's ``format``: a reader refuses others.
FORMAT = 'gluonbatch.detection/1'
#: The parquet column of the record keys.
ID_COL = 'key'
_SOURCES = ('voc', 'coco')


def make_manifest(source: Literal['voc', 'coco'], classes: Iterable[str],
                  shards: Iterable[tuple[str, int]], segmentation: bool = False,
                  index_map: Mapping[str, int] | None = None,
                  category_ids: Iterable[int] | None = None,
                  options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The manifest of a converted dataset, as a dict.

    Parameters
    ----------
    source : {'voc', 'coco'}
        The layout the records were read from: it says which gluoncv dataset their items
        equal.
    classes : sequence of str
        The class names, in label order.
    shards : sequence of (str, int)
        Per shard in dataset order, its stem and number of records.
    segmentation : bool, default False
        Whether records carry polygons (items are ``(image, label, polygons)``).
    index_map : dict, optional
        Class name -> label class id (VOC).
    category_ids : sequence of int, optional
        The source's category id of each class (COCO), in label order.
    options : dict, optional
        The conversion's options, for the record.

    >>> manifest = make_manifest('voc', ['cat', 'dog'], [('00000', 3)])
    >>> manifest['format'], manifest['shards']
    ('gluonbatch.detection/1', [['00000', 3]])
    """
    return {'format': FORMAT, 'source': source, 'classes': list(classes),
            'segmentation': bool(segmentation),
            'index_map': dict(index_map) if index_map is not None else None,
            'category_ids': list(category_ids) if category_ids is not None else None,
            'options': dict(options or {}),
            'shards': [[stem, int(count)] for stem, count in shards]}


def write_manifest(path: PathLike, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest`` (from :func:`make_manifest`) to ``path``."""
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(manifest, handle, indent=1)
        handle.write('\n')


def read_manifest(directory: PathLike) -> dict[str, Any]:
    """The manifest of the dataset in ``directory``, checked.

    Raises
    ------
    FileNotFoundError
        No ``detection.json`` in ``directory``.
    NotADirectoryError
        ``directory`` is a file.
    ValueError
        It is not JSON, or not a manifest this version reads; the message names the file.
    """
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise NotADirectoryError('%s is a file, not a dataset directory' % directory)
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        raise FileNotFoundError('%s is not a detection dataset: it has no %s (convert with '
                                'from_voc or from_coco)' % (directory, MANIFEST))
    try:
        with open(path, encoding='utf-8') as handle:
            manifest = json.load(handle)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError('%s is not valid JSON: %s' % (path, err)) from None
    problem = _manifest_problem(manifest)
    if problem:
        raise ValueError('%s: %s' % (path, problem))
    return manifest


def _manifest_problem(manifest):
    """What is wrong with a parsed manifest, or None."""
    if not isinstance(manifest, dict) or manifest.get('format') != FORMAT:
        seen = manifest.get('format') if isinstance(manifest, dict) else type(manifest)
        return 'expected format %r, found %r' % (FORMAT, seen)
    if manifest.get('source') not in _SOURCES:
        return 'source must be one of %s, found %r' % (_SOURCES, manifest.get('source'))
    classes = manifest.get('classes')
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        return 'classes must be a list of names'
    shards = manifest.get('shards')
    if not isinstance(shards, list) or not all(
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
            and isinstance(entry[1], int) and entry[1] >= 0 for entry in shards):
        return 'shards must be a list of [stem, number of records]'
    stems = [stem for stem, _ in shards]
    if len(set(stems)) != len(stems):
        return 'a shard is listed twice among %s' % plural(len(stems), 'shard')
    return None


def encode_annotations(annotations: Mapping[str, Any]) -> bytes:
    """A record's ``json`` member: ``annotations`` (a dict) as compact UTF-8 JSON."""
    return json.dumps(annotations, ensure_ascii=False, separators=(',', ':'),
                      allow_nan=False).encode('utf-8')


def decode_annotations(data: bytes, where: str) -> dict[str, Any]:
    """The dict of a record's ``json`` member ``data``; ValueError naming ``where``."""
    try:
        annotations = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError('%s: its annotations are not valid JSON: %s' % (where, err)) from None
    if not isinstance(annotations, dict) or 'label' not in annotations:
        raise ValueError('%s: its annotations have no label' % where)
    return annotations


def record_label(annotations: Mapping[str, Any]) -> np.ndarray | None:
    """The label array of a record, as gluoncv's dataset gives it.

    >>> record_label({'label': [[1.0, 2.0, 3.0, 4.0, 0, 0]], 'label_dtype': 'float64'})
    array([[1., 2., 3., 4., 0., 0.]])
    >>> record_label({'label': [], 'label_dtype': 'float64'}).shape
    (0,)
    >>> record_label({'label': None}) is None  # COCOInstance's image without objects
    True
    """
    if annotations['label'] is None:
        return None
    return np.array(annotations['label'], dtype=annotations.get('label_dtype', 'float64'))


def record_polygons(annotations: Mapping[str, Any]) -> list[list[np.ndarray]] | None:
    """Per object, its polygons as float32 ``(points, 2)`` arrays (gluoncv's
    ``COCOInstance`` format).

    >>> [p.tolist() for p in record_polygons({'segm': [[[0, 0, 4, 0, 4, 3]]]})[0]]
    [[[0.0, 0.0], [4.0, 0.0], [4.0, 3.0]]]
    >>> record_polygons({'segm': None}) is None
    True
    """
    if annotations['segm'] is None:
        return None
    return [[np.asarray(polygon).reshape(-1, 2).astype('float32') for polygon in polygons]
            for polygons in annotations['segm']]
