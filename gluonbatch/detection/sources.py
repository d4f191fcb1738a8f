"""The names of gluoncv's detection sources: Pascal VOC's classes and its splits
(``(2007, 'trainval')`` is the folder ``VOC2007``'s list ``trainval``), COCO's categories and
its splits (``'train2017'`` is ``annotations/instances_train2017.json`` with the images in
``train2017``).

Examples
--------
>>> voc_splits(['2007:trainval', ('VOC2012', 'val')])
[(2007, 'VOC2007', 'trainval'), ('VOC2012', 'VOC2012', 'val')]
>>> coco_split('instances_val2017')
('val2017', 'instances_val2017')
>>> len(VOC_CLASSES), len(COCO_CATEGORIES), COCO_CATEGORIES[-1]
(20, 80, (90, 'toothbrush', 'indoor'))
"""
from collections.abc import Sequence
from typing import TypeAlias

from .._core.checks import described, is_int

__all__ = ['VOC_CLASSES', 'COCO_CATEGORIES', 'voc_splits', 'coco_split']

#: One VOC split: ``(year or folder, list name)``, or ``'YEAR:NAME'``.
VocSplit: TypeAlias = tuple[int | str, str] | str

#: Pascal VOC's 20 classes, in gluoncv's label order.
VOC_CLASSES = ('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus', 'car', 'cat',
               'chair', 'cow', 'diningtable', 'dog', 'horse', 'motorbike', 'person',
               'pottedplant', 'sheep', 'sofa', 'train', 'tvmonitor')

# COCO 2017's categories by supercategory, each as (first id, names): consecutive ids
# from the first, and the numbers COCO skips between the runs
_COCO_RUNS = (
    ('person', 1, ('person',)),
    ('vehicle', 2, ('bicycle', 'car', 'motorcycle', 'airplane', 'bus', 'train', 'truck',
                    'boat')),
    ('outdoor', 10, ('traffic light', 'fire hydrant')),
    ('outdoor', 13, ('stop sign', 'parking meter', 'bench')),
    ('animal', 16, ('bird', 'cat', 'dog', 'horse', 'sheep', 'cow', 'elephant', 'bear',
                    'zebra', 'giraffe')),
    ('accessory', 27, ('backpack', 'umbrella')),
    ('accessory', 31, ('handbag', 'tie', 'suitcase')),
    ('sports', 34, ('frisbee', 'skis', 'snowboard', 'sports ball', 'kite', 'baseball bat',
                    'baseball glove', 'skateboard', 'surfboard', 'tennis racket')),
    ('kitchen', 44, ('bottle',)),
    ('kitchen', 46, ('wine glass', 'cup', 'fork', 'knife', 'spoon', 'bowl')),
    ('food', 52, ('banana', 'apple', 'sandwich', 'orange', 'broccoli', 'carrot', 'hot dog',
                  'pizza', 'donut', 'cake')),
    ('furniture', 62, ('chair', 'couch', 'potted plant', 'bed')),
    ('furniture', 67, ('dining table',)),
    ('furniture', 70, ('toilet',)),
    ('electronic', 72, ('tv', 'laptop', 'mouse', 'remote', 'keyboard', 'cell phone')),
    ('appliance', 78, ('microwave', 'oven', 'toaster', 'sink', 'refrigerator')),
    ('indoor', 84, ('book', 'clock', 'vase', 'scissors', 'teddy bear', 'hair drier',
                    'toothbrush')),
)
#: COCO 2017's 80 categories as ``(id, name, supercategory)``, in id order (which is
#: gluoncv's label order: label class ``k`` is the ``k``-th category).
COCO_CATEGORIES = tuple((first + offset, name, supercategory)
                        for supercategory, first, names in _COCO_RUNS
                        for offset, name in enumerate(names))


def voc_splits(splits: VocSplit | Sequence[VocSplit]) -> list[tuple[int | str, str, str]]:
    """``splits`` checked, as ``[(given, folder, list name), ...]``.

    A split is ``(year or folder, list name)`` or the string ``'YEAR:NAME'``. As gluoncv:
    an int year is the folder ``VOC<year>``, any other folder name is used as it is; in the
    string form a year of digits counts as an int. ``splits`` may also be one string.

    >>> voc_splits('2012:train')
    [(2012, 'VOC2012', 'train')]
    >>> voc_splits([(2007, 'test'), ('VOCdevkit/VOC2007', 'val')])[1]
    ('VOCdevkit/VOC2007', 'VOCdevkit/VOC2007', 'val')
    >>> voc_splits(['2007-trainval'])
    Traceback (most recent call last):
    ...
    ValueError: a VOC split is (year, name), (folder, name) or 'YEAR:NAME', got '2007-trainval'
    """
    if isinstance(splits, str):
        splits = [splits]
    if not isinstance(splits, (list, tuple)):
        raise TypeError('splits must be a list of (year, name) pairs or \'YEAR:NAME\' '
                        'strings, got %s' % described(splits))
    if not splits:
        raise ValueError('splits is empty: name at least one, such as (2007, \'trainval\')')
    return [_voc_split(split) for split in splits]


def _voc_split(split):
    if isinstance(split, str):
        folder, colon, name = split.rpartition(':')
        if not colon or not folder or not name:
            raise ValueError("a VOC split is (year, name), (folder, name) or 'YEAR:NAME', "
                             "got %r" % split)
        given = int(folder) if folder.isdigit() and folder.isascii() else folder
    elif isinstance(split, (list, tuple)) and len(split) == 2:
        given, name = split
    else:
        raise TypeError("a VOC split is (year, name), (folder, name) or 'YEAR:NAME', got %r"
                        % (split,))
    if is_int(given):
        given, folder = int(given), 'VOC%d' % given
    elif isinstance(given, str) and given:
        folder = given
    else:
        raise TypeError('the year or folder of VOC split %r must be an int or a folder name, '
                        'got %s' % (split, described(given)))
    if not isinstance(name, str) or not name:
        raise TypeError('the list name of VOC split %r must be a non-empty str (such as '
                        "'trainval'), got %r" % (split, name))
    return given, folder, name


def coco_split(split: str) -> tuple[str, str]:
    """``(image folder, annotation file stem)`` of COCO split ``split``: ``'train2017'`` or
    gluoncv's ``'instances_train2017'``.

    >>> coco_split('train2017')
    ('train2017', 'instances_train2017')
    """
    if not isinstance(split, str):
        raise TypeError("split must be a str such as 'train2017', got %s" % described(split))
    folder = split[len('instances_'):] if split.startswith('instances_') else split
    if not folder or '/' in folder or folder in ('.', '..'):
        raise ValueError("split must name a COCO split such as 'train2017' or "
                         "'instances_train2017', got %r" % split)
    return folder, 'instances_' + folder
