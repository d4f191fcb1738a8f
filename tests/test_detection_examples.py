"""The small VOC and COCO datasets of ``detection_example``: gluoncv's datasets read them,
they hold the cases they promise, and a seed writes the same bytes."""
import json
import os

import numpy as np
import pytest
from gluoncv.data import COCODetection, COCOInstance, VOCDetection
from PIL import Image

from gluonbatch.detection import make_coco_example, make_voc_example
from gluonbatch.detection.sources import COCO_CATEGORIES, VOC_CLASSES


def _tree(root):
    """Every file under ``root`` with its bytes."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, 'rb') as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


def test_voc_example_is_read_by_gluoncv_with_valid_boxes(tmp_path):
    root = make_voc_example(str(tmp_path), num_images=6, splits=[(2007, 'trainval'),
                                                                 '2012:val'],
                            size=(96, 64), seed=3)
    assert root == str(tmp_path)
    for split in ((2007, 'trainval'), (2012, 'val')):
        ds = VOCDetection(root, splits=[split])
        assert len(ds) == 6
        for image, label in ds:
            assert image.shape == (64, 96, 3)
            assert 2 <= len(label) <= 8 and label.dtype == np.float64
            # every box passed gluoncv's check: none was dropped
            assert ((label[:, 0] >= 0) & (label[:, 2] <= 96) & (label[:, 3] <= 64)).all()
    listed = (tmp_path / 'VOC2012' / 'ImageSets' / 'Main' / 'val.txt').read_text().split()
    assert listed == ['%06d' % n for n in range(1, 7)]
    with Image.open(tmp_path / 'VOC2007' / 'JPEGImages' / '000001.jpg') as picture:
        assert picture.format == 'JPEG' and picture.size == (96, 64)


def test_voc_example_has_difficult_objects_and_all_classes_in_use(tmp_path):
    root = make_voc_example(str(tmp_path), num_images=40, size=(64, 48))
    labels = np.concatenate([label for _, label in VOCDetection(root, splits=[(2007,
                                                                               'trainval')])])
    assert 0 < labels[:, 5].sum() < len(labels) / 3
    assert set(labels[:, 4].astype(int)) == set(range(len(VOC_CLASSES)))


def test_coco_example_holds_the_promised_cases(tmp_path, capsys):
    root = make_coco_example(str(tmp_path), split='instances_val2017', num_images=5,
                             sizes=[(80, 60)], seed=1)
    with open(tmp_path / 'annotations' / 'instances_val2017.json') as handle:
        coco = json.load(handle)
    assert [(c['id'], c['name'], c['supercategory']) for c in coco['categories']] == \
        list(COCO_CATEGORIES)
    ids = [image['id'] for image in coco['images']]
    assert sorted(ids) != ids or len(ids) < 2  # listed out of id order
    first, second, third = sorted(ids)[:3]
    by_image = {}
    for annotation in coco['annotations']:
        by_image.setdefault(annotation['image_id'], []).append(annotation)
    assert second not in by_image
    assert sum(a['iscrowd'] for a in by_image[first]) == 1
    assert all(isinstance(v, int) for a in by_image[third] for v in a['bbox'])
    for image in coco['images']:
        assert image['coco_url'] == 'http://images.cocodataset.org/val2017/' + \
            image['file_name']
        assert os.path.isfile(tmp_path / 'val2017' / image['file_name'])
    detection = COCODetection(root, splits='instances_val2017')
    instance = COCOInstance(root, splits='instances_val2017')
    assert len(detection) == len(instance) == 4  # the image without objects is skipped
    # the tiny box counts for detection, not for instances (nor does the crowd)
    assert len(detection[0][1]) == len(instance[0][1]) + 2
    assert detection[1][1].dtype == np.int64  # whole-number boxes: gluoncv's label is int
    capsys.readouterr()  # pycocotools' messages


@pytest.mark.parametrize('make', [
    lambda root, seed: make_voc_example(root, num_images=3, size=(48, 32), seed=seed),
    lambda root, seed: make_coco_example(root, num_images=3, sizes=[(48, 32)], seed=seed)],
    ids=['voc', 'coco'])
def test_a_seed_writes_the_same_bytes(tmp_path, make):
    one, two, other = (_tree(make(str(tmp_path / name), seed))
                       for name, seed in (('a', 5), ('b', 5), ('c', 6)))
    assert one == two
    assert one != other


@pytest.mark.parametrize('call, error, message', [
    (lambda root: make_voc_example(root, size=(8, 8)), ValueError, 'at least 16 pixels'),
    (lambda root: make_voc_example(root, size=500), TypeError, 'size must be'),
    (lambda root: make_voc_example(root, splits=['2007']), ValueError, "'YEAR:NAME'"),
    (lambda root: make_voc_example(root, num_images=-1), ValueError, 'num_images'),
    (lambda root: make_coco_example(root, split='../x'), ValueError, 'COCO split'),
    (lambda root: make_coco_example(root, sizes=[]), TypeError, 'sizes'),
])
def test_bad_arguments_are_refused_before_writing(tmp_path, call, error, message):
    with pytest.raises(error, match=message):
        call(str(tmp_path / 'root'))
    assert not (tmp_path / 'root').exists()
