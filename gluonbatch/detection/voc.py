"""Pascal VOC on disk (gluoncv's layout) to detection shards:
:func:`~gluonbatch.detection.from_voc`."""
import logging
import math
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Literal

from .._core.checks import check_choice, check_int, described, is_int
from .convert import (Record, caption, destination, label_fields, show_progress, source_root, write_dataset)
from .annotations import encode_annotations
from .._core.typing import PathLike
from .sources import VOC_CLASSES, VocSplit, voc_splits
from .._core.console import counted, stage_named

__all__ = ['from_voc']

_LOG = logging.getLogger(__name__)
_BOX = ('xmin', 'ymin', 'xmax', 'ymax')


def from_voc(root: PathLike, dst: PathLike,
             splits: VocSplit | Sequence[VocSplit] = ((2007, 'trainval'), (2012, 'trainval')),
             classes: Sequence[str] | None = None, index_map: Mapping[str, int] | None = None,
             samples_per_shard: int = 1000, invalid_boxes: Literal['error', 'drop'] = 'error',
             progress: bool | None = None) -> str:
    """Convert Pascal VOC, as gluoncv reads it from ``root``, into detection shards in
    ``dst``: record ``i`` is item ``i`` of gluoncv's ``VOCDetection(root, splits,
    index_map=index_map)``.

    Records follow the splits in the order given and each split's list
    (``<folder>/ImageSets/Main/<name>.txt``) line by line. A record holds the image file's
    bytes, a caption of its class names and its annotations
    (:mod:`~gluonbatch.detection.annotations`): gluoncv's float64 label (rows ``xmin - 1,
    ymin - 1, xmax - 1, ymax - 1, class, difficult`` of the objects named in ``classes``) and
    every object of the XML as written there. The parquet columns are ``key``, ``image_id``
    (``'VOC2007/000005'``), ``file_name``, ``width``, ``height``, ``num_objects``, ``classes``
    and ``difficult``. Every annotation is checked and every image looked for before anything
    is written, and the shards and ``detection.json`` appear together or, if the run fails or
    is killed, not at all.

    Parameters
    ----------
    root : str or os.PathLike
        gluoncv's ``root``: the directory holding ``VOC2007``, ``VOC2012``, ...
    dst : str or os.PathLike
        The new dataset's directory, made if missing; it may not hold shards or a
        manifest already.
    splits : sequence, default ((2007, 'trainval'), (2012, 'trainval'))
        As gluoncv's: ``(year, list name)`` (an int year is the folder ``VOC<year>``) or
        ``(folder, list name)``; also ``'2007:trainval'``.
    classes : sequence of str, optional
        The class names, lower case, in label order; default VOC's 20 (gluoncv's).
    index_map : dict, optional
        Class name -> label class id, as gluoncv's ``index_map``; default each class's
        position in ``classes``.
    samples_per_shard : int, default 1000
    invalid_boxes : {'error', 'drop'}, default 'error'
        A box that gluoncv's check refuses (``0 <= xmin - 1 < width``, ``0 <= ymin - 1 <
        height``, ``xmin < xmax <= width + 1``, ``ymin < ymax <= height + 1``): ``'error'``
        raises a ValueError naming it, ``'drop'`` leaves it out of the label with a logged
        warning, as gluoncv does.
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
        No ``root``, or a split's list, an annotation file or an image is missing (named).
    NotADirectoryError
        ``dst`` is a file.
    ValueError
        A file that cannot be read as a VOC annotation, an invalid box (with
        ``invalid_boxes='error'``), no image at all, or a ``dst`` that holds a dataset;
        the message names the file and the object.

    Examples
    --------
    >>> import json, tempfile
    >>> from gluonbatch.detection import make_voc_example
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_voc_example(tmp.name + '/voc', num_images=5, size=(64, 48))
    >>> path = from_voc(root, tmp.name + '/shards', splits=['2007:trainval'],
    ...                 samples_per_shard=2)
    >>> sorted(name for name in os.listdir(path) if name.endswith('.tar'))
    ['00000.tar', '00001.tar', '00002.tar']
    >>> with open(os.path.join(path, 'detection.json')) as handle:
    ...     manifest = json.load(handle)
    >>> manifest['source'], manifest['shards'], manifest['classes'][:2]
    ('voc', [['00000', 2], ['00001', 2], ['00002', 1]], ['aeroplane', 'bicycle'])
    >>> tmp.cleanup()
    """
    what = 'from_voc'
    root = source_root(root)
    listed = voc_splits(splits)
    classes, index_map = _classes(classes, index_map)
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    invalid_boxes = check_choice(invalid_boxes, 'invalid_boxes', ('error', 'drop'))
    show = show_progress(progress)
    path = destination(dst, what)
    items = _listed(root, listed)
    index = set(classes)
    with stage_named('reading annotations'):
        records = [_record(root, folder, image_id, index, index_map, invalid_boxes)
                   for folder, image_id in counted(items, what, 'image', show)]
    options = {'splits': [[given, name] for given, _, name in listed],
               'invalid_boxes': invalid_boxes, 'samples_per_shard': samples_per_shard}
    return write_dataset(records, path, what, samples_per_shard, show, source='voc',
                         classes=classes, index_map=index_map, options=options)


def _classes(classes, index_map):
    """``(classes, index_map)`` checked, with their defaults (gluoncv's: an empty
    ``index_map`` is none)."""
    if classes is None:
        classes = list(VOC_CLASSES)
    elif isinstance(classes, str) or not isinstance(classes, (list, tuple)):
        raise TypeError('classes must be a list of class names, got %s' % described(classes))
    classes = list(classes)
    for name in classes:
        if not isinstance(name, str):
            raise TypeError('classes must be names (str), got %r in %r' % (name, classes))
        if not name or name != name.strip().lower():
            raise ValueError('class %r would never match: the names in the XML files are '
                             'stripped and lower-cased before they are looked up' % name)
    if not classes or len(set(classes)) != len(classes):
        raise ValueError('classes must be distinct names, at least one, got %r' % classes)
    if not index_map:
        return classes, {name: number for number, name in enumerate(classes)}
    if not isinstance(index_map, dict):
        raise TypeError('index_map must be a dict (class name -> label class id), got %s'
                        % described(index_map))
    missing = [name for name in classes if name not in index_map]
    if missing:
        raise ValueError('index_map has no label class id for %s %s' % (
            'class' if len(missing) == 1 else 'classes', missing))
    wrong = [(name, value) for name, value in index_map.items()
             if not isinstance(name, str) or not is_int(value)]
    if wrong:
        raise TypeError('index_map maps class names (str) to label class ids (int), got '
                        '%r: %r' % wrong[0])
    return classes, {name: int(value) for name, value in index_map.items()}


def _listed(root, splits):
    """``[(folder, image id), ...]``: every split's list, in order."""
    items = []
    for given, folder, name in splits:
        listing = os.path.join(root, folder, 'ImageSets', 'Main', name + '.txt')
        try:
            with open(listing, encoding='utf-8') as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            raise FileNotFoundError('split %r: no image list %s%s' % (
                '%s:%s' % (given, name), listing, _splits_there(root, splits))) from None
        except UnicodeDecodeError as err:
            raise ValueError('%s is not a text file: %s' % (listing, err)) from None
        items += [(folder, line.strip()) for line in lines if line.strip()]
    return items


def _splits_there(root, splits):
    """A hint naming those of ``splits`` whose image list ``root`` has (a VOC2007-only root
    asked for the default splits, say), or ``''``."""
    there = ['%s:%s' % (given, name) for given, folder, name in splits
             if os.path.isfile(os.path.join(root, folder, 'ImageSets', 'Main', name + '.txt'))]
    return '; to convert the splits it has, pass splits=%r' % there if there else ''


def _record(root, folder, image_id, classes, index_map, invalid_boxes):
    """The :class:`~gluonbatch.detection.convert.Record` of one listed image."""
    xml_path = os.path.join(root, folder, 'Annotations', image_id + '.xml')
    image_path = os.path.join(root, folder, 'JPEGImages', image_id + '.jpg')
    if not os.path.isfile(image_path):
        raise FileNotFoundError('no image file %s (image %s/%s)' % (image_path, folder,
                                                                     image_id))
    try:
        top = ET.parse(xml_path).getroot()
    except FileNotFoundError:
        raise FileNotFoundError('no annotation file %s (image %s/%s)' % (
            xml_path, folder, image_id)) from None
    except ET.ParseError as err:
        raise ValueError('%s is not valid XML: %s' % (xml_path, err)) from None
    size = top.find('size')
    width, height = (_number(size, tag, xml_path, 'its size', finite=True)
                     for tag in ('width', 'height'))
    rows, names, objects = [], [], []
    for number, element in enumerate(top.iter('object')):
        objects.append(_raw_object(element))
        row = _label_row(element, number, xml_path, width, height, classes, index_map,
                         invalid_boxes)
        if row is not None:
            rows.append(row)
            names.append(element.find('name').text.strip().lower())
    annotations = dict(label_fields(rows), image={
        'id': image_id, 'folder': folder, 'file_name': image_id + '.jpg',
        'width': _as_written(size.find('width')), 'height': _as_written(size.find('height'))},
        objects=objects)
    row = {'image_id': '%s/%s' % (folder, image_id), 'file_name': image_id + '.jpg',
           'width': annotations['image']['width'], 'height': annotations['image']['height'],
           'num_objects': len(rows), 'classes': sorted(set(names)),
           'difficult': sum(1 for r in rows if r[5])}
    return Record(image_path, 'jpg', caption(names), encode_annotations(annotations), row)


def _number(parent, tag, xml_path, where, finite=False):
    """The number in ``parent``'s ``tag`` element, as gluoncv reads it (``float``); a
    ``finite`` one (an image size: a box's NaN is checked, and dropped, as gluoncv does)."""
    element = parent.find(tag) if parent is not None else None
    try:
        value = float(element.text)
    except (AttributeError, TypeError, ValueError):
        value = None
    if value is None or (finite and not math.isfinite(value)):
        seen = 'no %s' % tag if element is None else '%s %r' % (tag, element.text)
        raise ValueError('%s: %s has %s, expected a %snumber'
                         % (xml_path, where, seen, 'finite ' if finite else '')) from None
    return value


def _label_row(element, number, xml_path, width, height, classes, index_map, invalid_boxes):
    """The label row of object ``element`` (``number``-th of the file), as gluoncv
    computes it; None for an object it leaves out."""
    name = element.find('name')
    if name is None or name.text is None:
        raise ValueError('%s: object %d (counted from 0) has no name' % (xml_path, number))
    class_name = name.text.strip().lower()
    if class_name not in classes:
        return None
    where = 'object %d (%r, counted from 0)' % (number, class_name)
    box = element.find('bndbox')
    xmin, ymin, xmax, ymax = (_number(box, tag, xml_path, where + "'s box") - 1
                              for tag in _BOX)
    problem = _box_problem(xmin, ymin, xmax, ymax, width, height)
    if problem:
        message = '%s: %s has a box outside its %gx%g image: %s as written (1-based); %s' % (
            xml_path, where, width, height, ', '.join(
                '%s=%s' % (tag, box.find(tag).text.strip()) for tag in _BOX), problem)
        if invalid_boxes == 'error':
            raise ValueError(message + "; gluoncv drops such a box, and so does "
                                       "invalid_boxes='drop'")
        _LOG.warning('dropped: %s', message)
        return None
    return [xmin, ymin, xmax, ymax, index_map[class_name], _difficult(element)]


def _box_problem(xmin, ymin, xmax, ymax, width, height):
    """What gluoncv's check finds wrong with a 0-based box, or None (the first rule
    broken, in its order)."""
    for ok, text in ((0 <= xmin < width, 'xmin - 1 = %g is not in [0, %g)' % (xmin, width)),
                     (0 <= ymin < height, 'ymin - 1 = %g is not in [0, %g)' % (ymin, height)),
                     (xmin < xmax <= width, 'xmax - 1 = %g is not in (%g, %g]'
                      % (xmax, xmin, width)),
                     (ymin < ymax <= height, 'ymax - 1 = %g is not in (%g, %g]'
                      % (ymax, ymin, height))):
        if not ok:
            return text
    return None


def _difficult(element):
    """gluoncv's difficult flag: the int written, 0 when it is not an int (or missing)."""
    found = element.find('difficult')
    try:
        return int(found.text)
    except (AttributeError, TypeError, ValueError):
        return 0


def _as_written(element):
    """The value of ``element`` as written in the file: an int or a finite float when it
    reads as one, else its text (None without the element)."""
    if element is None or element.text is None:
        return None
    text = element.text.strip()
    for kind in (int, float):
        try:
            value = kind(text)
        except ValueError:
            continue
        if math.isfinite(value):
            return value
    return element.text


def _raw_object(element):
    """An object of the XML file as written there."""
    name = element.find('name')
    box = element.find('bndbox')
    return {'name': name.text if name is not None else None,
            'pose': _text(element.find('pose')),
            'truncated': _as_written(element.find('truncated')),
            'difficult': _as_written(element.find('difficult')),
            'bndbox': None if box is None else {tag: _as_written(box.find(tag))
                                                for tag in _BOX}}


def _text(element):
    return None if element is None else element.text
