"""Curating detection data, then training on it: filtering and resharding write a detection
dataset whose items are gluoncv's items of the records kept; verify checks everything a
reader relies on, and a reader meeting a problem names the file and says to run verify."""
import contextlib
import io
import json
import os
import re
import shutil
import types

import numpy as np
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st

from gluonbatch import DataLoader
from gluonbatch.batchify import Pad, Stack, Tuple
from gluonbatch.cli import main
from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.detection import (DetectionShards, from_coco, from_voc, make_coco_example,
                                  make_voc_example, verify)
from gluonbatch.shards.manifest import MANIFEST
from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform

VOC_SPLITS = [(2007, 'trainval'), (2012, 'trainval')]


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    """A small VOC in gluoncv's layout and its shards, 4 records per shard."""
    base = tmp_path_factory.mktemp('voc')
    root = make_voc_example(str(base / 'voc'), num_images=10, seed=5)
    return root, from_voc(root, str(base / 'shards'), splits=VOC_SPLITS, samples_per_shard=4)


@pytest.fixture(scope='module')
def coco(tmp_path_factory):
    base = tmp_path_factory.mktemp('coco')
    root = make_coco_example(str(base / 'coco'), num_images=12, seed=6)
    return root, from_coco(root, str(base / 'polygons'), split='train2017',
                           segmentation=True, samples_per_shard=5)


def _gb(*args, check=True):
    """``gluonbatch ARGS``, run in this process: its exit code, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    done = types.SimpleNamespace(returncode=code, stdout=out.getvalue(),
                                 stderr=err.getvalue())
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _kept(path, keep):
    """The record numbers of the dataset at ``path`` whose parquet row ``keep`` keeps."""
    frame = DetectionShards(path).metadata.compute()
    return [i for i, row in enumerate(frame.to_dict('records')) if keep(row)]


def _assert_items_equal(ours, theirs):
    np.testing.assert_array_equal(ours[0].asnumpy(), theirs[0].asnumpy())
    for got, expected in zip(ours[1:], theirs[1:]):
        if isinstance(expected, list):  # polygons
            assert [[p.tolist() for p in o] for o in got] == \
                [[p.tolist() for p in o] for o in expected]
        else:
            assert got.dtype == np.asarray(expected).dtype
            np.testing.assert_array_equal(got, np.asarray(expected))


def test_the_cli_filter_keeps_a_detection_dataset_equal_to_gluoncvs_items(voc, tmp_path):
    from gluoncv.data import VOCDetection

    root, path = voc
    out = str(tmp_path / 'busy')
    said = _gb('wds', 'filter', path, out, '--where', 'num_objects >= 3',
               '--samples-per-shard', '3')
    wanted = _kept(path, lambda row: row['num_objects'] >= 3)
    assert 0 < len(wanted) < len(DetectionShards(path))
    assert said.stdout.strip().startswith('%s: %d of ' % (out, len(wanted)))
    theirs, ours, source = VOCDetection(root=root, splits=VOC_SPLITS), DetectionShards(out), \
        DetectionShards(path)
    assert len(ours) == len(wanted)
    for j, i in enumerate(wanted):
        _assert_items_equal(ours[j], theirs[i])
    assert ours.classes == theirs.classes and ours.index_map == theirs.index_map
    assert ours.source == 'voc' and ours.options == source.options
    listed = json.load(open(os.path.join(out, MANIFEST)))['shards']
    assert [count for _, count in listed] == list(ours.shard_lengths)
    assert sum(ours.shard_lengths) == len(wanted) and max(ours.shard_lengths) == 3
    assert verify(out) == []


def test_a_class_filter_keeps_the_images_naming_it(voc, tmp_path):
    _, path = voc
    out = str(tmp_path / 'people')
    _gb('wds', 'filter', path, out, '--where', "@has(classes, 'person') and num_objects < 9")
    wanted = _kept(path, lambda row: 'person' in list(row['classes'])
                   and row['num_objects'] < 9)
    ours, source = DetectionShards(out), DetectionShards(path)
    assert len(ours) == len(wanted) > 0
    person = source.classes.index('person')
    for j, i in enumerate(wanted):
        label = ours[j][1]
        assert person in label[:, 4] and len(label) < 9
        np.testing.assert_array_equal(label, source[i][1])


def test_python_filter_and_reshard_keep_polygons_and_class_ids(coco, tmp_path):
    from gluoncv.data import COCOInstance

    root, path = coco
    ds = DetectionShards(path)
    ds.metadata['keep'] = ds.metadata['crowd'] == 0
    wanted = _kept(path, lambda row: row['crowd'] == 0)
    tars = ds.to_webdataset(str(tmp_path / 'no-crowd'), 'keep', samples_per_shard=4,
                            old_id_col='old_key')
    assert len(tars) == -(-len(wanted) // 4)
    ours, theirs = DetectionShards(str(tmp_path / 'no-crowd')), COCOInstance(
        root=root, splits='instances_train2017')
    assert ours.segmentation and ours.classes == theirs.classes
    assert ours.contiguous_id_to_json == theirs.contiguous_id_to_json
    for j, i in enumerate(wanted):
        _assert_items_equal(ours[j], theirs[i])
    # resharding (no filter) through the image-text dataset keeps the manifest too
    again = str(tmp_path / 'again')
    ImageTextPairDataset.from_webdataset(str(tmp_path / 'no-crowd'), 'key').to_webdataset(
        again, None, samples_per_shard=2)
    assert DetectionShards(again).shard_lengths == (2,) * (len(wanted) // 2) + (
        (1,) if len(wanted) % 2 else ())
    for j in range(len(wanted)):
        _assert_items_equal(DetectionShards(again)[j], ours[j])


def test_a_filter_keeping_nothing_writes_nothing(voc, tmp_path):
    _, path = voc
    said = _gb('wds', 'filter', path, str(tmp_path / 'none'), '--where', 'num_objects > 99')
    assert 'nothing written' in said.stdout and not os.path.exists(tmp_path / 'none')


def test_resharding_refuses_a_source_its_manifest_disagrees_with(voc, tmp_path):
    _, path = voc
    copy = str(tmp_path / 'copy')
    shutil.copytree(path, copy)
    manifest = json.load(open(os.path.join(copy, MANIFEST)))
    manifest['shards'][1][1] += 1
    json.dump(manifest, open(os.path.join(copy, MANIFEST), 'w'))
    said = _gb('wds', 'reshard', copy, str(tmp_path / 'out'), check=False)
    assert said.returncode == 1 and said.stderr.count('\n') == 1
    assert 'lists shard 00001 with 5 records' in said.stderr
    assert 'gluonbatch wds verify' in said.stderr and not os.path.exists(tmp_path / 'out')


def test_resharding_into_a_detection_dataset_is_refused(voc, tmp_path):
    _, path = voc
    out = tmp_path / 'out'
    out.mkdir()
    (out / MANIFEST).write_text('{}')
    ds = DetectionShards(path)
    with pytest.raises(ValueError, match='already holds a dataset'):
        ds.to_webdataset(str(out), None)
    assert os.listdir(out) == [MANIFEST]


# --------------------------------------------------------------------------- verify

def _damaged(path, tmp_path, damage):
    copy = str(tmp_path / 'damaged')
    shutil.copytree(path, copy)
    damage(copy)
    return copy


def _remove_shard(copy):
    for ext in ('tar', 'parquet', 'idx'):
        os.remove(os.path.join(copy, '00001.' + ext))


def _not_json(copy):
    with open(os.path.join(copy, MANIFEST), 'w') as handle:
        handle.write('{"format": ')


def _more_records_listed(copy):
    manifest = json.load(open(os.path.join(copy, MANIFEST)))
    manifest['shards'][-1][1] += 2
    json.dump(manifest, open(os.path.join(copy, MANIFEST), 'w'))


def _unknown_class_name(copy):
    parquet = os.path.join(copy, '00000.parquet')
    table = pq.read_table(parquet)
    classes = table.column('classes').to_pylist()
    classes[1] = classes[1] + ['unicorn']
    index = table.schema.get_field_index('classes')
    pq.write_table(table.set_column(index, 'classes', [classes]), parquet)


def _shard_not_listed(copy):
    manifest = json.load(open(os.path.join(copy, MANIFEST)))
    manifest['shards'].pop()
    json.dump(manifest, open(os.path.join(copy, MANIFEST), 'w'))


DAMAGES = {  # damage -> (shard of the problem, what its line says)
    'missing shard': (_remove_shard, '00001', 'lists shard 00001 (4 records), but '),
    'manifest not JSON': (_not_json, '', 'detection.json is not valid JSON'),
    'more records listed': (_more_records_listed, '00004', 'lists shard 00004 with 6 records, '
                                                           'but '),
    'unknown class name': (_unknown_class_name, '00000', "lists classes ['unicorn']"),
    'shard not listed': (_shard_not_listed, '00004', '00004.tar is not listed in'),
}


@pytest.mark.parametrize('damage', sorted(DAMAGES))
def test_verify_reports_what_a_reader_cannot_read(voc, tmp_path, damage):
    _, path = voc
    make, shard, says = DAMAGES[damage]
    copy = _damaged(path, tmp_path, make)
    report = verify(copy)
    assert [(problem.shard, says in problem.message) for problem in report] == [(shard, True)]
    said = _gb('wds', 'verify', copy, check=False)
    assert said.returncode == 1 and says in said.stdout
    assert said.stdout.splitlines()[-1].startswith('%s: 1 problem in ' % copy)
    assert 'verify: ' in said.stderr and 'Traceback' not in said.stderr


def test_a_reader_meeting_those_problems_names_the_file_and_verify(voc, tmp_path):
    _, path = voc
    missing = _damaged(path, tmp_path / 'a', _remove_shard)
    with pytest.raises(FileNotFoundError, match=r'00001\.(tar|parquet) is missing.*'
                                                'gluonbatch wds verify'):
        DetectionShards(missing)[5]
    with pytest.raises(ValueError, match=r'detection\.json is not valid JSON.*wds verify'):
        DetectionShards(_damaged(path, tmp_path / 'b', _not_json))
    longer = DetectionShards(_damaged(path, tmp_path / 'c', _more_records_listed))
    assert len(longer) == len(DetectionShards(path)) + 2
    with pytest.raises(ValueError, match=r'00004\.parquet holds 4 records, but the dataset '
                                         r'counted 6 for it.*wds verify'):
        longer[len(longer) - 1]


def _rewrite_json_member(copy, record, annotations):
    """Replace record ``record``'s json member in shard 00000 by ``annotations`` (same
    length, padded with spaces: the index stays right)."""
    ds = DetectionShards(copy)
    old = ds.read_raw(record)['json']
    new = json.dumps(annotations).encode()
    assert len(new) <= len(old)
    new += b' ' * (len(old) - len(new))
    tar = os.path.join(copy, '00000.tar')
    data = open(tar, 'rb').read()
    assert data.count(old) == 1
    open(tar, 'wb').write(data.replace(old, new))


@pytest.mark.parametrize('change, says', [
    (lambda a: dict(a, label=[[1, 2, 3, 4, 20, 0]]), 'class id 20.0 in its label'),
    (lambda a: {k: v for k, v in a.items() if k != 'label'}, 'has no label'),
    (lambda a: dict(a, label=[[1, 2, 3]]), 'label of shape (1, 3)'),
    (lambda a: dict(a, label=[[1, 2, 3, 4, 0, 0], [1]]), 'not an array of numbers'),
])
def test_verify_decodes_every_records_annotations(voc, tmp_path, change, says):
    _, path = voc
    ds = DetectionShards(path)
    annotations = {'label': ds.annotations(1)['label'],
                   'label_dtype': ds.annotations(1)['label_dtype']}
    copy = _damaged(path, tmp_path, lambda copy: _rewrite_json_member(
        copy, 1, change(annotations)))
    report = verify(copy)
    assert len(report) == 1 and says in report[0].message, report
    assert report[0].member == '%s.json' % ds.record_id(1)


# --------------------------------------------------------------------------- the whole path

@pytest.fixture(scope='module')
def walked(tmp_path_factory):
    """The path of a new user, on the command line: VOC converted, inspected, filtered to
    the images with at least 3 objects, verified; what each step printed."""
    base = tmp_path_factory.mktemp('walk')
    root = make_voc_example(str(base / 'voc'), num_images=12, seed=7)
    shards, busy = str(base / 'shards'), str(base / 'busy')
    return shards, busy, [
        _gb('wds', 'from-voc', root, shards, '--splits', '2007:trainval', '2012:trainval'),
        _gb('wds', 'inspect', shards, '--records', '1'),
        _gb('wds', 'filter', shards, busy, '--where', 'num_objects >= 3'),
        _gb('wds', 'verify', busy)]


def test_convert_inspect_filter_verify(walked):
    shards, busy, (converted, inspected, _, verified) = walked
    assert converted.stdout.splitlines() == [
        '%s: 24 records in 1 shard, 20 classes' % shards]  # progress is on stderr
    assert 'num_objects (int64)' in inspected.stdout
    assert 'detection: voc, 20 classes' in inspected.stdout
    assert verified.stdout.rstrip().endswith('no problems')
    dataset = DetectionShards(busy)
    assert len(dataset) >= 8 and all(len(dataset[i][1]) >= 3 for i in range(len(dataset)))


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_then_train_two_batches_of_a_seeded_loader(walked, num_workers):
    """The curated dataset trains: 2 batches, the same for any number of workers."""
    dataset = DetectionShards(walked[1])
    loader = DataLoader(dataset.transform(SSDDefaultTrainTransform(96, 96)), batch_size=4,
                        shuffle=True, seed=0, num_workers=num_workers,
                        batchify_fn=Tuple(Stack(), Pad(pad_val=-1)))
    with loader:
        batches = [(images.asnumpy(), labels.asnumpy())
                   for _, (images, labels) in zip(range(2), loader)]
    assert len(batches) == 2 and batches[0][0].shape == (4, 3, 96, 96)
    assert batches[0][1].shape[0] == 4 and batches[0][1].shape[2] == 6
    reference = DataLoader(dataset.transform(SSDDefaultTrainTransform(96, 96)), batch_size=4,
                           shuffle=True, seed=0, num_workers=0,
                           batchify_fn=Tuple(Stack(), Pad(pad_val=-1)))
    for (images, labels), (want_images, want_labels) in zip(batches, reference):
        np.testing.assert_array_equal(images, want_images.asnumpy())
        np.testing.assert_array_equal(labels, want_labels.asnumpy())


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 6), st.integers(1, 5))
def test_any_filter_keeps_exactly_the_records_it_names(tmp_path_factory, least, per_shard):
    base = tmp_path_factory.mktemp('any')
    root = make_voc_example(str(base / 'voc'), num_images=5, seed=8)
    path = from_voc(root, str(base / 'shards'), splits=VOC_SPLITS, samples_per_shard=3,
                    progress=False)
    ds = DetectionShards(path)
    ds.metadata['keep'] = ds.metadata['num_objects'] >= least
    wanted = _kept(path, lambda row: row['num_objects'] >= least)
    tars = ds.to_webdataset(str(base / 'out'), 'keep', samples_per_shard=per_shard)
    if not wanted:
        assert tars == [] and not os.path.exists(base / 'out')
        return
    ours = DetectionShards(str(base / 'out'))
    assert len(ours) == len(wanted) and len(tars) == -(-len(wanted) // per_shard)
    for j, i in enumerate(wanted):
        np.testing.assert_array_equal(ours[j][1], ds[i][1])
        np.testing.assert_array_equal(ours[j][0].asnumpy(), ds[i][0].asnumpy())
    assert verify(str(base / 'out')) == []


@pytest.mark.parametrize('segm, says', [
    ([[[0, 0, 4, 0, 4]]], 'polygons that are not lists of (x, y) coordinates'),
    ([{'x': 1}], 'polygons that are not lists of (x, y) coordinates'),
    (5, 'polygons that are not lists of (x, y) coordinates'),
    ([], 'polygons for 0 objects but 1 label rows'),
])
def test_verify_and_the_reader_decode_every_records_polygons(coco, tmp_path, segm, says):
    _, path = coco
    ds = DetectionShards(path)
    record = next(i for i in range(len(ds)) if len(ds[i][1]) == 1)
    annotations = {'label': ds.annotations(record)['label'],
                   'label_dtype': ds.annotations(record)['label_dtype'], 'segm': segm}
    copy = _damaged(path, tmp_path, lambda copy: _rewrite_json_member(
        copy, record, annotations))
    report = verify(copy)
    assert len(report) == 1 and says in report[0].message, report
    with pytest.raises(ValueError) as caught:
        DetectionShards(copy)[record]
    assert says in str(caught.value) and '%s.json' % ds.record_id(record) in str(caught.value)
    assert 'gluonbatch wds verify %s' % copy in str(caught.value)


@pytest.mark.parametrize('label, says', [
    ([[1, 2, 3, 4, 0, 0], [1]], 'not an array of numbers'),
    ([[1, 2, 3, 4, 20, 0]], 'class id 20.0'),
])
def test_the_reader_names_the_member_of_a_label_it_cannot_give(voc, tmp_path, label, says):
    _, path = voc
    copy = _damaged(path, tmp_path, lambda copy: _rewrite_json_member(
        copy, 1, {'label': label, 'label_dtype': 'float64'}))
    ds = DetectionShards(copy)
    with pytest.raises(ValueError, match=r'member %s\.json .*%s.*gluonbatch wds verify'
                       % (ds.record_id(1), re.escape(says))):
        ds[1]
    np.testing.assert_array_equal(ds[0][1], DetectionShards(path)[0][1])  # others read


@pytest.mark.parametrize('field, value, says', [
    ('segmentation', None, 'segmentation must be true or false'),
    ('options', [], 'options must be an object'),
    ('category_ids', [1], 'category_ids must be null or one int per class'),
    ('classes', 'cat', 'classes must be a list of names'),
])
def test_a_manifest_missing_or_mistyping_a_field_is_one_clear_line(voc, tmp_path, field,
                                                                   value, says):
    _, path = voc

    def edit(copy):
        manifest = json.load(open(os.path.join(copy, MANIFEST)))
        if value is None:
            del manifest[field]
        else:
            manifest[field] = value
        json.dump(manifest, open(os.path.join(copy, MANIFEST), 'w'))
    copy = _damaged(path, tmp_path, edit)
    with pytest.raises(ValueError, match='%s.*gluonbatch wds verify' % says):
        DetectionShards(copy)
    report = verify(copy)
    assert [problem.shard for problem in report] == [''] and says in report[0].message
    assert 'wds verify' not in report[0].message  # verify does not point at itself
    said = _gb('wds', 'verify', copy, check=False)
    assert said.returncode == 1 and 'Traceback' not in said.stderr


def test_verify_refuses_what_is_no_dataset_directory(tmp_path):
    with pytest.raises(TypeError, match='path must be a str or os.PathLike'):
        verify(123)
    with pytest.raises(FileNotFoundError, match='no dataset directory'):
        verify(str(tmp_path / 'nowhere'))


@pytest.mark.parametrize('options, says', [
    (['--filter-column', 'nosuch'], "--filter-column 'nosuch' is not a column"),
    (['--filter-column', 'num_objects'], "--filter-column 'num_objects' must be a column of "
                                         "True or False"),
    (['--old-id-col', 'key'], "--old-id-col 'key' is already a column"),
])
def test_reshard_options_naming_wrong_columns_are_a_usage_error(voc, tmp_path, capsys,
                                                                options, says):
    from gluonbatch.cli import main

    _, path = voc
    assert main(['wds', 'reshard', path, str(tmp_path / 'out'), *options]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count('\n') == 1 and not os.path.exists(tmp_path / 'out')


def test_the_cli_speaks_in_flags(voc, tmp_path, capsys):
    from gluonbatch.cli import main

    _, path = voc
    assert main(['wds', 'reshard', path, str(tmp_path / 'out'), '--samples-per-shard', '1',
                 '--max-shards', '1']) == 1
    err = capsys.readouterr().err
    assert 'raise --max-shards or --samples-per-shard' in err and 'max_shards' not in err


@pytest.mark.parametrize('damage, says', [
    (_remove_shard, 'lists shard 00001 (4 records), but '),
    (_more_records_listed, 'lists shard 00004 with 6 records, but '),
])
def test_detection_filter_refuses_a_source_its_manifest_disagrees_with(voc, tmp_path, damage,
                                                                      says):
    _, path = voc
    copy = _damaged(path, tmp_path, damage)
    ds = DetectionShards(copy)
    ds.metadata['keep'] = ds.metadata['num_objects'] >= 0
    with pytest.raises(ValueError, match=re.escape(says) + '.*gluonbatch wds verify'):
        ds.to_webdataset(str(tmp_path / 'out'), 'keep')
    assert not os.path.exists(tmp_path / 'out')
