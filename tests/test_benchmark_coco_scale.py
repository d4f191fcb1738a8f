"""The COCO-scale measurement (``benchmarks/coco_scale.py``) at a tiny size: its synthetic
COCO reads alike through gluoncv's ``COCODetection`` and, converted, through
``DetectionShards``, and its measurement returns every number it reports."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from benchmarks import coco_scale

gluoncv_data = pytest.importorskip('gluoncv.data')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPLIT = ('instances_train2017',)


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
    base = tmp_path_factory.mktemp('coco_scale')
    counts = coco_scale.write_synthetic_coco(str(base / 'coco'), num_images=20, seed=3)
    return str(base / 'coco'), coco_scale.convert(str(base / 'coco'), str(base / 'shards')), \
        counts


def test_the_synthetic_coco_reads_alike_through_gluoncv_and_the_shards(converted):
    from gluonbatch.detection import DetectionShards

    root, shards, counts = converted
    theirs = gluoncv_data.COCODetection(root=root, splits=SPLIT)
    ours = DetectionShards(shards)
    assert counts['images'] == 20 and len(theirs) == len(ours) == 20 - counts['empty']
    assert list(ours.classes) == list(theirs.classes) == gluoncv_data.COCODetection.CLASSES
    boxes = 0
    for i in range(len(theirs)):
        (image, label), (their_image, their_label) = ours[i], theirs[i]
        assert label.dtype == their_label.dtype and np.array_equal(label, their_label), i
        assert image.shape == their_image.shape
        boxes += len(label)
    assert boxes == counts['boxes']  # every box the JSON holds is a box gluoncv keeps
    with open(os.path.join(root, 'annotations', 'instances_train2017.json')) as handle:
        document = json.load(handle)
    # COCO's category ids, person the most common
    categories = [a['category_id'] for a in document['annotations']]
    assert set(categories) <= set(theirs.json_id_to_contiguous)
    assert max(set(categories), key=categories.count) == 1
    ours.close()


@pytest.mark.parametrize('kind', coco_scale.KINDS)
def test_a_measurement_reports_every_number(converted, kind):
    root, shards, counts = converted
    result = coco_scale.measure(kind, root if kind == 'gluoncv' else shards, workers=2,
                                batch_size=4)
    assert result['items'] == 20 - counts['empty'] and result['boxes'] == counts['boxes']
    assert result['batches'] == -(-result['items'] // 4)
    assert result['open_s'] > 0 and result['epoch_s'] > 0
    assert result['rss_before'] > 0 and result['rss_opened'] > 0
    assert len(result['workers']) == 2
    for worker in result['workers']:
        assert worker['pid'] > 0 and worker['start'] > 0 and worker['end'] > 0
    line = coco_scale.table({kind: result}).splitlines()[-1]
    assert line.startswith('| ') and ' MB | ' in line and ' -> ' in line


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match='num_images'):
        coco_scale.write_synthetic_coco(str(tmp_path), num_images=-1)
    with pytest.raises(TypeError, match='num_images'):
        coco_scale.write_synthetic_coco(str(tmp_path), num_images='20')
    with pytest.raises(ValueError, match='kind'):
        coco_scale.measure('voc', str(tmp_path))


def test_a_second_run_reuses_the_data_of_the_same_size_and_seed(tmp_path, capsys):
    work = str(tmp_path / 'work')
    first = coco_scale.prepare(work, 6, 1)
    assert 'reusing' not in capsys.readouterr().out
    assert coco_scale.prepare(work, 6, 1) == first
    assert 'reusing the data in %s' % work in capsys.readouterr().out
    with pytest.raises(ValueError, match='holds other files'):
        coco_scale.prepare(work, 7, 1)


@pytest.mark.slow  # fresh interpreters: the script and a child per dataset
def test_the_script_prints_the_table_and_refuses_a_foreign_work_directory(tmp_path):
    work, out = tmp_path / 'work', tmp_path / 'out.json'
    command = [sys.executable, os.path.join('benchmarks', 'coco_scale.py'), '--images', '20',
               '--work', str(work), '--batch-size', '4', '--json', str(out)]
    first = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "| gluoncv's `COCODetection` |" in first.stdout
    assert '| `DetectionShards` |' in first.stdout
    assert 'different' not in first.stdout  # both epochs read the same items and boxes
    report = json.loads(out.read_text())
    assert report['data']['images'] == 20 and set(report['results']) == {'gluoncv', 'shards'}
    other = subprocess.run(command[:3] + ['30', '--work', str(work)], cwd=ROOT,
                           capture_output=True, text=True)
    assert other.returncode != 0 and 'holds other files' in other.stderr
