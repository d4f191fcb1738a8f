"""The example loaders, the batch picture and the ``gluonbatch`` command, end to end."""
import importlib
import pathlib
import random
import re
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest
from PIL import Image

from gluonbatch.examples.synthetic import SyntheticDetection
from helpers import assert_same_batch

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMAND = pathlib.Path(sys.executable).parent / 'gluonbatch'
SMALL = {'ssd': ['--data-shape', '128'], 'yolo': ['--data-shape', '128'],
         'faster_rcnn': ['--short', '160', '--max-size', '256'],
         'mask_rcnn': ['--short', '160', '--max-size', '256'],
         'center_net': ['--data-shape', '128']}


def run(args, timeout=600):
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.parametrize('num_workers', [0, 2])
@pytest.mark.parametrize('loader', ['ssd', 'yolo', 'faster_rcnn', 'mask_rcnn', 'center_net'])
def test_loader_script_runs_end_to_end(loader, num_workers):
    code, out, err = run([sys.executable, ROOT / 'scripts' / ('%s_loader.py' % loader),
                          '--batches', 2, '--batch-size', 2, '--num-workers', num_workers,
                          '--samples', 8, '--no-progress'] + SMALL[loader])
    assert code == 0, err[-3000:]
    summary = re.search(r'train: 2 batches, (\d+) samples in [\d.]+ s: [\d.]+ batches/s', out)
    assert summary and int(summary.group(1)) == 4, out
    assert 'val: 2 batches' in out
    assert re.search(r'^  image +', out, re.M)  # the first batch's layout is printed


@pytest.mark.parametrize('loader', ['ssd', 'yolo'])
def test_one_training_step_at_a_small_size(loader):
    if loader == 'ssd':
        from gluonbatch.examples.ssd import main
    else:
        from gluonbatch.examples.yolo import main
    main(['--batches', '1', '--batch-size', '2', '--samples', '4', '--train-steps', '1',
          '--no-progress'] + SMALL[loader])


@pytest.mark.parametrize('loader, title', [('ssd', 'SSD'), ('center_net', 'CenterNet')])
def test_training_step_reports_a_finite_loss(loader, title, capsys):
    main = importlib.import_module('gluonbatch.examples.' + loader).main
    assert main(['--batches', '1', '--batch-size', '2', '--samples', '4', '--train-steps',
                 '2', '--no-progress', '--data-shape', '128']) == 0
    losses = re.search(r'%s training: 2 steps, loss ([\d.]+) -> ([\d.]+)' % title,
                       capsys.readouterr().out)
    assert losses and all(0 < float(v) < 1e6 for v in losses.groups())


@pytest.mark.parametrize('loader', ['yolo', 'center_net'])
def test_compare_gluoncv_prints_the_ratio(loader, capsys):
    main = importlib.import_module('gluonbatch.examples.' + loader).main
    main(['--batches', '1', '--batch-size', '2', '--samples', '4', '--compare-gluoncv',
          '--no-progress', '--data-shape', '128'])
    assert re.search(r'gluonbatch [\d.]+ s vs gluoncv [\d.]+ s for 1 batches: [\d.]+x',
                     capsys.readouterr().out)


def center_net_parts(*options):
    """The CenterNet example's network, data and batchify at 128 pixels on 8 samples."""
    from gluonbatch.examples import center_net
    from gluonbatch.examples.runner import loader_parser

    parser = loader_parser('center_net_loader', 'CenterNet', 2, 'data-shape',
                           center_net.DEFAULT_NETWORK)
    return center_net.build(parser.parse_args(['--samples', '8', '--data-shape', '128']
                                              + list(options)))


def test_center_net_batch_equals_gluoncvs_pipeline_on_the_same_samples():
    from gluoncv.data import batchify as gcv
    from gluoncv.data.transforms.presets.center_net import CenterNetDefaultTrainTransform

    parts = center_net_parts()
    # the transform's random crop (numpy) and colour order (Python): seeded alike for both;
    # with seed 0 every sample keeps some object
    random.seed(0)
    np.random.seed(0)
    ours = parts['train_batchify']([parts['train_data'][i] for i in range(3)])
    # what gluoncv's train_center_net.py makes of the same samples, drawn alike
    theirs_data = parts['train_base'].transform(CenterNetDefaultTrainTransform(
        128, 128, num_class=20, scale_factor=parts['net'].scale))
    random.seed(0)
    np.random.seed(0)
    theirs = gcv.Tuple([gcv.Stack() for _ in range(6)])([theirs_data[i] for i in range(3)])
    assert [field.shape for field in ours] == [(3, 3, 128, 128), (3, 20, 32, 32)] + \
        [(3, 2, 32, 32)] * 4
    for field, (mine, gluoncvs) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(mine.asnumpy(), gluoncvs.asnumpy(), rtol=1e-5, atol=1e-5,
                                   err_msg='field %d' % field)
    heatmaps, wh_masks = ours[1].asnumpy(), ours[3].asnumpy()
    # every sample has objects: a peak of 1 in the heatmap and a box size where it is
    assert all((heatmap == 1).any() for heatmap in heatmaps)
    assert ((heatmaps.max(axis=1) == 1) == (wh_masks[:, 0] == 1)).all()


def test_center_net_training_sums_the_scripts_weighted_losses():
    from gluoncv.loss import HeatmapFocalLoss, MaskedL1Loss
    from mxnet import autograd

    from gluonbatch.examples.center_net import train_steps

    parts = center_net_parts()
    batch = next(iter(parts['train_loader'](parts['train_batchify'])))
    images, heatmaps, wh, wh_masks, offsets, offset_masks = (
        field.as_in_context(mx.cpu()) for field in batch)
    with autograd.train_mode():
        heatmap_pred, wh_pred, offset_pred = parts['net'](images)
    # train_center_net.py's defaults: --wh-weight 0.1, --center-reg-weight 1.0
    expected = (HeatmapFocalLoss(from_logits=True)(heatmap_pred, heatmaps)
                + MaskedL1Loss(weight=0.1)(wh_pred, wh, wh_masks)
                + MaskedL1Loss(weight=1.0)(offset_pred, offsets, offset_masks)).asscalar()
    losses = train_steps(parts['net'], [batch], 2)
    assert losses[0] == pytest.approx(expected, rel=1e-4)
    assert losses[1] != losses[0]  # the first step changed the network


@pytest.mark.parametrize('args, message', [
    (['--batch-size', '0'], '0 is not positive'),
    (['--batches', 'many'], "'many' is not a whole number"),
    (['--voc-root', '/no/such/dir'], "dataset directory '/no/such/dir' does not exist"),
    (['--num-workers', '-1'], '-1 is negative'),
])
@pytest.mark.parametrize('loader', ['ssd', 'center_net'])
def test_bad_loader_options_exit_with_a_message(loader, args, message):
    code, _, err = run([sys.executable, ROOT / 'scripts' / ('%s_loader.py' % loader)] + args)
    assert code == 2 and message in err


def test_center_net_input_size_must_fit_the_network():
    code, _, err = run([sys.executable, ROOT / 'scripts' / 'center_net_loader.py',
                        '--data-shape', '100', '--no-progress'])
    assert code != 0 and 'the targets 25x25; use a multiple of 32' in err


def test_rcnn_batch_must_split_into_shards():
    code, _, err = run([sys.executable, ROOT / 'scripts' / 'faster_rcnn_loader.py',
                        '--batch-size', '3', '--num-shards', '2'])
    assert code != 0 and 'multiple of --num-shards' in err


@pytest.mark.parametrize('loader', ['ssd', 'yolo', 'faster_rcnn', 'center_net'])
def test_show_draws_a_png_of_the_expected_size(loader, tmp_path):
    out = tmp_path / ('%s.png' % loader)
    code, stdout, err = run([COMMAND, 'show', '--loader', loader, '-o', out,
                             '--batch-size', 4, '--num-shards', 2])
    assert code == 0, err[-3000:]
    assert stdout.strip() == str(out)
    with Image.open(out) as picture:
        assert picture.format == 'PNG'
        assert picture.size == (1280, 320)  # 4 images in a row, 4 x 3.4 in + title at 80 dpi


def test_demo_runs_both_loaders_and_draws_the_batch(tmp_path):
    out = tmp_path / 'demo_batch.png'
    code, stdout, err = run([COMMAND, 'demo', '-o', out, '--batches', 2, '--num-workers', 0])
    assert code == 0, err[-3000:]
    assert 'Faster R-CNN train: 2 batches' in stdout and 'SSD train: 2 batches' in stdout
    assert 'drawn in %s' % out in stdout
    with Image.open(out) as picture:
        assert picture.size == (1280, 320)


@pytest.mark.parametrize('args', [['--help'], ['demo', '--help'], ['show', '--help'],
                                  ['wds', '--help'],
                                  ['wds', 'index', '--help'], ['wds', 'inspect', '--help'],
                                  ['wds', 'reshard', '--help']])
def test_help_of_every_command(args):
    code, stdout, _ = run([COMMAND] + args)
    assert code == 0 and 'usage: gluonbatch %s' % ' '.join(args[:-1]) in stdout.lower()


@pytest.mark.parametrize('args, message', [
    (['show', '--loader', 'rcnn'], "invalid choice: 'rcnn'"),
    (['show'], 'the following arguments are required: --loader'),
    (['demo', '--batches', '0'], '0 is not positive'),
    ([], 'required: COMMAND'),
])
def test_bad_command_arguments(args, message):
    code, _, err = run([COMMAND] + args)
    assert code == 2 and message in err


def test_synthetic_masks_follow_the_boxes():
    image, label, polygons = SyntheticDetection(length=3, masks=True, seed=4)[2]
    assert len(polygons) == len(label)
    for box, (outline,) in zip(label, polygons):
        assert outline[:, 0].min() == pytest.approx(box[0], abs=1e-3)
        assert outline[:, 1].max() == pytest.approx(box[3], abs=1e-3)
    height, width = image.shape[:2]
    assert (label[:, 2] <= width).all() and (label[:, 3] <= height).all()


def test_picture_draws_heatmaps_over_the_images(tmp_path):
    from gluonbatch.examples.picture import draw_detection_batch

    def draw(name, heatmaps):
        path = draw_detection_batch(str(tmp_path / name), [np.zeros((3, 64, 64))],
                                    [np.array([[8, 8, 40, 40, 1]])], [(64, 64)], [0],
                                    'one image', heatmaps=heatmaps)
        with Image.open(path) as picture:
            return np.asarray(picture.convert('RGB'))

    plain = draw('plain.png', None)
    hot = np.zeros((16, 16))
    hot[2:6, 2:6] = 1
    assert (draw('hot.png', [hot]) != plain).any()
    assert (draw('cold.png', [np.zeros((16, 16))]) == plain).all()  # zero is transparent
