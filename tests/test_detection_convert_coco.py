"""from_coco: the shards hold gluoncv's COCODetection or COCOInstance items, record for
record (order, image bytes, label values and dtype, polygons), with the source's
annotations, parquet columns and a manifest; every bad input is refused before anything
is written."""
import json
import os
import shutil

import numpy as np
import pytest
from gluoncv.data import COCODetection, COCOInstance

from gluonbatch.detection import from_coco, make_coco_example
from gluonbatch.shards import verify
from gluonbatch.detection.sources import COCO_CATEGORIES

from converted import assert_same_label, keys, label_of, read_back, tree

ANNOTATIONS = os.path.join('annotations', 'instances_val2017.json')


@pytest.fixture(scope='module')
def coco_root(tmp_path_factory):
    return make_coco_example(str(tmp_path_factory.mktemp('coco')), split='val2017',
                             num_images=9, sizes=[(96, 72), (72, 96)], seed=4)


def _source(root):
    with open(os.path.join(root, ANNOTATIONS)) as handle:
        return json.load(handle)


def _gluoncv(root, segmentation=False, min_object_area=None, **options):
    """gluoncv's dataset for these options (its messages to stdout are dropped)."""
    if min_object_area is not None:
        options['min_object_area'] = min_object_area
    if segmentation:
        options.pop('use_crowd', None)
        return COCOInstance(root, splits='instances_val2017', **options)
    return COCODetection(root, splits='instances_val2017', **options)


OPTIONS = [dict(), dict(skip_empty=False), dict(use_crowd=False), dict(min_object_area=900),
           dict(segmentation=True), dict(segmentation=True, skip_empty=False),
           dict(segmentation=True, min_object_area=0)]


@pytest.mark.parametrize('options', OPTIONS, ids=lambda o: ','.join(
    '%s=%s' % item for item in o.items()) or 'default')
def test_records_are_gluoncv_items_in_order(coco_root, tmp_path, capsys, options):
    theirs = _gluoncv(coco_root, **options)
    capsys.readouterr()
    path = from_coco(coco_root, str(tmp_path / 'out'), split='val2017', samples_per_shard=3,
                     **options)
    manifest, records, rows = read_back(path)
    assert len(records) == len(theirs) == len(rows) > 0
    assert [r['key'] for r in records] == keys(manifest, 3)
    source = _source(coco_root)
    images = {entry['id']: entry for entry in source['images']}
    names = [name for _, name, _ in COCO_CATEGORIES]
    crowds = {a['id'] for a in source['annotations'] if a['iscrowd']}
    for i, (record, row) in enumerate(zip(records, rows)):
        item = theirs[i]
        annotations = record['json']
        assert_same_label(label_of(annotations), item[1], i)
        entry = annotations['image']
        assert entry == images[entry['id']]
        path_of_image = os.path.join(coco_root, 'val2017', entry['file_name'])
        assert path_of_image == theirs._items[i]  # gluoncv's path of item i
        with open(path_of_image, 'rb') as handle:
            assert record['jpg'] == handle.read(), i
        assert annotations['objects'] == [a for a in source['annotations']
                                          if a['image_id'] == entry['id']]
        if options.get('segmentation'):
            if item[2] is None:
                assert annotations['segm'] is None
            else:
                assert len(annotations['segm']) == len(item[2]) == len(item[1])
                for ours, their in zip(annotations['segm'], item[2]):
                    assert len(ours) == len(their)
                    for polygon, expected in zip(ours, their):
                        got = np.asarray(polygon).reshape(-1, 2).astype('float32')
                        assert got.dtype == expected.dtype
                        np.testing.assert_array_equal(got, expected)
        else:
            assert 'segm' not in annotations
        objects = [] if item[1] is None or item[1][0][4] < 0 else \
            [names[int(c)] for c in np.asarray(item[1])[:, 4]]
        assert record['txt'].decode() == ', '.join(objects)
        assert (row['image_id'], row['file_name'], row['width'], row['height']) == (
            entry['id'], entry['file_name'], entry['width'], entry['height'])
        assert row['num_objects'] == len(objects)
        assert list(row['classes']) == sorted(set(objects))
        kept_crowds = 0 if options.get('segmentation') or not options.get(
            'use_crowd', True) else len(crowds & {a['id'] for a in annotations['objects']})
        assert row['crowd'] == kept_crowds
    assert manifest['source'] == 'coco' and manifest['classes'] == names
    assert manifest['category_ids'] == [c for c, _, _ in COCO_CATEGORIES]
    assert manifest['segmentation'] == options.get('segmentation', False)
    assert manifest['options']['min_object_area'] == options.get(
        'min_object_area', 1 if options.get('segmentation') else 0)
    assert list(verify(path)) == []


def test_labels_cover_the_cases_of_the_example(coco_root, tmp_path, capsys):
    """The example's crowd, tiny box, image without objects and whole-number boxes reach
    the labels as gluoncv makes them: an int64 label, an int placeholder, a None label."""
    dtypes = {}
    for name, options in (('boxes', {}), ('empty', dict(skip_empty=False)),
                          ('masks', dict(segmentation=True, skip_empty=False))):
        _, records, _ = read_back(from_coco(coco_root, str(tmp_path / name), split='val2017',
                                            **options))
        dtypes[name] = [r['json']['label_dtype'] for r in records]
    assert dtypes['boxes'][:2] == ['float64', 'int64']  # the second has no objects
    assert dtypes['empty'][:3] == ['float64', 'int64', 'int64']
    assert dtypes['masks'][:3] == ['float32', None, 'float32']


def test_the_gluoncv_split_name_and_a_custom_category_list(coco_root, tmp_path, capsys):
    root = str(tmp_path / 'coco')
    shutil.copytree(coco_root, root)
    source = _source(root)
    used = sorted({a['category_id'] for a in source['annotations']}, reverse=True)
    source['categories'] = [c for c in source['categories'] if c['id'] in used][::-1]
    with open(os.path.join(root, ANNOTATIONS), 'w') as handle:
        json.dump(source, handle)
    path = from_coco(root, str(tmp_path / 'out'), split='instances_val2017')
    manifest, records, _ = read_back(path)
    # the file's categories in its order: label class k is its k-th category
    assert manifest['category_ids'] == used
    expected = _gluoncv(coco_root)
    capsys.readouterr()
    position = {c: k for k, c in enumerate(used)}
    coco_ids = [c for c, _, _ in COCO_CATEGORIES]
    for i, record in enumerate(records):
        label = np.asarray(expected[i][1]).copy()
        label[:, 4] = [position[coco_ids[int(c)]] for c in label[:, 4]]
        assert_same_label(label_of(record['json']), label.astype(expected[i][1].dtype), i)


def test_an_image_without_coco_url_is_found_in_the_split_folder(coco_root, tmp_path):
    root = str(tmp_path / 'coco')
    shutil.copytree(coco_root, root)
    source = _source(root)
    for entry in source['images']:
        del entry['coco_url']
    with open(os.path.join(root, ANNOTATIONS), 'w') as handle:
        json.dump(source, handle)
    ours = read_back(from_coco(root, str(tmp_path / 'a'), split='val2017'))[1]
    reference = read_back(from_coco(coco_root, str(tmp_path / 'b'), split='val2017'))[1]
    assert [r['jpg'] for r in ours] == [r['jpg'] for r in reference]


# ------------------------------------------------------------------ refusals


def _rewrite(root, change):
    source = _source(root)
    change(source)
    with open(os.path.join(root, ANNOTATIONS), 'w') as handle:
        json.dump(source, handle)


def _annotation(source, image=0):
    """The first annotation of the ``image``-th image by id (the first has several)."""
    image_id = sorted(entry['id'] for entry in source['images'])[image]
    return next(a for a in source['annotations'] if a['image_id'] == image_id)


def _set(key, value, image=0):
    return lambda source: _annotation(source, image).__setitem__(key, value)


@pytest.mark.parametrize('damage, error, message, options', [
    (lambda r: os.remove(os.path.join(r, ANNOTATIONS)), FileNotFoundError,
     r'no annotation file .*annotations/instances_val2017\.json', {}),
    (lambda r: open(os.path.join(r, ANNOTATIONS), 'a').write(','), ValueError,
     r'instances_val2017\.json is not valid JSON: Extra data', {}),
    (lambda r: _rewrite(r, lambda s: s.pop('images')), ValueError,
     r"not a COCO annotation file: its 'images' is a NoneType", {}),
    # gluoncv looks for every image, also one it then skips (without objects)
    (lambda r: os.remove(os.path.join(r, 'val2017', sorted(os.listdir(
        os.path.join(r, 'val2017')))[1])), FileNotFoundError, r'no image file .*val2017/0+\d+'
     r'\.jpg \(image \d+ of .*instances_val2017\.json\)', {}),
    (lambda r: _rewrite(r, _set('bbox', [1, 2, 3])), ValueError,
     r"annotation \d+ \(image \d+\) has bbox \[1, 2, 3\], expected \[x, y, width, height\]",
     {}),
    (lambda r: _rewrite(r, _set('area', None)), ValueError, 'has area None', {}),
    (lambda r: _rewrite(r, _set('category_id', 12)), ValueError,
     "has category_id 12, not one of the file's categories", {}),
    (lambda r: _rewrite(r, lambda s: s['images'].append(dict(s['images'][0]))), ValueError,
     r'two images have the id \d+', {}),
    (lambda r: _rewrite(r, _set('segmentation', {'counts': [1], 'size': [1, 1]})),
     ValueError, 'expected polygons', dict(segmentation=True)),
    (lambda r: _rewrite(r, _set('segmentation', [[1, 2, 3, 4, 5, 6, 7]])), ValueError,
     'a polygon of 7 coordinates, expected x, y pairs', dict(segmentation=True)),
    (lambda r: _rewrite(r, _set('bbox', [1, 2, float('nan'), 4])), ValueError,
     'cannot be written as JSON', {}),
], ids=['no-json', 'broken-json', 'no-images', 'image', 'bbox', 'area', 'category',
        'two-ids', 'rle', 'odd-polygon', 'nan'])
def test_a_bad_dataset_writes_nothing(coco_root, tmp_path, damage, error, message, options):
    root = str(tmp_path / 'coco')
    shutil.copytree(coco_root, root)
    damage(root)
    before = tree(str(tmp_path))
    with pytest.raises(error, match=message):
        from_coco(root, str(tmp_path / 'out'), split='val2017', **options)
    assert tree(str(tmp_path)) == before


@pytest.mark.parametrize('arguments, error, message', [
    (dict(split='../val2017'), ValueError, 'must name a COCO split'),
    (dict(split=2017), TypeError, 'split must be a str'),
    (dict(segmentation=1), TypeError, 'segmentation must be True or False'),
    (dict(min_object_area='1'), TypeError, 'min_object_area must be a number'),
    (dict(min_object_area=float('inf')), ValueError, 'min_object_area must be finite'),
    (dict(skip_empty=None), TypeError, 'skip_empty must be True or False'),
    (dict(samples_per_shard=1.5), TypeError, 'samples_per_shard must be an integer'),
])
def test_bad_arguments_are_refused_before_writing(coco_root, tmp_path, arguments, error,
                                                  message):
    with pytest.raises(error, match=message):
        from_coco(coco_root, str(tmp_path / 'out'), **dict(dict(split='val2017'), **arguments))
    assert os.listdir(tmp_path) == []


def test_a_destination_holding_a_dataset_is_refused(coco_root, tmp_path):
    first = from_coco(coco_root, str(tmp_path / 'out'), split='val2017')
    before = tree(first)
    with pytest.raises(ValueError, match='already holds a dataset'):
        from_coco(coco_root, first, split='val2017', segmentation=True)
    assert tree(first) == before
