"""from_voc: the shards hold gluoncv's VOCDetection items, record for record (order,
image bytes, label values and dtype), with the source's annotations, parquet columns and
a manifest; every bad input is refused before anything is written."""
import io
import logging
import os
import shutil
import xml.etree.ElementTree as ET

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import VOCDetection
from hypothesis import given, settings, strategies as st
from PIL import Image

from gluonbatch.detection import from_voc, make_voc_example
from gluonbatch.shards import verify
from gluonbatch.detection.sources import VOC_CLASSES

from converted import assert_same_label, keys, label_of, read_back, tree
from helpers import examples

SPLITS = [(2007, 'trainval'), (2012, 'trainval'), (2007, 'test')]


@pytest.fixture(scope='module')
def voc_root(tmp_path_factory):
    return make_voc_example(str(tmp_path_factory.mktemp('voc')), num_images=4, splits=SPLITS,
                            size=(96, 72), seed=7)


def _compare(path, root, splits, samples_per_shard, gluoncv=None):
    """Assert the dataset at ``path`` holds gluoncv's items of ``root``'s ``splits``."""
    theirs = gluoncv or VOCDetection(root, splits=splits)
    manifest, records, rows = read_back(path)
    assert len(records) == len(theirs) == len(rows) > 0
    assert [r['key'] for r in records] == [row['key'] for row in rows] == \
        keys(manifest, samples_per_shard)
    assert all(count <= samples_per_shard for _, count in manifest['shards'])
    for i, (record, row) in enumerate(zip(records, rows)):
        folder, image_id = theirs._items[i]  # gluoncv's (folder path, id) of item i
        image_path = os.path.join(folder, 'JPEGImages', image_id + '.jpg')
        with open(image_path, 'rb') as handle:
            assert record['jpg'] == handle.read(), i  # the file's bytes, not re-encoded
        label = theirs[i][1]
        assert_same_label(label_of(record['json']), label, i)
        names = [theirs.classes[int(c)] if gluoncv is None else
                 [n for n, k in theirs.index_map.items() if k == int(c)][0]
                 for c in label[:, 4]] if label.size else []
        assert record['txt'].decode() == ', '.join(names)
        image = record['json']['image']
        assert image == {'id': image_id, 'folder': os.path.basename(folder),
                         'file_name': image_id + '.jpg', 'width': 96, 'height': 72}
        xml = ET.parse(os.path.join(folder, 'Annotations', image_id + '.xml')).getroot()
        assert [o['name'] for o in record['json']['objects']] == \
            [o.find('name').text for o in xml.iter('object')]
        assert row['image_id'] == '%s/%s' % (os.path.basename(folder), image_id)
        assert (row['file_name'], row['width'], row['height']) == (image_id + '.jpg', 96, 72)
        assert row['num_objects'] == len(label)
        assert list(row['classes']) == sorted(set(names))
        assert row['difficult'] == (int((label[:, 5] != 0).sum()) if label.size else 0)
    assert list(verify(path)) == []
    return manifest, records


@pytest.mark.parametrize('samples_per_shard', [1, 5, 1000])
def test_records_are_gluoncv_items_in_order(voc_root, tmp_path, samples_per_shard):
    path = from_voc(voc_root, str(tmp_path / 'out'), splits=SPLITS,
                    samples_per_shard=samples_per_shard)
    assert path == str(tmp_path / 'out')
    manifest, records = _compare(path, voc_root, SPLITS, samples_per_shard)
    assert manifest['format'] == 'gluonbatch.detection/1' and manifest['source'] == 'voc'
    assert manifest['classes'] == list(VOC_CLASSES) and not manifest['segmentation']
    assert manifest['index_map'] == {name: k for k, name in enumerate(VOC_CLASSES)}
    assert manifest['options'] == {'splits': [[2007, 'trainval'], [2012, 'trainval'],
                                              [2007, 'test']],
                                   'invalid_boxes': 'error',
                                   'samples_per_shard': samples_per_shard}
    assert sum(count for _, count in manifest['shards']) == 12
    # the image decodes as gluoncv reads the file
    image = mx.image.imdecode(records[5]['jpg'], flag=1)
    np.testing.assert_array_equal(image.asnumpy(), VOCDetection(voc_root, SPLITS)[5][0]
                                  .asnumpy())


def test_string_splits_and_the_default_splits(voc_root, tmp_path):
    from_voc(voc_root, str(tmp_path / 'a'), splits=['2012:trainval', '2007:test'])
    _compare(str(tmp_path / 'a'), voc_root, [(2012, 'trainval'), (2007, 'test')], 1000)
    from_voc(voc_root, str(tmp_path / 'b'))  # gluoncv's default: 2007 and 2012 trainval
    _compare(str(tmp_path / 'b'), voc_root, [(2007, 'trainval'), (2012, 'trainval')], 1000)


def test_classes_and_index_map_as_gluoncv_takes_them(voc_root, tmp_path):
    index_map = {'dog': 1, 'person': 0, 'car': 2}

    class Three(VOCDetection):
        CLASSES = ('dog', 'person', 'car')

    theirs = Three(voc_root, splits=SPLITS, index_map=index_map)
    path = from_voc(voc_root, str(tmp_path / 'out'), splits=SPLITS,
                    classes=['dog', 'person', 'car'], index_map=index_map)
    manifest, records = _compare(path, voc_root, SPLITS, 1000, gluoncv=theirs)
    assert manifest['classes'] == ['dog', 'person', 'car']
    assert manifest['index_map'] == index_map
    # every object of the file stays among the source annotations
    assert sum(len(r['json']['objects']) for r in records) > \
        sum(len(r['json']['label']) for r in records)


# ------------------------------------------------------------------ odd annotations

_NAMES = st.sampled_from(['dog', ' Dog ', 'PERSON', 'cat', 'unicorn'])
# (gluoncv fails on an empty or missing difficult flag: those are tested on their own)
_DIFFICULT = st.sampled_from(['0', '1', ' 1 ', 'x', '2.0'])
_COORD = st.one_of(st.integers(-2, 70), st.sampled_from(['12.5', '64.0', 'nan']))


def _xml(objects, width=64, height=48):
    lines = ['<annotation><size><width>%d</width><height>%d</height></size>' % (width,
                                                                               height)]
    for name, difficult, box in objects:
        lines.append('<object><name>%s</name>' % name)
        if difficult != 'missing':
            lines.append('<difficult>%s</difficult>' % ('' if difficult is None else
                                                        difficult))
        lines.append('<bndbox>%s</bndbox></object>' % ''.join(
            '<%s>%s</%s>' % (tag, value, tag)
            for tag, value in zip(('xmin', 'ymin', 'xmax', 'ymax'), box)))
    return ''.join(lines) + '</annotation>'


def _write_voc(root, images):
    base = os.path.join(root, 'VOC2007')
    for sub in ('JPEGImages', 'Annotations', 'ImageSets/Main'):
        os.makedirs(os.path.join(base, sub), exist_ok=True)
    encoded = io.BytesIO()
    Image.new('RGB', (64, 48), (20, 90, 160)).save(encoded, 'JPEG')
    for n, objects in enumerate(images):
        with open(os.path.join(base, 'JPEGImages', '%03d.jpg' % n), 'wb') as handle:
            handle.write(encoded.getvalue())
        with open(os.path.join(base, 'Annotations', '%03d.xml' % n), 'w') as handle:
            handle.write(_xml(objects))
    with open(os.path.join(base, 'ImageSets/Main/all.txt'), 'w') as handle:
        handle.write(''.join('%03d\n' % n for n in range(len(images))))


@settings(max_examples=examples(40), deadline=None)
@given(images=st.lists(st.lists(st.tuples(_NAMES, _DIFFICULT, st.tuples(*[_COORD] * 4)),
                                max_size=4), min_size=1, max_size=3))
def test_odd_annotations_give_gluoncv_labels_or_a_named_error(tmp_path_factory, images):
    """Names in any case with spaces, unknown classes, difficult flags that are no ints,
    boxes outside the image, float and NaN coordinates: dropped boxes and labels as gluoncv
    makes them, or (invalid_boxes='error') a ValueError naming the file and box."""
    work = tmp_path_factory.mktemp('odd')
    root = str(work / 'voc')
    _write_voc(root, images)
    logging.disable(logging.WARNING)  # gluoncv's and ours, for each dropped box
    try:
        theirs = VOCDetection(root, splits=[(2007, 'all')])
        path = from_voc(root, str(work / 'drop'), splits=['2007:all'], invalid_boxes='drop')
    finally:
        logging.disable(logging.NOTSET)
    _, records, _ = read_back(path)
    assert len(records) == len(images)
    for i, record in enumerate(records):
        assert_same_label(label_of(record['json']), theirs[i][1], i)
    dropped = sum(len([o for o in objects if o[0].strip().lower() in VOC_CLASSES])
                  for objects in images) - sum(len(theirs[i][1]) for i in range(len(images)))
    before = tree(str(work))
    if dropped:
        with pytest.raises(ValueError, match=r"Annotations/\d{3}\.xml: object \d+ \('\w+', "
                                             r"counted from 0\) has a box outside its 64x48 "
                                             r"image: xmin=.*ymax=.* as written"):
            from_voc(root, str(work / 'error'), splits=['2007:all'])
        assert tree(str(work)) == before  # nothing written
    else:
        from_voc(root, str(work / 'error'), splits=['2007:all'])
        assert [r['json'] for r in read_back(str(work / 'error'))[1]] == \
            [r['json'] for r in records]


def test_a_dropped_box_is_logged_as_gluoncv_does(tmp_path, caplog):
    root = str(tmp_path / 'voc')
    _write_voc(root, [[('dog', '0', (1, 1, 10, 10)), ('cat', '1', (60, 1, 70, 10))]])
    with caplog.at_level(logging.WARNING, logger='gluonbatch.detection.voc'):
        path = from_voc(root, str(tmp_path / 'out'), splits=['2007:all'],
                        invalid_boxes='drop')
    assert "object 1 ('cat', counted from 0)" in caplog.text
    assert 'xmax - 1 = 69 is not in (59, 64]' in caplog.text
    record = read_back(path)[1][0]
    assert record['json']['label'] == [[0.0, 0.0, 9.0, 9.0, 11.0, 0.0]]
    assert [o['name'] for o in record['json']['objects']] == ['dog', 'cat']


def test_an_image_without_objects_has_gluoncv_empty_label(tmp_path):
    root = str(tmp_path / 'voc')
    _write_voc(root, [[], [('unicorn', '0', (1, 1, 5, 5))]])
    _, records, rows = read_back(from_voc(root, str(tmp_path / 'out'), splits=['2007:all']))
    for record in records:
        assert record['json']['label'] == [] and record['json']['label_dtype'] == 'float64'
        assert label_of(record['json']).shape == VOCDetection(
            root, splits=[(2007, 'all')])[0][1].shape == (0,)
    assert [row['num_objects'] for row in rows] == [0, 0]


# ------------------------------------------------------------------ refusals


def _copy(voc_root, tmp_path):
    root = str(tmp_path / 'voc')
    shutil.copytree(voc_root, root)
    return root


def _edit(path, text):
    with open(path, 'w') as handle:
        handle.write(text)


@pytest.mark.parametrize('damage, error, message', [
    (lambda r: os.remove(os.path.join(r, 'VOC2012/JPEGImages/000003.jpg')),
     FileNotFoundError, r'no image file .*VOC2012/JPEGImages/000003\.jpg'),
    (lambda r: os.remove(os.path.join(r, 'VOC2007/Annotations/000002.xml')),
     FileNotFoundError, r'no annotation file .*VOC2007/Annotations/000002\.xml'),
    (lambda r: _edit(os.path.join(r, 'VOC2007/Annotations/000006.xml'), '<annotation><size>'),
     ValueError, r'VOC2007/Annotations/000006\.xml is not valid XML: no element found'),
    (lambda r: _edit(os.path.join(r, 'VOC2007/Annotations/000001.xml'),
                     _xml([('dog', '0', (1, 1, 5, 5))]).replace('<width>64</width>', '')),
     ValueError, r'000001\.xml: its size has no width, expected a finite number'),
    (lambda r: _edit(os.path.join(r, 'VOC2007/Annotations/000001.xml'),
                     _xml([('dog', '0', (1, 1, 5, 5))]).replace('<width>64</width>',
                                                                '<width>nan</width>')),
     ValueError, r"000001\.xml: its size has width 'nan', expected a finite number"),
    (lambda r: _edit(os.path.join(r, 'VOC2007/Annotations/000001.xml'),
                     _xml([('dog', '0', (0, 1, 5, 5))])), ValueError,
     r"000001\.xml: object 0 \('dog', counted from 0\) has a box outside its 64x48 image: "
     r"xmin=0, ymin=1, xmax=5, ymax=5 as written \(1-based\); xmin - 1 = -1 is not in "
     r"\[0, 64\); gluoncv drops such a box, and so does invalid_boxes='drop'"),
    (lambda r: _edit(os.path.join(r, 'VOC2007/Annotations/000001.xml'),
                     _xml([('dog', '0', (1, 1, 'wide', 5))])), ValueError,
     r"000001\.xml: object 0 \('dog', counted from 0\)'s box has xmax 'wide', expected a "
     r"number"),
    (lambda r: os.remove(os.path.join(r, 'VOC2007/ImageSets/Main/test.txt')),
     FileNotFoundError, r"split '2007:test': no image list .*VOC2007/ImageSets/Main/test\.txt"),
], ids=['image', 'xml', 'broken-xml', 'no-size', 'nan-size', 'box', 'not-a-number', 'list'])
def test_a_bad_dataset_writes_nothing(voc_root, tmp_path, damage, error, message):
    root = _copy(voc_root, tmp_path)
    damage(root)
    before = tree(str(tmp_path))
    with pytest.raises(error, match=message):
        from_voc(root, str(tmp_path / 'out'), splits=SPLITS)
    assert tree(str(tmp_path)) == before
    os.mkdir(tmp_path / 'empty')  # an existing destination stays, empty
    with pytest.raises(error, match=message):
        from_voc(root, str(tmp_path / 'empty'), splits=SPLITS)
    assert os.listdir(tmp_path / 'empty') == []


@pytest.mark.parametrize('existing', ['00000.tar', '00003.parquet', 'detection.json'])
def test_a_destination_holding_a_dataset_is_refused(voc_root, tmp_path, existing):
    (tmp_path / 'out').mkdir()
    (tmp_path / 'out' / existing).write_bytes(b'old')
    before = tree(str(tmp_path))
    with pytest.raises(ValueError, match=r"already holds a dataset \('%s'\); convert into "
                                         % existing.replace('.', r'\.')):
        from_voc(voc_root, str(tmp_path / 'out'), splits=SPLITS)
    assert tree(str(tmp_path)) == before
    (tmp_path / 'file').write_bytes(b'x')
    with pytest.raises(NotADirectoryError, match='is not a directory'):
        from_voc(voc_root, str(tmp_path / 'file'), splits=SPLITS)


@pytest.mark.parametrize('arguments, error, message', [
    (dict(splits=['2007']), ValueError, "'YEAR:NAME', got '2007'"),
    (dict(splits=[(2007.0, 'trainval')]), TypeError, 'must be an int or a folder name'),
    (dict(splits=[]), ValueError, 'splits is empty'),
    (dict(classes=['Dog']), ValueError, "class 'Dog' would never match"),
    (dict(classes='dog'), TypeError, 'classes must be a list'),
    (dict(classes=['dog', 'dog']), ValueError, 'distinct'),
    (dict(classes=['dog', 'cat'], index_map={'dog': 0}), ValueError,
     r"index_map has no label class id for class \['cat'\]"),
    (dict(index_map={name: 1.0 for name in VOC_CLASSES}), TypeError, 'label class ids'),
    (dict(invalid_boxes='skip'), ValueError, 'invalid_boxes must be one of error, drop'),
    (dict(samples_per_shard=0), ValueError, 'samples_per_shard must be an integer >= 1'),
    (dict(progress='yes'), TypeError, 'progress must be True, False or None'),
])
def test_bad_arguments_are_refused_before_writing(voc_root, tmp_path, arguments, error,
                                                  message):
    with pytest.raises(error, match=message):
        from_voc(voc_root, str(tmp_path / 'out'), **dict(dict(splits=SPLITS), **arguments))
    assert os.listdir(tmp_path) == []


def test_missing_root_and_no_images(tmp_path):
    with pytest.raises(FileNotFoundError, match='no dataset root directory .*nowhere'):
        from_voc(str(tmp_path / 'nowhere'), str(tmp_path / 'out'))
    root = str(tmp_path / 'voc')
    _write_voc(root, [])
    with pytest.raises(ValueError, match='from_voc: there is no image to convert'):
        from_voc(root, str(tmp_path / 'out'), splits=['2007:all'])
    assert sorted(os.listdir(tmp_path)) == ['voc']


def test_progress_lines_where_there_is_no_terminal(voc_root, tmp_path, capsys):
    from_voc(voc_root, str(tmp_path / 'a'), splits=SPLITS)  # default: a bar on a terminal only
    from_voc(voc_root, str(tmp_path / 'b'), splits=SPLITS, progress=False)
    assert capsys.readouterr() == ('', '')
    from_voc(voc_root, str(tmp_path / 'c'), splits=SPLITS, progress=True)
    out, err = capsys.readouterr()  # progress on stderr: stdout is the caller's
    assert out == ''
    assert [line.split(' done')[0] for line in err.splitlines()] == [
        'from_voc (reading annotations): 12/12 images',
        'from_voc (writing shards): 12/12 images']


def test_an_empty_or_missing_difficult_flag_is_zero(tmp_path):
    """Where gluoncv stops (it reads the flag's text as an int, and catches only
    ValueError), the flag counts as 0, like any other that is no int."""
    root = str(tmp_path / 'voc')
    _write_voc(root, [[('dog', None, (1, 1, 10, 10)), ('cat', 'missing', (2, 2, 9, 9)),
                       ('cat', 'hard', (2, 2, 9, 9))]])
    record = read_back(from_voc(root, str(tmp_path / 'out'), splits=['2007:all']))[1][0]
    assert [row[5] for row in record['json']['label']] == [0, 0, 0]
    assert [o['difficult'] for o in record['json']['objects']] == [None, None, 'hard']
