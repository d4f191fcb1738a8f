"""Small Pascal VOC and COCO datasets in the layouts gluoncv reads, with real JPEG files:
for examples, tests and benchmarks of the converters (:func:`~gluonbatch.detection.from_voc`,
:func:`~gluonbatch.detection.from_coco`).

The images are smooth random colours with a filled rectangle per box, so a picture of a
batch shows where the boxes are. The same arguments write the same files, byte for byte.
Needs Pillow.
"""
import io
import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Sequence

import numpy as np

from .._core.checks import check_int, described, is_int
from .._core.typing import PathLike
from .sources import COCO_CATEGORIES, VOC_CLASSES, VocSplit, coco_split, voc_splits

__all__ = ['make_voc_example', 'make_coco_example']

_POSES = ('Unspecified', 'Left', 'Right', 'Frontal', 'Rear')


def make_voc_example(root: PathLike, num_images: int = 8,
                     splits: VocSplit | Sequence[VocSplit] = ((2007, 'trainval'),
                                                              (2012, 'trainval')),
                     size: tuple[int, int] = (500, 375), seed: int = 0,
                     quality: int = 90) -> str:
    """Write a small Pascal VOC dataset under ``root`` in gluoncv's layout; returns ``root``.

    Per split, ``num_images`` images ``<folder>/JPEGImages/<id>.jpg`` (ids ``000001``,
    ``000002``, ... counted per folder), their annotations ``<folder>/Annotations/<id>.xml``
    (size; per object its name among VOC's 20 classes, pose, truncated, difficult, and a
    1-based box inside the image; 2 to 8 objects, about one in seven difficult) and the
    list ``<folder>/ImageSets/Main/<name>.txt``. Files of the same names are overwritten.

    Parameters
    ----------
    root : str or os.PathLike
        The dataset's root (gluoncv's ``root``), made if missing.
    num_images : int, default 8
        Images per split.
    splits : sequence, default ((2007, 'trainval'), (2012, 'trainval'))
        The splits to write, as gluoncv's ``VOCDetection`` takes them (or ``'2007:test'``);
        the default is its default.
    size : (int, int), default (500, 375)
        Every image's width and height.
    seed : int, default 0
    quality : int, default 90
        JPEG quality.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_voc_example(tmp.name, num_images=3, size=(64, 48))
    >>> sorted(os.listdir(os.path.join(root, 'VOC2012', 'JPEGImages')))
    ['000001.jpg', '000002.jpg', '000003.jpg']
    >>> from gluoncv.data import VOCDetection
    >>> dataset = VOCDetection(root)  # gluoncv's default splits: 2007 and 2012 trainval
    >>> image, label = dataset[0]
    >>> len(dataset), image.shape, label.shape[1]
    (6, (48, 64, 3), 6)
    >>> tmp.cleanup()
    """
    num_images = check_int(num_images, 'num_images', minimum=0)
    width, height = _size(size, 'size')
    rng = np.random.default_rng(check_int(seed, 'seed'))
    quality = check_int(quality, 'quality', minimum=1)
    root = os.fspath(root)
    counts: dict[str, int] = {}  # images written per folder
    for _, folder, name in voc_splits(splits):
        base = os.path.join(root, folder)
        for sub in ('JPEGImages', 'Annotations', os.path.join('ImageSets', 'Main')):
            os.makedirs(os.path.join(base, sub), exist_ok=True)
        ids = []
        for _ in range(num_images):
            counts[folder] = counts.get(folder, 0) + 1
            image_id = '%06d' % counts[folder]
            objects = [_voc_object(rng, width, height) for _ in range(int(rng.integers(2, 9)))]
            boxes = [(obj['bndbox'][0] - 1, obj['bndbox'][1] - 1, obj['bndbox'][2],
                      obj['bndbox'][3]) for obj in objects]
            with open(os.path.join(base, 'JPEGImages', image_id + '.jpg'), 'wb') as handle:
                handle.write(_jpeg(rng, width, height, boxes, quality))
            _write_voc_xml(os.path.join(base, 'Annotations', image_id + '.xml'), folder,
                           image_id, width, height, objects)
            ids.append(image_id)
        with open(os.path.join(base, 'ImageSets', 'Main', name + '.txt'), 'w') as handle:
            handle.write(''.join(image_id + '\n' for image_id in ids))
    return root


def _size(size, name):
    if not isinstance(size, (list, tuple)) or len(size) != 2 or not all(map(is_int, size)):
        raise TypeError('%s must be (width, height), two ints, got %r' % (name, size))
    if min(size) < 16:
        raise ValueError('%s must be at least 16 pixels each way, got %r' % (name, size))
    return int(size[0]), int(size[1])


def _voc_object(rng, width, height):
    """One object: a class, and a 1-based box inside the image (gluoncv's rule)."""
    box_w = int(rng.integers(8, max(9, width // 2)))
    box_h = int(rng.integers(8, max(9, height // 2)))
    xmin = int(rng.integers(1, width - box_w + 2))
    ymin = int(rng.integers(1, height - box_h + 2))
    return {'name': VOC_CLASSES[int(rng.integers(len(VOC_CLASSES)))],
            'pose': _POSES[int(rng.integers(len(_POSES)))],
            'truncated': int(rng.random() < 0.3), 'difficult': int(rng.random() < 0.15),
            'bndbox': (xmin, ymin, xmin + box_w - 1, ymin + box_h - 1)}


def _write_voc_xml(path, folder, image_id, width, height, objects):
    top = ET.Element('annotation')

    def add(parent, tag, text=None):
        child = ET.SubElement(parent, tag)
        if text is not None:
            child.text = str(text)
        return child
    add(top, 'folder', folder)
    add(top, 'filename', image_id + '.jpg')
    add(add(top, 'source'), 'database', 'gluonbatch example')
    size = add(top, 'size')
    for tag, value in (('width', width), ('height', height), ('depth', 3)):
        add(size, tag, value)
    add(top, 'segmented', 0)
    for obj in objects:
        element = add(top, 'object')
        for tag in ('name', 'pose', 'truncated', 'difficult'):
            add(element, tag, obj[tag])
        box = add(element, 'bndbox')
        for tag, value in zip(('xmin', 'ymin', 'xmax', 'ymax'), obj['bndbox']):
            add(box, tag, value)
    tree = ET.ElementTree(top)
    ET.indent(tree, '\t')
    tree.write(path, encoding='utf-8')


def _jpeg(rng, width, height, boxes, quality):
    """A JPEG: smooth random colours, a rectangle of its own colour per ``(x0, y0, x1,
    y1)`` box (0-based, end exclusive)."""
    from PIL import Image, ImageDraw

    coarse = rng.integers(0, 256, (4, 4, 3), dtype=np.uint8)
    picture = Image.fromarray(coarse).resize((width, height), Image.BILINEAR)
    draw = ImageDraw.Draw(picture)
    for x0, y0, x1, y1 in boxes:
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        draw.rectangle([int(x0), int(y0), int(np.ceil(x1)) - 1, int(np.ceil(y1)) - 1],
                       fill=colour, outline=(0, 0, 0))
    encoded = io.BytesIO()
    picture.save(encoded, 'JPEG', quality=quality)
    return encoded.getvalue()


def make_coco_example(root: PathLike, split: str = 'train2017', num_images: int = 8,
                      sizes: Sequence[tuple[int, int]] = ((640, 480), (480, 640), (640, 427)),
                      seed: int = 0, quality: int = 90) -> str:
    """Write a small COCO dataset under ``root`` in gluoncv's layout; returns ``root``.

    ``root/annotations/instances_<split>.json`` holds COCO 2017's 80 categories (their real
    ids), the images (``id``, ``file_name``, ``width``, ``height``, ``coco_url``; listed
    out of id order) and 1 to 6 annotations per image (``bbox`` as x, y, width, height,
    ``area``, ``iscrowd``, polygon ``segmentation``; listed interleaved across images);
    ``root/<split>/<file_name>`` are the JPEGs. Among them, as in COCO: the first image has
    a crowd object (run-length ``segmentation``), a tiny box (that gluoncv's instance
    dataset drops), an object partly outside the image and a polygon too short to count;
    the second has no annotations; the third only boxes of whole numbers.

    Parameters
    ----------
    root : str or os.PathLike
        The dataset's root (gluoncv's ``root``), made if missing.
    split : str, default 'train2017'
        The split: ``'train2017'`` or gluoncv's ``'instances_train2017'``.
    num_images : int, default 8
    sizes : sequence of (int, int)
        The (width, height) each image takes one of, at random.
    seed : int, default 0
    quality : int, default 90
        JPEG quality.

    Examples
    --------
    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_coco_example(tmp.name, num_images=4, sizes=[(64, 48)])
    >>> sorted(os.listdir(root)), len(os.listdir(os.path.join(root, 'train2017')))
    (['annotations', 'train2017'], 4)
    >>> with open(os.path.join(root, 'annotations', 'instances_train2017.json')) as handle:
    ...     coco = json.load(handle)
    >>> [c['id'] for c in coco['categories']][-3:], [c['name'] for c in coco['categories']][:2]
    ([88, 89, 90], ['person', 'bicycle'])
    >>> sorted({a['image_id'] for a in coco['annotations']}) == sorted(
    ...     i['id'] for i in coco['images'])  # one image has no annotations
    False
    >>> tmp.cleanup()
    """
    folder, stem = coco_split(split)
    num_images = check_int(num_images, 'num_images', minimum=0)
    if not isinstance(sizes, (list, tuple)) or not sizes:
        raise TypeError('sizes must be a non-empty list of (width, height), got %s'
                        % described(sizes))
    sizes = [_size(size, 'each of sizes') for size in sizes]
    rng = np.random.default_rng(check_int(seed, 'seed'))
    quality = check_int(quality, 'quality', minimum=1)
    root = os.fspath(root)
    for sub in ('annotations', folder):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    ids = sorted(int(n) + 1 for n in rng.choice(600000, num_images, replace=False))
    images, per_image = [], []
    for number, image_id in enumerate(ids):
        width, height = sizes[int(rng.integers(len(sizes)))]
        file_name = '%012d.jpg' % image_id
        images.append({'license': 1, 'file_name': file_name,
                       'coco_url': 'http://images.cocodataset.org/%s/%s' % (folder, file_name),
                       'height': height, 'width': width, 'id': image_id})
        objects = _coco_objects(rng, number, width, height)
        per_image.append([dict(obj, image_id=image_id) for obj in objects])
        boxes = [(x, y, x + w, y + h) for x, y, w, h in (obj['bbox'] for obj in objects)]
        with open(os.path.join(root, folder, file_name), 'wb') as handle:
            handle.write(_jpeg(rng, width, height, boxes, quality))
    annotations = _interleaved(per_image)
    for number, annotation in enumerate(annotations):
        annotation['id'] = 900000 + number
    document = {'info': {'description': 'gluonbatch example', 'version': '1.0'},
                'licenses': [{'id': 1, 'name': 'example'}],
                'images': [images[k] for k in rng.permutation(len(images)).tolist()],
                'annotations': annotations,
                'categories': [{'supercategory': supercategory, 'id': category_id,
                                'name': name}
                               for category_id, name, supercategory in COCO_CATEGORIES]}
    with open(os.path.join(root, 'annotations', stem + '.json'), 'w') as handle:
        json.dump(document, handle)
    return root


def _coco_objects(rng, number, width, height):
    """The annotations (without ids) of image ``number``: the special cases of the first
    three images (see :func:`make_coco_example`), random objects otherwise."""
    if number == 1:
        return []
    whole = number == 2
    objects = [_polygon_object(rng, width, height, whole)
               for _ in range(int(rng.integers(1, 7)))]
    if number == 0:
        x, y = round(width * 0.1, 2), round(height * 0.1, 2)
        objects += [
            _crowd_object(rng, width, height),
            _object(rng, [[x, y, x + 1.8, y, x + 1.8, y + 1.6, x, y + 1.6]]),  # tiny
            _object(rng, [[width * 0.6, height * 0.6, width + 7.5, height * 0.6,
                           width + 7.5, height + 3.25, width * 0.6, height + 3.25]]),  # outside
        ]
        objects[0]['segmentation'].append([1.0, 1.0, 2.0, 2.0])  # too short: not a polygon
    return objects


def _polygon_object(rng, width, height, whole):
    """An object with an octagon (two, sometimes) inside the image; with ``whole`` its
    polygon has whole-number corners, so its box is whole numbers too."""
    box_w, box_h = rng.uniform(0.1, 0.5) * width, rng.uniform(0.1, 0.5) * height
    x0, y0 = rng.uniform(0, width - box_w), rng.uniform(0, height - box_h)
    angles = np.arange(8) * np.pi / 4
    points = np.stack([x0 + box_w / 2 * (1 + np.cos(angles)),
                       y0 + box_h / 2 * (1 + np.sin(angles))], axis=1)
    points = np.round(points) if whole else np.round(points, 2)
    polygons = [points.ravel().tolist()]
    if not whole and rng.random() < 0.3:  # a second, small part
        polygons.append(np.round(points[::2] * 0.98 + 1, 2).ravel().tolist())
    obj = _object(rng, polygons)
    if whole:
        obj['bbox'] = [int(v) for v in obj['bbox']]
    return obj


def _object(rng, polygons):
    """A non-crowd annotation of ``polygons``: its box and area from its points."""
    points = np.concatenate([np.reshape(p, (-1, 2)) for p in polygons if len(p) >= 6])
    low, high = points.min(axis=0), points.max(axis=0)
    area = sum(_shoelace(np.reshape(p, (-1, 2))) for p in polygons if len(p) >= 6)
    return {'segmentation': [list(map(float, p)) for p in polygons], 'area': round(area, 4),
            'iscrowd': 0, 'bbox': [round(float(v), 2) for v in (*low, *(high - low))],
            'category_id': COCO_CATEGORIES[int(rng.integers(len(COCO_CATEGORIES)))][0]}


def _shoelace(points):
    x, y = points[:, 0], points[:, 1]
    return float(abs(np.dot(x, np.roll(y, 1)) - np.dot(y, np.roll(x, 1))) / 2)


def _crowd_object(rng, width, height):
    """A crowd: a rectangle as COCO's uncompressed run-length encoding (column major,
    runs of zeros and ones in turn, starting with zeros)."""
    x0, y0 = int(width * 0.2), int(height * 0.3)
    x1, y1 = int(width * 0.7), int(height * 0.8)
    mask = np.zeros((height, width), bool)
    mask[y0:y1, x0:x1] = True
    flat = mask.ravel(order='F')
    edges = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    counts = np.diff(np.concatenate([[0], edges, [flat.size]])).tolist()
    if flat[0]:
        counts.insert(0, 0)
    return {'segmentation': {'counts': counts, 'size': [height, width]},
            'area': int(mask.sum()), 'iscrowd': 1,
            'bbox': [float(x0), float(y0), float(x1 - x0), float(y1 - y0)],
            'category_id': COCO_CATEGORIES[int(rng.integers(len(COCO_CATEGORIES)))][0]}


def _interleaved(per_image):
    """The annotations of all images, taken in turn from each image's list (as in COCO's
    files, an image's annotations are not together), each image's in its own order."""
    queues = [list(objects) for objects in per_image]
    merged = []
    while any(queues):
        for queue in queues:
            if queue:
                merged.append(queue.pop(0))
    return merged
