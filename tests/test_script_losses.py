"""``python -m benchmarks.script_losses``: run a training script before and after the swap
to gluonbatch's batch-target batchify functions and compare the losses it logs.

gluoncv's training scripts are not part of the repository; the smoke test runs a small
stand-in for ``train_ssd.py`` that holds the lines the SSD edits replace, loads the
synthetic VOC dataset the tool writes, and logs two losses per batch as the script does.
"""
import pathlib
import re
import subprocess
import sys

import pytest

from benchmarks.script_losses import EDITS, apply_edits

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: Logs, per batch, "losses" that are functions of the batch: equal losses mean equal
#: batches, whichever of the transform or the batchify function computed the targets.
TRAIN_SSD = '''\
import argparse
import random

import mxnet as mx
import numpy as np
from gluoncv.data import VOCDetection
from gluoncv.data.batchify import Tuple, Stack, Pad
from gluoncv.data.transforms.presets.ssd import SSDDefaultTrainTransform
from mxnet import gluon


def grid_anchors(size, cells=4):
    """(1, N, 4) anchors in center format: two square sizes on a grid of cells."""
    centers = (np.arange(cells) + 0.5) * size / cells
    cx, cy = [grid.ravel() for grid in np.meshgrid(centers, centers)]
    boxes = [np.stack([cx, cy, np.full_like(cx, side), np.full_like(cx, side)], axis=1)
             for side in (0.3 * size, 0.6 * size)]
    return mx.nd.array(np.concatenate(boxes)[np.newaxis])


def get_dataloader(train_dataset, width, height, batch_size, anchors):
    batchify_fn = Tuple(Stack(), Stack(), Stack())  # stack image, cls_targets, box_targets
    return gluon.data.DataLoader(
        train_dataset.transform(SSDDefaultTrainTransform(width, height, anchors)),
        batch_size, True, batchify_fn=batchify_fn, last_batch='rollover', num_workers=0)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--data-shape', type=int)
    parser.add_argument('--batch-size', type=int)
    parser.add_argument('--seed', type=int)
    args, _ = parser.parse_known_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    mx.random.seed(args.seed)
    size = args.data_shape
    dataset = VOCDetection(splits=[(2007, 'trainval'), (2012, 'trainval')])
    loader = get_dataloader(dataset, size, size, args.batch_size, grid_anchors(size))
    metrics = [mx.metric.Loss('CrossEntropy'), mx.metric.Loss('SmoothL1')]
    for i, (images, cls_targets, box_targets) in enumerate(loader):
        metrics[0].update(0, [cls_targets.mean() + images.mean()])
        metrics[1].update(0, [box_targets.abs().mean()])
        print('[Epoch 0][Batch %d], ' % i + ', '.join(
            '%s=%.3f' % metric.get() for metric in metrics))
    print('[Epoch 0] Training cost: 0.1, ' + ', '.join(
        '%s=%.3f' % metric.get() for metric in metrics))


if __name__ == '__main__':
    main()
'''


@pytest.mark.slow  # three fresh interpreters importing gluoncv: the tool and its two runs
def test_the_ssd_swap_logs_the_same_losses(tmp_path):
    (tmp_path / 'train_ssd.py').write_text(TRAIN_SSD)
    result = subprocess.run(
        [sys.executable, '-m', 'benchmarks.script_losses', str(tmp_path),
         '--cases', 'ssd', '--images', '4', '--val-images', '1', '--batch-size', '2'],
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    out = result.stdout
    assert '== ssd: ' in out and 'dataset: 4 synthetic VOC train images, 1 test images' in out
    # two batches of two images and the epoch's line, each equal in both runs; the batches'
    # images are the same, and so are the targets the batchify function computed
    rows = re.findall(r'^(\d+|epoch 0) +(CrossEntropy=\S+ SmoothL1=\S+) +'
                      r'(CrossEntropy=\S+ SmoothL1=\S+) +(\S+)', out, re.M)
    assert [(row[0], row[3]) for row in rows] == [('0', 'yes'), ('1', 'yes'),
                                                  ('epoch 0', 'yes')], out
    assert all(row[1] == row[2] for row in rows)
    assert re.search(r'^0 .* 0\.0e\+00; \S+$', out, re.M), out
    assert out.rstrip().endswith('all logged losses equal: yes')


def test_a_line_to_replace_must_be_there_once():
    edits = EDITS['ssd']
    with pytest.raises(ValueError, match='train_ssd.py: the line to replace is found 0 '):
        apply_edits('import mxnet\n', edits, 'train_ssd.py')
    twice = edits[0][0] + '\n' + edits[0][0] + '\n'
    with pytest.raises(ValueError, match='found 2 times'):
        apply_edits(twice, edits[:1])
