"""gluonbatch.detection.gluoncv_datasets: gluoncv's detection datasets, decoded faster, item for item the same."""
import os

import gluoncv
import mxnet as mx
import numpy as np
import pytest

from gluonbatch.detection import gluoncv_datasets as datasets
from gluonbatch.detection import make_coco_example, make_voc_example


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp('gluoncv-layouts')
    return (make_voc_example(str(base / 'voc'), num_images=4, seed=6),
            make_coco_example(str(base / 'coco'), num_images=6, seed=7))


def assert_same_items(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for i in range(len(theirs)):
        mine, reference = ours[i], theirs[i]
        assert len(mine) == len(reference)
        assert type(mine[0]) is type(reference[0])
        np.testing.assert_array_equal(mine[0].asnumpy(), reference[0].asnumpy())
        np.testing.assert_array_equal(mine[1], reference[1])
        assert np.asarray(mine[1]).dtype == np.asarray(reference[1]).dtype
        if len(mine) == 3:
            for got, expected in zip(mine[2], reference[2]):
                for got_polygon, polygon in zip(got, expected):
                    np.testing.assert_array_equal(got_polygon, polygon)


@pytest.mark.parametrize('name', ['VOCDetection', 'COCODetection', 'COCOInstance'])
def test_items_equal_gluoncvs(roots, name):
    voc, coco = roots
    options = {'root': voc} if name == 'VOCDetection' else \
        {'root': coco, 'splits': 'instances_train2017'}
    ours = getattr(datasets, name)(**options)
    theirs = getattr(gluoncv.data, name)(**options)
    assert isinstance(ours, getattr(gluoncv.data, name))
    assert_same_items(ours, theirs)
    assert ours.classes == theirs.classes


def test_the_transform_argument_is_applied_as_gluoncv_applies_it(roots):
    def sizes(image, label, *polygons):
        return image.shape, np.shape(label), len(polygons)

    for name in ('COCODetection', 'COCOInstance'):
        options = dict(root=roots[1], splits='instances_train2017', transform=sizes)
        assert [getattr(datasets, name)(**options)[i] for i in range(3)] == \
            [getattr(gluoncv.data, name)(**options)[i] for i in range(3)]
    assert datasets.VOCDetection(roots[0], transform=sizes)[2] == \
        gluoncv.data.VOCDetection(roots[0], transform=sizes)[2]


def test_items_are_fresh_copies(roots):
    ours = datasets.VOCDetection(roots[0])
    first = ours[0][1]
    first[:] = -7
    assert (ours[0][1] != -7).any()


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_a_transform_in_workers_gives_gluoncvs_batches(roots, num_workers):
    from gluoncv.data.batchify import Pad, Stack, Tuple
    from gluoncv.data.transforms.presets.ssd import SSDDefaultValTransform

    def batches(dataset):
        loader = mx.gluon.data.DataLoader(
            dataset.transform(SSDDefaultValTransform(96, 96)), batch_size=3,
            batchify_fn=Tuple(Stack(), Pad(pad_val=-1)), num_workers=num_workers)
        return [[field.asnumpy() for field in batch] for batch in loader]

    ours, theirs = (batches(datasets.VOCDetection(roots[0])),
                    batches(gluoncv.data.VOCDetection(roots[0])))
    assert len(ours) == len(theirs) == 3
    for got, expected in zip(ours, theirs):
        for field, expected_field in zip(got, expected):
            np.testing.assert_array_equal(field, expected_field)


def _broken_copy(root, tmp_path, pattern, cut):
    """A copy of the dataset at ``root`` whose first file matching ``pattern`` is cut to
    ``cut`` bytes; ``(copy, that file)``."""
    import shutil

    copy = tmp_path / 'copy'
    shutil.copytree(root, copy)
    path = sorted(copy.glob(pattern))[0]
    path.write_bytes(path.read_bytes()[:cut])
    return str(copy), str(path)


def _noted(error, path):
    return 'while reading %s' % path in getattr(error, '__notes__', ())


@pytest.mark.parametrize('preload_label', [True, False])
def test_a_broken_xml_keeps_its_error_and_names_the_file(roots, tmp_path, preload_label):
    import xml.etree.ElementTree as ET

    root, xml = _broken_copy(roots[0], tmp_path, 'VOC2007/Annotations/*.xml', 100)
    with pytest.raises(ET.ParseError) as theirs:
        gluoncv.data.VOCDetection(root, preload_label=preload_label)[0]
    with pytest.raises(ET.ParseError) as ours:  # made (preloaded), or read
        datasets.VOCDetection(root, preload_label=preload_label)[0]
    assert str(ours.value) == str(theirs.value) and ours.value.position == theirs.value.position
    assert _noted(ours.value, xml)


@pytest.mark.parametrize('name', ['VOCDetection', 'COCODetection', 'COCOInstance'])
def test_an_empty_image_keeps_its_error_and_names_the_file(roots, tmp_path, name):
    voc, coco = roots
    if name == 'VOCDetection':
        root, image = _broken_copy(voc, tmp_path, 'VOC2007/JPEGImages/*.jpg', 0)
        dataset = datasets.VOCDetection(root)
    else:
        root, image = _broken_copy(coco, tmp_path, 'train2017/*.jpg', 0)
        dataset = getattr(datasets, name)(root, splits='instances_train2017')
    index = [i for i in range(len(dataset)) if image in _image_path(dataset, i)][0]
    with pytest.raises(mx.base.MXNetError, match='empty') as raised:
        dataset[index]
    assert _noted(raised.value, image)


def _image_path(dataset, index):
    if isinstance(dataset, datasets.VOCDetection):
        return dataset._image_path.format(*dataset._items[index])
    return dataset._items[index]


@pytest.mark.parametrize('name', ['COCODetection', 'COCOInstance'])
def test_a_broken_annotation_json_names_the_file(roots, tmp_path, name):
    root, annotations = _broken_copy(roots[1], tmp_path, 'annotations/*.json', 50)
    with pytest.raises(ValueError) as raised:
        getattr(datasets, name)(root, splits='instances_train2017')
    assert _noted(raised.value, annotations)


def test_a_missing_image_is_named_once(roots, tmp_path):
    root, image = _broken_copy(roots[0], tmp_path, 'VOC2007/JPEGImages/*.jpg', 0)
    os.remove(image)
    with pytest.raises(FileNotFoundError) as raised:
        datasets.VOCDetection(root)[0]
    assert image in str(raised.value) and not hasattr(raised.value, '__notes__')
