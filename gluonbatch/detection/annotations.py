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

__all__ = ['FORMAT', 'ID_COL', 'make_manifest', 'read_manifest', 'check_manifest',
           'encode_annotations', 'decode_annotations', 'record_fields', 'record_label',
           'record_polygons']

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
    """The manifest of the dataset in ``directory``, checked (:func:`check_manifest`).

    Raises
    ------
    FileNotFoundError
        No such directory, or no ``detection.json`` in it.
    NotADirectoryError
        ``directory`` is a file.
    ValueError
        It is not JSON, or not a manifest this version reads; the message names the file
        and says to run ``gluonbatch wds verify``.
    """
    if not os.path.isdir(directory):
        if os.path.exists(directory):
            raise NotADirectoryError('%s is a file, not a dataset directory' % directory)
        raise FileNotFoundError('no dataset directory %s' % directory)
    try:
        manifest = load_manifest(directory)
        if manifest is None:
            raise FileNotFoundError('%s is not a detection dataset: it has no %s (convert '
                                    'with from_voc or from_coco)' % (directory, MANIFEST))
        check_manifest(manifest, directory)
    except ValueError as err:
        raise hinted(err, directory) from None
    return manifest


def check_manifest(manifest: Mapping[str, Any], directory: PathLike) -> None:
    """ValueError naming the file if ``manifest`` (parsed from ``directory``'s
    ``detection.json``) is not one this version reads: its fields and shard list."""
    problem = _manifest_problem(manifest)
    if problem:
        raise ValueError('%s: %s' % (os.path.join(os.fspath(directory), MANIFEST), problem))
    listed_shards(manifest, directory)


def _manifest_problem(manifest):
    """What is wrong with the detection fields of a manifest, or None."""
    if manifest.get('format') != FORMAT:
        return 'expected format %r, found %r' % (FORMAT, manifest.get('format'))
    if manifest.get('source') not in _SOURCES:
        return 'source must be one of %s, found %r' % (_SOURCES, manifest.get('source'))
    classes = manifest.get('classes')
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        return 'classes must be a list of names'
    if not isinstance(manifest.get('segmentation'), bool):
        return 'segmentation must be true or false, found %r' % (manifest.get('segmentation'),)
    if not isinstance(manifest.get('options'), dict):
        return 'options must be an object, found %r' % (manifest.get('options'),)
    index_map = manifest.get('index_map')
    if index_map is not None and not (isinstance(index_map, dict) and all(
            type(number) is int for number in index_map.values())):
        return 'index_map must be null or an object of class ids, found %r' % (index_map,)
    category_ids = manifest.get('category_ids')
    if category_ids is not None and not (
            isinstance(category_ids, list) and len(category_ids) == len(classes)
            and all(type(number) is int for number in category_ids)):
        return ('category_ids must be null or one int per class (%d), found %r'
                % (len(classes), category_ids))
    return None


def encode_annotations(annotations: Mapping[str, Any]) -> bytes:
    """A record's ``json`` member: ``annotations`` (a dict) as compact UTF-8 JSON."""
    return json.dumps(annotations, ensure_ascii=False, separators=(',', ':'),
                      allow_nan=False).encode('utf-8')


def decode_annotations(data: bytes) -> dict[str, Any]:
    """The dict of a record's ``json`` member ``data``; ValueError saying what is wrong,
    worded to follow the member's name (``'... has no label'``).

    >>> decode_annotations(b'{"label": []}')
    {'label': []}
    >>> decode_annotations(b'[]')
    Traceback (most recent call last):
    ...
    ValueError: has no label
    """
    try:
        annotations = json.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError('is not valid JSON: %s' % err) from None
    return _labelled(annotations)


def _labelled(annotations):
    """``annotations`` if it is a mapping with a label; else ValueError ``'has no label'``."""
    if not isinstance(annotations, Mapping) or 'label' not in annotations:
        raise ValueError('has no label')
    return annotations


def record_fields(annotations: Mapping[str, Any], num_class: int,
                  segmentation: bool) -> tuple[np.ndarray | None, Any]:
    """``(label, polygons)`` of a record's ``annotations`` (polygons None unless
    ``segmentation``), checked as far as training relies on them: the label's rows hold a
    box and a class id among ``num_class`` classes (or -1, gluoncv's no-object row), and
    there are polygons per row (and a label at all). ValueError saying what is wrong,
    worded to follow the member's name.

    >>> label, _ = record_fields({'label': [[1, 2, 3, 4, 0, 0]]}, 2, False)
    >>> label.tolist()
    [[1.0, 2.0, 3.0, 4.0, 0.0, 0.0]]
    >>> record_fields({'label': [[1, 2, 3, 4, 5, 0]]}, 2, False)
    Traceback (most recent call last):
    ...
    ValueError: has class id 5.0 in its label; the dataset has 2 classes (ids 0 to 1, or -1 \
for no object)
    """
    _labelled(annotations)
    try:
        label = record_label(annotations)
    except (ValueError, TypeError) as err:
        raise ValueError('has a label that is not an array of numbers of dtype %r: %s'
                         % (annotations.get('label_dtype', 'float64'), err)) from None
    if label is None and not segmentation:
        raise ValueError('has no label rows (null), which only a dataset with polygons may '
                         'have')
    if label is not None and label.size:
        if label.ndim != 2 or label.shape[1] < 5:
            raise ValueError('has a label of shape %s; expected rows of at least 5 values '
                             '(x1, y1, x2, y2, class, ...)' % (label.shape,))
        ids = label[:, 4]
        bad = ids[(ids != np.floor(ids)) | (ids < -1) | (ids >= num_class)]
        if bad.size:
            raise ValueError('has class id %s in its label; the dataset has %d classes (ids 0 '
                             'to %d, or -1 for no object)' % (bad[0], num_class, num_class - 1))
    if not segmentation:
        return label, None
    try:
        polygons = record_polygons(annotations)
    except (ValueError, TypeError, KeyError, AttributeError) as err:
        raise ValueError('has polygons that are not lists of (x, y) coordinates: %s'
                         % err) from None
    rows = 0 if label is None else len(label)
    if (polygons is None) != (label is None) or len(polygons or ()) != rows:
        raise ValueError('has polygons for %s objects but %d label rows'
                         % ('no' if polygons is None else len(polygons), rows))
    return label, polygons


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
