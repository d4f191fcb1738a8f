"""The detection layout on shards: the manifest ``detection.json`` and a record's annotations.

A detection dataset is the usual shard directory (``NNNNN.tar`` with ``.parquet`` and
``.idx``) plus its manifest ``detection.json`` (:mod:`gluonbatch.shards.manifest`, which
lists the shards): what the records hold (their source, classes, whether they carry
polygons).

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
from ..shards.manifest import MANIFEST, hinted, listed_shards, load_manifest

__all__ = ['FORMAT', 'ID_COL', 'make_manifest', 'read_manifest', 'encode_annotations',
           'decode_annotations', 'record_label', 'record_polygons']

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
    try:
        manifest = load_manifest(directory)
        if manifest is None:
            raise FileNotFoundError('%s is not a detection dataset: it has no %s (convert '
                                    'with from_voc or from_coco)' % (directory, MANIFEST))
        problem = _manifest_problem(manifest)
        if problem:
            raise ValueError('%s: %s' % (os.path.join(directory, MANIFEST), problem))
        listed_shards(manifest, directory)
    except ValueError as err:
        raise hinted(err, directory) from None
    return manifest


def _manifest_problem(manifest):
    """What is wrong with the detection fields of a manifest, or None."""
    if manifest.get('format') != FORMAT:
        return 'expected format %r, found %r' % (FORMAT, manifest.get('format'))
    if manifest.get('source') not in _SOURCES:
        return 'source must be one of %s, found %r' % (_SOURCES, manifest.get('source'))
    classes = manifest.get('classes')
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        return 'classes must be a list of names'
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
