"""DetectionShards: gluoncv's VOC and COCO items, read from shards, item for item."""
import os
import pickle

import mxnet as mx
import numpy as np
import pytest

from gluonbatch.detection import (DetectionShards, from_coco, from_voc, make_coco_example, make_voc_example)

VOC_SPLITS = [(2007, 'trainval'), (2012, 'trainval')]


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    """A tiny VOC in gluoncv's layout, and its shards (3 records per shard)."""
    base = tmp_path_factory.mktemp('voc')
    root = make_voc_example(str(base / 'voc'), num_images=7, seed=3)
    path = from_voc(root, str(base / 'shards'), splits=VOC_SPLITS, samples_per_shard=3)
    return root, path


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    """A tiny COCO in gluoncv's layout, and its shards with and without polygons."""
    base = tmp_path_factory.mktemp('coco')
    root = make_coco_example(str(base / 'coco'), num_images=9, seed=4)
    boxes = from_coco(root, str(base / 'boxes'), split='train2017', samples_per_shard=4)
    polygons = from_coco(root, str(base / 'polygons'), split='train2017', segmentation=True,
                         samples_per_shard=4)
    return root, boxes, polygons


def _gluoncv_voc(root):
    from gluoncv.data import VOCDetection
    return VOCDetection(root=root, splits=VOC_SPLITS)


def _assert_same_item(ours, theirs):
    assert len(ours) == len(theirs)
    image, expected_image = ours[0], theirs[0]
    assert type(image) is type(expected_image)
    assert image.dtype == expected_image.dtype and image.shape == expected_image.shape
    np.testing.assert_array_equal(image.asnumpy(), expected_image.asnumpy())
    for got, expected in zip(ours[1:2], theirs[1:2]):
        assert got.dtype == np.asarray(expected).dtype
        np.testing.assert_array_equal(got, np.asarray(expected))
    if len(ours) == 3:
        assert len(ours[2]) == len(theirs[2])
        for got_object, expected_object in zip(ours[2], theirs[2]):
            assert len(got_object) == len(expected_object)
            for got, expected in zip(got_object, expected_object):
                assert got.dtype == expected.dtype == np.float32
                np.testing.assert_array_equal(got, expected)


def test_voc_items_equal_gluoncv_item_for_item(voc):
    root, path = voc
    theirs, ours = _gluoncv_voc(root), DetectionShards(path)
    assert len(ours) == len(theirs) == 14
    assert ours.shard_lengths == (3, 3, 3, 3, 2)
    for i in range(len(theirs)):
        _assert_same_item(ours[i], theirs[i])
    _assert_same_item(ours[-1], theirs[len(theirs) - 1])
    assert ours.classes == theirs.classes and ours.index_map == theirs.index_map
    assert ours.num_class == theirs.num_class
    ours.close()


def test_coco_items_equal_gluoncv_detection_and_instance(coco):
    from gluoncv.data import COCODetection, COCOInstance

    root, boxes, polygons = coco
    for path, kind in ((boxes, COCODetection), (polygons, COCOInstance)):
        theirs, ours = kind(root=root, splits='instances_train2017'), DetectionShards(path)
        assert len(ours) == len(theirs) > 0
        for i in range(len(theirs)):
            _assert_same_item(ours[i], theirs[i])
        assert ours.classes == theirs.classes
        assert ours.json_id_to_contiguous == theirs.json_id_to_contiguous
        assert ours.contiguous_id_to_json == theirs.contiguous_id_to_json
        assert ours.segmentation == (kind is COCOInstance)


def test_image_bytes_are_the_files_bytes(voc):
    root, path = voc
    theirs = _gluoncv_voc(root)
    ours = DetectionShards(path)
    for i in (0, 5, 13):
        folder, image_id = theirs._items[i]  # gluoncv's own record of the file
        with open(os.path.join(folder, 'JPEGImages', image_id + '.jpg'), 'rb') as handle:
            assert ours.read_raw(i)['jpg'] == handle.read()
        assert ours.annotations(i)['image']['id'] == image_id


def test_transform_is_applied_as_gluoncv_applies_it(voc):
    root, path = voc

    def transform(image, label):
        return image.shape, label[:, :4].sum()

    ours, theirs = DetectionShards(path, transform=transform), _gluoncv_voc(root)
    theirs = theirs.transform(transform)
    assert [ours[i] for i in range(3)] == [theirs[i] for i in range(3)]
    with pytest.raises(TypeError, match='transform'):
        DetectionShards(path, transform=3)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_presets_and_batchify_in_workers_equal_gluoncv(voc, num_workers):
    from gluoncv.data.batchify import Pad, Stack, Tuple
    from gluoncv.data.transforms.presets.ssd import SSDDefaultValTransform

    root, path = voc
    transform = SSDDefaultValTransform(128, 128)
    batchify = Tuple(Stack(), Pad(pad_val=-1))

    def batches(dataset):
        loader = mx.gluon.data.DataLoader(dataset.transform(transform), batch_size=4,
                                          batchify_fn=batchify, num_workers=num_workers)
        return [[field.asnumpy() for field in batch] for batch in loader]

    ours, theirs = batches(DetectionShards(path)), batches(_gluoncv_voc(root))
    assert len(ours) == len(theirs) == 4
    for got, expected in zip(ours, theirs):
        for got_field, expected_field in zip(got, expected):
            np.testing.assert_array_equal(got_field, expected_field)


def test_numpy_mode_items_equal_gluoncv(voc):
    root, path = voc
    theirs, ours = _gluoncv_voc(root), DetectionShards(path)
    mx.npx.set_np()
    try:
        got, expected = ours[2], theirs[2]
        assert isinstance(got[0], mx.np.ndarray) and type(got[0]) is type(expected[0])
        np.testing.assert_array_equal(got[0].asnumpy(), expected[0].asnumpy())
        np.testing.assert_array_equal(got[1], expected[1])
    finally:
        mx.npx.reset_np()


def test_pickled_dataset_reads_the_same_and_opens_its_own_files(voc):
    _, path = voc
    ours = DetectionShards(path)
    first = ours[4]
    assert ours.reader.open_files()
    copy = pickle.loads(pickle.dumps(ours))
    assert copy.reader.open_files() == []
    np.testing.assert_array_equal(copy[4][1], first[1])
    ours.close()
    assert ours.reader.open_files() == []


def test_opening_reads_only_the_manifest(voc, tmp_path):
    """A shard's files are read when its records are: a dataset whose shards are gone
    opens, and fails naming the tar only when a record is read."""
    import shutil

    _, path = voc
    copy = str(tmp_path / 'copy')
    shutil.copytree(path, copy)
    os.remove(os.path.join(copy, '00001.tar'))
    ds = DetectionShards(copy)
    assert len(ds) == 14
    np.testing.assert_array_equal(ds[0][1], DetectionShards(path)[0][1])
    with pytest.raises(FileNotFoundError, match='00001.tar is missing.*gluonbatch wds verify'):
        ds[3]


def test_metadata_is_the_parquet_per_shard(voc):
    _, path = voc
    ours = DetectionShards(path)
    frame = ours.metadata.compute()
    assert len(frame) == len(ours)
    assert list(frame.index) == list(range(len(ours)))
    for i in (0, 7):
        label = ours[i][1]
        assert frame['num_objects'][i] == len(label)
        assert frame['key'][i] == ours.record_id(i)
        classes = sorted({ours.classes[int(c)] for c in label[:, 4]})
        assert list(frame['classes'][i]) == classes


def test_bad_paths_and_indexes_are_clear(voc, tmp_path):
    _, path = voc
    with pytest.raises(FileNotFoundError, match='detection.json'):
        DetectionShards(str(tmp_path))
    (tmp_path / 'detection.json').write_text('{"format": "something else"}')
    with pytest.raises(ValueError, match='expected format'):
        DetectionShards(str(tmp_path))
    (tmp_path / 'detection.json').write_text('{')
    with pytest.raises(ValueError, match='not valid JSON'):
        DetectionShards(str(tmp_path))
    ds = DetectionShards(path)
    with pytest.raises(IndexError, match='out of range for 14 records'):
        ds[14]
    with pytest.raises(TypeError, match='record index'):
        ds['0']


def test_damaged_image_names_the_record_and_tar(voc, tmp_path):
    import shutil

    _, path = voc
    copy = str(tmp_path / 'copy')
    shutil.copytree(path, copy)
    ds = DetectionShards(copy)
    raw = ds.read_raw(1)
    tar = os.path.join(copy, '00000.tar')
    with open(tar, 'r+b') as handle:
        data = handle.read()
        at = data.index(raw['jpg'])
        handle.seek(at)
        handle.write(bytes(len(raw['jpg'])))  # same size, no longer a JPEG
    with pytest.raises(ValueError, match=r'cannot decode the image of member .*\.jpg .*00000\.tar'):
        DetectionShards(copy)[1]


def test_a_record_is_one_pread_once_its_shard_is_open(voc, monkeypatch):
    """The first read of a shard also checks its first and last record's tar headers; every
    later read of it is one pread of the record's bytes."""
    _, path = voc
    ds = DetectionShards(path)
    reads = []
    real_pread = os.pread

    def counted(fd, length, offset):
        reads.append(length)
        return real_pread(fd, length, offset)

    monkeypatch.setattr(os, 'pread', counted)
    ds[3]  # shard 1 opened: its first and last records checked, record 3 read
    assert len(reads) <= 3
    for i in (4, 5, 3, 4):
        del reads[:]
        members = ds.read_raw(i)
        ds[i]
        assert len(reads) == 2  # read_raw, then the item: one pread each
        assert reads[0] >= sum(len(data) for data in members.values())


# A fresh interpreter in which Dask and pandas cannot be imported reads converted shards
# through a 2-worker loader: training from detection shards needs neither.
WITHOUT_DATAFRAMES = '''
import hashlib, importlib.abc, json, sys

UNAVAILABLE = ('dask', 'pandas', 'distributed')
asked = []  # (module, importer) of every import of them that gluonbatch's code makes


class Unavailable(importlib.abc.MetaPathFinder):
    # as where they are not installed: the import fails, and who asked is noted
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] not in UNAVAILABLE:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith('<frozen'):
            frame = frame.f_back  # the import machinery's own frames
        importer = frame.f_globals.get('__name__', '') if frame is not None else ''
        if importer.split('.')[0] == 'gluonbatch':
            asked.append([name, importer])
        raise ModuleNotFoundError('No module named %r' % name, name=name)


sys.meta_path.insert(0, Unavailable())
import numpy as np
import gluonbatch
from gluonbatch.batchify import Pad, Stack, Tuple
from gluonbatch.detection import DetectionShards

shards = DetectionShards(sys.argv[1], transform=lambda image, label: (
    image.asnumpy()[:32, :32].astype('float32'), label))
loader = gluonbatch.DataLoader(shards, batch_size=3, num_workers=2,
                               batchify_fn=Tuple(Pad(axis=(0, 1)), Pad(pad_val=-1)))
digest = hashlib.sha256()
batches = 0
for images, labels in loader:
    digest.update(images.asnumpy().tobytes())
    digest.update(labels.asnumpy().tobytes())
    batches += 1
loader.close()
loaded = sorted(name for name in UNAVAILABLE if name in sys.modules)
print(json.dumps({'batches': batches, 'records': len(shards), 'digest': digest.hexdigest(),
                  'loaded': loaded, 'asked': asked}))
'''


def test_training_from_detection_shards_needs_neither_dask_nor_pandas(voc):
    import hashlib
    import json
    import subprocess
    import sys

    from gluonbatch.batchify import Pad, Tuple

    _, path = voc
    result = subprocess.run([sys.executable, '-c', WITHOUT_DATAFRAMES, path],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    shards = DetectionShards(path)
    assert report['loaded'] == [] and report['asked'] == []
    assert report['records'] == len(shards) > 0
    # the same batches as here, where Dask and pandas are importable
    batchify = Tuple(Pad(axis=(0, 1)), Pad(pad_val=-1))
    digest = hashlib.sha256()
    for start in range(0, len(shards), 3):
        samples = [(shards[i][0].asnumpy()[:32, :32].astype('float32'), shards[i][1])
                   for i in range(start, min(start + 3, len(shards)))]
        images, labels = batchify(samples)
        digest.update(images.asnumpy().tobytes())
        digest.update(labels.asnumpy().tobytes())
    assert report['batches'] == -(-len(shards) // 3) and report['digest'] == digest.hexdigest()
