"""MS COCO on disk (gluoncv's layout) to detection shards:
:func:`~gluonbatch.detection.from_coco`."""
import json
import math
import os

import numpy as np

from .._core.typing import PathLike
from .._core.checks import check_int, described, is_int, is_real
from .convert import (Record, caption, destination, label_fields, show_progress, source_root, write_dataset)
from .annotations import encode_annotations
from .sources import coco_split
from .._core.console import counted, stage_named

__all__ = ['from_coco']


def from_coco(root: PathLike, dst: PathLike, split: str = 'train2017', segmentation: bool = False,
              min_object_area: float | None = None, use_crowd: bool = True,
              skip_empty: bool = True, samples_per_shard: int = 1000,
              progress: bool | None = None) -> str:
    """Convert MS COCO, as gluoncv reads it from ``root``, into detection shards in
    ``dst``: record ``i`` is item ``i`` of gluoncv's ``COCODetection(root,
    'instances_<split>', min_object_area=..., skip_empty=..., use_crowd=...)``, or with
    ``segmentation`` of its ``COCOInstance(root, 'instances_<split>', min_object_area=...,
    skip_empty=...)``.

    Records are the images in id order, without those gluoncv skips. A record holds the
    image file's bytes, a caption of its class names and its annotations
    (:mod:`~gluonbatch.detection.annotations`): gluoncv's label, its dtype included (rows
    ``x1, y1, x2, y2, class``, boxes clipped to the image), with ``segmentation`` each
    object's polygons of 6 coordinates or more, and the image's entry of the annotation file
    with all its annotations there. The parquet columns are ``key``, ``image_id`` (COCO's),
    ``file_name``, ``width``, ``height``, ``num_objects``, ``classes`` and ``crowd``. The
    classes are the annotation file's categories in their order (the manifest keeps their
    ids); an image is found where gluoncv looks for it (``root/<the last two parts of its
    coco_url>``, else ``root/<split>/<file_name>``). Every annotation is checked and every
    image looked for before anything is written, and the shards and ``detection.json`` appear
    together or, if the run fails or is killed, not at all.

    Parameters
    ----------
    root : str or os.PathLike
        gluoncv's ``root``: the directory holding ``annotations`` and the image folders.
    dst : str or os.PathLike
        The new dataset's directory, made if missing; it may not hold shards or a
        manifest already.
    split : str, default 'train2017'
        ``'train2017'`` or gluoncv's ``'instances_train2017'``: the annotation file is
        ``root/annotations/instances_<split>.json``.
    segmentation : bool, default False
        Convert for ``COCOInstance`` (labels and polygons) instead of ``COCODetection``.
    min_object_area : float, optional
        gluoncv's: objects of a smaller area (without ``segmentation``; with it, of an
        area not larger) are left out. Default gluoncv's: 0, or 1 with ``segmentation``.
    use_crowd : bool, default True
        Keep crowd objects (without ``segmentation``; with it, as in gluoncv, crowds are
        always left out).
    skip_empty : bool, default True
        Leave out images without objects. With ``segmentation``, an image kept without
        objects has ``None`` as its label and polygons, as gluoncv gives it (JSON ``null``).
    samples_per_shard : int, default 1000
    progress : bool, optional
        Show progress on ``sys.stderr``: a bar on a terminal, else a line per stage.
        Default: only a bar, on a terminal.

    Returns
    -------
    str
        ``dst``'s absolute path.

    Raises
    ------
    FileNotFoundError
        No ``root``, annotation file or image (named).
    NotADirectoryError
        ``dst`` is a file.
    ValueError
        An annotation file that is not JSON or not COCO's layout, an annotation gluoncv
        could not use (named by its id), no image at all, or a ``dst`` that holds a
        dataset.

    Examples
    --------
    >>> import json, tempfile
    >>> from gluonbatch.detection import make_coco_example
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_coco_example(tmp.name + '/coco', num_images=4, sizes=[(64, 48)])
    >>> path = from_coco(root, tmp.name + '/shards', segmentation=True)
    >>> with open(os.path.join(path, 'detection.json')) as handle:
    ...     manifest = json.load(handle)
    >>> manifest['shards'], manifest['category_ids'][-3:], manifest['classes'][:2]
    ([['00000', 3]], [88, 89, 90], ['person', 'bicycle'])
    >>> tmp.cleanup()
    """
    what = 'from_coco'
    root = source_root(root)
    folder, stem = coco_split(split)
    for name, value in (('segmentation', segmentation), ('use_crowd', use_crowd),
                        ('skip_empty', skip_empty)):
        if not isinstance(value, bool):
            raise TypeError('%s must be True or False, got %s' % (name, described(value)))
    if min_object_area is None:
        min_object_area = 1 if segmentation else 0
    elif not is_real(min_object_area):
        raise TypeError('min_object_area must be a number, got %s' % described(min_object_area))
    elif not math.isfinite(min_object_area):
        raise ValueError('min_object_area must be finite, got %r' % min_object_area)
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    show = show_progress(progress)
    path = destination(dst, what)
    source = os.path.join(root, 'annotations', stem + '.json')
    document = _read(source)
    categories, images, by_image = _contents(document, source)
    classes = [category['name'] for category in categories]
    index = {category['id']: number for number, category in enumerate(categories)}
    labeller = _instance_label if segmentation else _detection_label
    records = []
    with stage_named('reading annotations'):
        for entry in counted(images, what, 'image', show):
            image = _image_path(root, folder, entry, source)
            objects = by_image.get(entry['id'], [])
            fields, names, crowd = labeller(objects, entry, index, source, min_object_area,
                                            use_crowd)
            if fields is None:  # no object left
                if skip_empty:
                    continue
                fields = ({'label': None, 'label_dtype': None, 'segm': None} if segmentation
                          else label_fields([[-1] * 5]))
            annotations = dict(fields, image=entry, objects=objects)
            try:
                encoded = encode_annotations(annotations)
            except ValueError as err:  # NaN or infinity, which JSON cannot hold
                raise ValueError('%s: the annotations of image %r cannot be written as JSON: '
                                 '%s' % (source, entry['id'], err)) from None
            row = {'image_id': entry['id'], 'file_name': os.path.basename(image),
                   'width': entry['width'], 'height': entry['height'],
                   'num_objects': len(names), 'classes': sorted({classes[n] for n in names}),
                   'crowd': crowd}
            records.append(Record(image, _extension(image, source),
                                  caption(classes[n] for n in names), encoded, row))
    options = {'split': folder, 'annotation_file': 'annotations/%s.json' % stem,
               'min_object_area': min_object_area, 'use_crowd': use_crowd,
               'skip_empty': skip_empty, 'samples_per_shard': samples_per_shard}
    return write_dataset(records, path, what, samples_per_shard, show, source='coco',
                         classes=classes, segmentation=segmentation,
                         category_ids=[category['id'] for category in categories],
                         options=options)


def _read(source):
    try:
        with open(source, 'rb') as handle:
            return json.loads(handle.read())
    except FileNotFoundError:
        raise FileNotFoundError('no annotation file %s' % source) from None
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError('%s is not valid JSON: %s' % (source, err)) from None


def _contents(document, source):
    """``(categories, images in id order, {image id: its annotations in file order})``,
    checked: gluoncv (pycocotools) groups the annotations by image in the order of the
    file, and sorts the images by id."""
    if not isinstance(document, dict):
        raise ValueError('%s is not a COCO annotation file: it holds %s, not an object'
                         % (source, described(document)))
    parts = {}
    for name in ('categories', 'images', 'annotations'):
        value = document.get(name, [] if name == 'annotations' else None)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise ValueError('%s is not a COCO annotation file: its %r is %s, not a list of '
                             'objects' % (source, name, described(value)))
        parts[name] = value
    categories = parts['categories']
    _unique([c.get('id') for c in categories], 'category', source)
    for category in categories:
        if not is_int(category.get('id')) or not isinstance(category.get('name'), str):
            raise ValueError('%s: category %r needs an int id and a str name' % (source,
                                                                                 category))
    if not categories:
        raise ValueError('%s has no categories' % source)
    images = parts['images']
    for entry in images:
        _check_image(entry, source)
    _unique([entry['id'] for entry in images], 'image', source)
    _unique([annotation.get('id') for annotation in parts['annotations']], 'annotation',
            source)
    by_image = {}
    for annotation in parts['annotations']:
        by_image.setdefault(annotation.get('image_id'), []).append(annotation)
    return categories, sorted(images, key=lambda entry: entry['id']), by_image


def _unique(ids, what, source):
    seen = set()
    for value in ids:
        if value in seen:
            raise ValueError('%s: two %ss have the id %r; ids must be unique' % (source, what,
                                                                                 value))
        seen.add(value)


def _check_image(entry, source):
    if not is_int(entry.get('id')):
        raise ValueError('%s: image %r has no int id' % (source, _short(entry)))
    for name in ('width', 'height'):
        if not is_real(entry.get(name)) or not entry[name] > 0:
            raise ValueError('%s: image %r has %s %r, expected a positive number'
                             % (source, entry['id'], name, entry.get(name)))
    for name in ('file_name', 'coco_url'):
        if name in entry and not isinstance(entry[name], str):
            raise ValueError('%s: image %r has %s %r, expected a str' % (
                source, entry['id'], name, entry[name]))
    if 'coco_url' in entry and len(entry['coco_url'].split('/')) < 2:
        raise ValueError('%s: image %r has coco_url %r, expected .../<folder>/<file name>'
                         % (source, entry['id'], entry['coco_url']))
    if 'coco_url' not in entry and 'file_name' not in entry:
        raise ValueError('%s: image %r has neither coco_url nor file_name' % (source,
                                                                             entry['id']))


def _short(value, width=80):
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + '...'


def _image_path(root, folder, entry, source):
    """gluoncv's path of an image: ``root`` and the last two parts of its ``coco_url``."""
    if 'coco_url' in entry:
        path = os.path.join(root, *entry['coco_url'].split('/')[-2:])
    else:
        path = os.path.join(root, folder, entry['file_name'])
    if not os.path.isfile(path):
        raise FileNotFoundError('no image file %s (image %r of %s)' % (path, entry['id'],
                                                                      source))
    return path


def _extension(path, source):
    ext = os.path.splitext(path)[1][1:].lower()
    if not ext or not ext.isalnum():
        raise ValueError('%s: image file %s has no extension to name its member by'
                         % (source, path))
    return ext


def _checked(annotation, index, source):
    """The annotation's bbox and area, checked (what gluoncv reads of it)."""
    bbox, area = annotation.get('bbox'), annotation.get('area')
    where = '%s: annotation %r (image %r)' % (source, annotation.get('id'),
                                              annotation.get('image_id'))
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(map(is_real, bbox)):
        raise ValueError('%s has bbox %r, expected [x, y, width, height]' % (where, bbox))
    if not is_real(area):
        raise ValueError('%s has area %r, expected a number' % (where, area))
    if annotation.get('category_id') not in index:
        raise ValueError('%s has category_id %r, not one of the file\'s categories'
                         % (where, annotation.get('category_id')))
    return bbox, area, where


def _detection_label(objects, entry, index, source, min_object_area, use_crowd):
    """``(label fields or None, class of each row, crowd rows)`` as ``COCODetection``
    computes its label: boxes to corners (width - 1), clipped to the image less one
    pixel; objects too small, ignored, crowds (unless ``use_crowd``) or of no area left
    out. The numpy operations are gluoncv's, so the values and their types are too."""
    width, height = entry['width'], entry['height']
    rows, names, crowd = [], [], 0
    for obj in objects:
        (x, y, w, h), area, _ = _checked(obj, index, source)
        if area < min_object_area or obj.get('ignore', 0) == 1:
            continue
        if not use_crowd and obj.get('iscrowd', 0):
            continue
        x2, y2 = x + np.maximum(w - 1, 0), y + np.maximum(h - 1, 0)
        x1, y1, x2, y2 = (np.minimum(limit - 1, np.maximum(0, value)) for limit, value in
                          ((width, x), (height, y), (width, x2), (height, y2)))
        if area > 0 and x2 > x1 and y2 > y1:
            rows.append([x1, y1, x2, y2, index[obj['category_id']]])
            names.append(index[obj['category_id']])
            crowd += bool(obj.get('iscrowd', 0))
    return (label_fields(rows) if rows else None), names, crowd


def _instance_label(objects, entry, index, source, min_object_area, use_crowd):
    """As :func:`_detection_label`, as ``COCOInstance`` computes its label (float32, boxes
    to corners clipped to the image; ignored objects and crowds left out, and those whose
    area is not above ``min_object_area`` or whose box is under 4 pixels) and polygons."""
    width, height = entry['width'], entry['height']
    rows, names, polygons = [], [], []
    for obj in objects:
        if obj.get('ignore', 0) == 1 or obj.get('iscrowd', 0) == 1:
            continue
        (x1, y1, w, h), area, where = _checked(obj, index, source)
        x2, y2 = x1 + np.maximum(0, w), y1 + np.maximum(0, h)
        x1, y1, x2, y2 = (np.minimum(limit, np.maximum(0, value)) for limit, value in
                          ((width, x1), (height, y1), (width, x2), (height, y2)))
        if area > min_object_area and x2 > x1 and y2 > y1 and (x2 - x1) * (y2 - y1) >= 4:
            rows.append([x1, y1, x2, y2, index[obj['category_id']]])
            names.append(index[obj['category_id']])
            polygons.append(_polygons(obj.get('segmentation'), where))
    if not rows:
        return None, names, 0
    return dict(label_fields(rows, 'float32'), segm=polygons), names, 0


def _polygons(segmentation, where):
    """The polygons gluoncv keeps of a segmentation: those of 6 coordinates or more."""
    if not isinstance(segmentation, list) or not all(
            isinstance(p, list) and all(map(is_real, p)) for p in segmentation):
        raise ValueError('%s has segmentation %s, expected polygons (lists of coordinates; '
                         'gluoncv cannot use a run-length encoding but for crowds)'
                         % (where, _short(segmentation)))
    kept = [polygon for polygon in segmentation if len(polygon) >= 6]
    odd = [polygon for polygon in kept if len(polygon) % 2]
    if odd:
        raise ValueError('%s has a polygon of %d coordinates, expected x, y pairs'
                         % (where, len(odd[0])))
    return kept
