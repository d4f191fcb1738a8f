"""The example loaders, the batch picture and the ``gluonbatch`` command, end to end.

The loaders and commands run in this process (their ``main(argv)`` returns the exit code);
a fresh interpreter runs only where it is what is tested: each ``scripts/*_loader.py`` and
the installed ``gluonbatch`` command starting up (the slow tier).
"""
import math
import pathlib
import random
import re
import subprocess
import sys

import matplotlib
import mxnet as mx
import numpy as np
import pytest
from PIL import Image

from gluonbatch import cli
from gluonbatch.examples import center_net, rcnn, ssd, yolo
from gluonbatch.examples.synthetic import SyntheticDetection

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMAND = pathlib.Path(sys.executable).parent / 'gluonbatch'
LOADERS = ('ssd', 'yolo', 'faster_rcnn', 'mask_rcnn', 'center_net')
#: what each scripts/<loader>_loader.py runs
MAINS = {'ssd': ssd.main, 'yolo': yolo.main, 'faster_rcnn': rcnn.main_faster,
         'mask_rcnn': rcnn.main_mask, 'center_net': center_net.main}
TITLES = {'ssd': 'SSD', 'yolo': 'YOLOv3', 'faster_rcnn': 'Faster R-CNN',
          'mask_rcnn': 'Mask R-CNN', 'center_net': 'CenterNet'}
SMALL = {'ssd': ['--data-shape', '128'], 'yolo': ['--data-shape', '128'],
         'faster_rcnn': ['--short', '160', '--max-size', '256'],
         'mask_rcnn': ['--short', '160', '--max-size', '256'],
         'center_net': ['--data-shape', '128']}
# R-CNN training needs more anchors than 160 pixels give (its proposals take the top 2000)
TRAIN_SMALL = dict(SMALL, faster_rcnn=['--short', '192', '--max-size', '320'],
                   mask_rcnn=['--short', '192', '--max-size', '320'])
END_TO_END = ['--batches', '2', '--batch-size', '2', '--samples', '8', '--no-progress']


def run(args, timeout=600):
    """A fresh interpreter: ``(exit code, stdout, stderr)``."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    return result.returncode, result.stdout, result.stderr


def exit_of(function, *args):
    """``function(*args)``'s exit code where argparse (or an option check) exits instead."""
    with pytest.raises(SystemExit) as exit:
        function(*args)
    return exit.value.code


@pytest.fixture(autouse=True)
def no_global_state_changes():
    """Whatever runs in this process leaves MXNet's numpy mode, matplotlib and sys.argv."""
    before = (mx.util.is_np_array(), mx.util.is_np_shape(), matplotlib.rcParams['backend'],
              list(sys.argv))
    yield
    assert (mx.util.is_np_array(), mx.util.is_np_shape(), matplotlib.rcParams['backend'],
            list(sys.argv)) == before


def assert_loader_output(out):
    """The summary lines and the first batch's layout of a run over END_TO_END."""
    summary = re.search(r'train: 2 batches, (\d+) samples in [\d.]+ s: [\d.]+ batches/s', out)
    assert summary and int(summary.group(1)) == 4, out
    assert 'val: 2 batches' in out
    assert re.search(r'^  image +', out, re.M)  # the first batch's layout is printed


def printed_losses(loader, steps, out):
    """The losses of the ``<title> training: <steps> steps, loss a -> b`` line."""
    line = re.search(r'^%s training: %d steps?, loss (.*)$' % (TITLES[loader], steps), out,
                     re.M)
    assert line, out
    return [float(value) for value in line.group(1).split(' -> ')]


@pytest.mark.parametrize('num_workers', [0, 2])
@pytest.mark.parametrize('loader', LOADERS)
def test_loader_runs_end_to_end(loader, num_workers, capsys):
    assert MAINS[loader](END_TO_END + ['--num-workers', str(num_workers)]
                         + SMALL[loader]) == 0
    out = capsys.readouterr().out
    assert_loader_output(out)
    # every example's train loader is seeded (R-CNN's aspect-ratio buckets too)
    assert '%s train: seeded (--seed 0): the same batches' % TITLES[loader] in out, out
    assert 'unseeded' not in out


class _OpenCVThreads(mx.gluon.data.Dataset):
    """Eight samples, each the number of threads OpenCV runs on where it is read."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        import cv2
        return cv2.getNumThreads()


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_the_examples_workers_run_opencv_on_one_thread_and_this_process_keeps_its_own(
        num_workers):
    """The examples set no thread count: their loaders' workers run OpenCV on one thread by
    themselves, and this process keeps its setting (which a loader without workers uses)."""
    import cv2
    from gluonbatch.examples.runner import detector_loaders, loader_parser

    args = loader_parser('ssd', 'ssd', 2, 'data-shape', NETWORKS['ssd']).parse_args(
        ['--num-workers', str(num_workers)])
    before = cv2.getNumThreads()
    cv2.setNumThreads(2)
    try:
        train_loader, val_loader, _ = detector_loaders(args, _OpenCVThreads(), _OpenCVThreads())
        with train_loader(list) as loader, val_loader:
            seen = {count for batch in loader for count in batch}
        assert seen == {1 if num_workers else 2}
        assert cv2.getNumThreads() == 2
    finally:
        cv2.setNumThreads(before)


@pytest.mark.parametrize('num_workers', [0, 2])
def test_an_example_leaves_no_worker_process_behind(num_workers, capsys):
    """Each loader is closed once timed, its workers stopped: none outlives the example,
    though it stopped loading after --batches batches."""
    import multiprocessing

    before = set(multiprocessing.active_children())
    assert ssd.main(END_TO_END + ['--num-workers', str(num_workers), '--compare-gluoncv']
                    + SMALL['ssd']) == 0
    assert_loader_output(capsys.readouterr().out)
    assert not set(multiprocessing.active_children()) - before


def test_a_timed_loader_is_left_open_for_its_owner():
    from gluonbatch import DataLoader
    from gluonbatch.examples.runner import time_loader

    with DataLoader(mx.gluon.data.SimpleDataset(list(range(64))), batch_size=2,
                    num_workers=2) as loader:
        batches, samples, _, first, _ = time_loader(loader, 3, 'test', progress=False)
        assert (batches, samples) == (3, 6) and first.asnumpy().tolist() == [0, 1]
        # the owner may go on: the next pass starts a new epoch, unseeded as MXNet's
        assert len(list(loader)) == 32


#: the network each single-stage example builds by default
NETWORKS = {'ssd': 'ssd_300_mobilenet0.25_voc', 'yolo': 'yolo3_mobilenet0.25_voc',
            'center_net': center_net.DEFAULT_NETWORK}


def example_train_batches(loader, num_workers):
    """The first epoch of an example's train loader (8 samples, batches of 2), each
    batch's fields as numpy arrays."""
    from gluonbatch._core.tree import array_leaves
    from gluonbatch.examples.runner import loader_parser

    options = ['--samples', '8', '--num-workers', str(num_workers)] + SMALL[loader]
    if loader == 'faster_rcnn':
        parser = loader_parser(loader, loader, 2, 'short', rcnn.DEFAULT_NETWORKS['faster'])
        parts = rcnn.build('faster', parser.parse_args(options))
    else:
        module = {'ssd': ssd, 'yolo': yolo, 'center_net': center_net}[loader]
        parser = loader_parser(loader, loader, 2, 'data-shape', NETWORKS[loader])
        parts = module.build(parser.parse_args(options))
    return [[field.asnumpy() for field in array_leaves(batch)]
            for batch in parts['train_loader'](parts['train_batchify'])]


@pytest.mark.parametrize('loader', ['ssd', 'center_net', pytest.param(
    'faster_rcnn', marks=pytest.mark.slow)])  # R-CNN: its aspect-ratio buckets seeded too
def test_the_seeded_train_loader_gives_the_same_batches_for_any_num_workers(loader):
    # CenterNet's preset owns a RandomState for its colours: it is seeded too
    alone = example_train_batches(loader, 0)
    assert len(alone) == 4
    for batch, other in zip(alone, example_train_batches(loader, 2)):
        for field, other_field in zip(batch, other):
            np.testing.assert_array_equal(field, other_field)


@pytest.mark.parametrize('loader', ['ssd', 'yolo', 'center_net'])
def test_the_train_presets_defer_their_images_to_the_batch(loader):
    from gluonbatch.examples.runner import loader_parser
    from gluonbatch.transforms.deferred import DeferredImage

    module = {'ssd': ssd, 'yolo': yolo, 'center_net': center_net}[loader]
    parser = loader_parser(loader, loader, 2, 'data-shape', NETWORKS[loader])
    parts = module.build(parser.parse_args(['--samples', '2'] + SMALL[loader]))
    image = parts['train_data'][0][0]
    assert isinstance(image, DeferredImage) and image.shape[0] == 3


@pytest.mark.slow
@pytest.mark.parametrize('loader', LOADERS)
def test_loader_script_starts_and_runs_end_to_end(loader):
    code, out, err = run([sys.executable, ROOT / 'scripts' / ('%s_loader.py' % loader)]
                         + END_TO_END + ['--num-workers', 2] + SMALL[loader])
    assert code == 0, err[-3000:]
    assert_loader_output(out)


# R-CNN training steps cost tens of seconds of CPU: the slow tier
@pytest.mark.parametrize('loader', [
    'ssd', 'yolo', 'center_net', pytest.param('faster_rcnn', marks=pytest.mark.slow),
    pytest.param('mask_rcnn', marks=pytest.mark.slow)])
def test_training_steps_print_finite_positive_losses(loader, capsys):
    steps = 1 if 'rcnn' in loader else 2
    # one DataLoader worker here, none and two in the end-to-end runs
    assert MAINS[loader](END_TO_END + ['--num-workers', '1', '--train-steps', str(steps)]
                         + TRAIN_SMALL[loader]) == 0
    captured = capsys.readouterr()
    assert_loader_output(captured.out)
    losses = printed_losses(loader, steps, captured.out)
    assert len(losses) == steps and all(0 < loss < 1e6 for loss in losses), losses
    assert 'not a finite number' not in captured.err


@pytest.mark.parametrize('loader', ['ssd', 'yolo', 'center_net'])
def test_a_diverging_training_exits_non_zero_with_one_line(loader, capsys):
    # a learning rate this large overflows the weights within two or three steps
    code = MAINS[loader](['--batches', '1', '--batch-size', '2', '--samples', '2',
                          '--no-progress', '--train-steps', '4', '--learning-rate', '1e30']
                         + SMALL[loader])
    captured = capsys.readouterr()
    assert code == 1
    losses = printed_losses(loader, 4, captured.out)
    assert math.isfinite(losses[0]) and losses[0] > 0  # the untrained network's loss
    first_bad = next(step for step, loss in enumerate(losses, 1) if not math.isfinite(loss))
    assert re.fullmatch(r'%s training: the loss of step %d is (nan|-?inf), not a finite '
                        r'number; training diverged\n' % (TITLES[loader], first_bad),
                        captured.err), captured.err


@pytest.mark.parametrize('value, message', [('0', '0 is not a positive finite number'),
                                            ('nan', 'nan is not a positive finite number'),
                                            ('fast', "'fast' is not a number")])
def test_learning_rate_must_be_a_positive_number(value, message, capsys):
    assert exit_of(ssd.main, ['--learning-rate', value]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize('loader', ['yolo', 'center_net'])
def test_compare_gluoncv_prints_the_ratio(loader, capsys):
    assert MAINS[loader](['--batches', '1', '--batch-size', '2', '--samples', '4',
                          '--compare-gluoncv', '--no-progress', '--data-shape', '128']) == 0
    assert re.search(r'gluonbatch [\d.]+ s vs gluoncv [\d.]+ s for 1 batch: [\d.]+x',
                     capsys.readouterr().out)


def center_net_parts(*options):
    """The CenterNet example's network, data and batchify at 128 pixels on 8 samples."""
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
    (['--seed', '-1'], '-1 is negative'),
])
@pytest.mark.parametrize('loader', ['ssd', 'center_net'])
def test_bad_loader_options_exit_with_a_message(loader, args, message, capsys):
    assert exit_of(MAINS[loader], args) == 2
    assert message in capsys.readouterr().err


def test_center_net_input_size_must_fit_the_network():
    # the message is the exit code: Python prints it on stderr and exits with 1
    code = exit_of(center_net.main, ['--data-shape', '100', '--no-progress'])
    assert code not in (0, None) and 'the targets 25x25; use a multiple of 32' in str(code)


def test_rcnn_batch_must_split_across_the_devices():
    code = exit_of(rcnn.main_faster, ['--batch-size', '3', '--num-devices', '2'])
    assert code not in (0, None) and 'multiple of --num-devices' in str(code)


def assert_show_output(out, stdout):
    assert stdout.strip() == str(out)
    with Image.open(out) as picture:
        assert picture.format == 'PNG'
        assert picture.size == (1280, 320)  # 4 images in a row, 4 x 3.4 in + title at 80 dpi


@pytest.mark.parametrize('loader', ['ssd', 'yolo', 'faster_rcnn', 'center_net'])
def test_show_draws_a_png_of_the_expected_size(loader, tmp_path, capsys):
    out = tmp_path / ('%s.png' % loader)
    assert cli.main(['show', '--loader', loader, '-o', str(out), '--batch-size', '4',
                     '--num-devices', '2']) == 0
    assert_show_output(out, capsys.readouterr().out)


@pytest.mark.slow
def test_the_installed_gluonbatch_command_starts_and_runs(tmp_path):
    out = tmp_path / 'ssd.png'
    code, stdout, err = run([COMMAND, 'show', '--loader', 'ssd', '-o', out,
                             '--batch-size', 4, '--num-devices', 2])
    assert code == 0, err[-3000:]
    assert_show_output(out, stdout)


def test_demo_runs_both_loaders_and_draws_the_batch(tmp_path, capsys):
    out = tmp_path / 'demo_batch.png'
    assert cli.main(['demo', '-o', str(out), '--batches', '2', '--num-workers', '0']) == 0
    stdout = capsys.readouterr().out
    assert 'Faster R-CNN train: 2 batches' in stdout and 'SSD train: 2 batches' in stdout
    assert 'SSD train: seeded (--seed 0)' in stdout  # and says so
    assert 'Faster R-CNN train: seeded (--seed 0)' in stdout
    assert 'drawn in %s' % out in stdout
    with Image.open(out) as picture:
        assert picture.size == (1280, 320)


def test_demo_returns_a_failing_loaders_exit_code_and_draws_nothing(tmp_path, monkeypatch,
                                                                    capsys):
    out = tmp_path / 'demo_batch.png'
    monkeypatch.setattr(rcnn, 'main_faster', lambda argv: 0)
    monkeypatch.setattr(ssd, 'main', lambda argv: 1)
    assert cli.main(['demo', '-o', str(out), '--batches', '2', '--num-workers', '0']) == 1
    assert 'drawn in' not in capsys.readouterr().out and not out.exists()


@pytest.mark.parametrize('args', [['--help'], ['demo', '--help'], ['show', '--help'],
                                  ['wds', '--help'],
                                  ['wds', 'index', '--help'], ['wds', 'inspect', '--help'],
                                  ['wds', 'reshard', '--help']])
def test_help_of_every_command(args, capsys):
    assert exit_of(cli.main, args) == 0
    assert 'usage: gluonbatch %s' % ' '.join(args[:-1]) in capsys.readouterr().out.lower()


@pytest.mark.parametrize('args, message', [
    (['show', '--loader', 'rcnn'], "invalid choice: 'rcnn'"),
    (['show'], 'the following arguments are required: --loader'),
    (['demo', '--batches', '0'], '0 is not positive'),
    ([], 'required: COMMAND'),
])
def test_bad_command_arguments(args, message, capsys):
    assert exit_of(cli.main, args) == 2
    assert message in capsys.readouterr().err


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


@pytest.fixture(scope='module')
def voc_shards(tmp_path_factory):
    """Detection shards converted from a small VOC: 12 images in 3 shards."""
    from gluonbatch.detection import from_voc, make_voc_example

    base = tmp_path_factory.mktemp('voc-shards')
    root = make_voc_example(str(base / 'voc'), num_images=12, size=(160, 120), seed=5)
    return from_voc(root, str(base / 'shards'), splits=[(2007, 'trainval')],
                    samples_per_shard=4)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_ssd_loader_trains_from_shards(voc_shards, num_workers, capsys):
    assert ssd.main(['--shards', voc_shards, '--shard-window', '2', '--batches', '2',
                     '--batch-size', '2', '--no-progress', '--num-workers', str(num_workers)]
                    + SMALL['ssd']) == 0
    assert_loader_output(capsys.readouterr().out)


def test_faster_rcnn_loader_trains_from_shards(voc_shards, capsys):
    assert rcnn.main_faster(['--shards', voc_shards, '--batches', '2', '--batch-size', '2',
                             '--no-progress'] + SMALL['faster_rcnn']) == 0
    assert_loader_output(capsys.readouterr().out)


def test_shards_train_batches_follow_the_window_order_for_any_num_workers(voc_shards):
    """The examples' train loader over shards reads them in the window sampler's order
    (each batch's labels those of the order's samples), the same for 0, 1 and 2 workers."""
    from gluonbatch.examples.runner import (detection_dataset, detector_loaders,
                                            loader_parser, train_order)
    from gluonbatch.samplers import ShardWindowSampler

    def label_batches(num_workers):
        args = loader_parser('ssd', 'ssd', 2, 'data-shape', NETWORKS['ssd']).parse_args(
            ['--shards', voc_shards, '--shard-window', '1', '--num-workers',
             str(num_workers)])
        dataset = detection_dataset(args)
        train_loader, _, _ = detector_loaders(args, dataset, dataset,
                                              train_order(args, dataset))
        return [[label.tolist() for _, label in batch] for batch in train_loader(list)]

    dataset = detection_dataset(loader_parser('ssd', 'ssd', 2, 'data-shape', NETWORKS['ssd'])
                                .parse_args(['--shards', voc_shards]))
    order = ShardWindowSampler(dataset, window=1, seed=0).indices(0).tolist()
    expected = [dataset[i][1].tolist() for i in order]
    alone = label_batches(0)
    assert len(alone) == 6 and sum(alone, []) == expected
    for num_workers in (1, 2):
        assert label_batches(num_workers) == alone


def test_val_shards_need_shards(voc_shards):
    assert '--val-shards needs --shards' in str(exit_of(ssd.main, ['--val-shards', voc_shards]
                                                       + SMALL['ssd']))


def test_mask_rcnn_needs_shards_with_polygons(voc_shards, capsys):
    assert rcnn.main_mask(['--shards', voc_shards] + SMALL['mask_rcnn']) == 1
    err = capsys.readouterr().err
    assert 'has no polygons' in err and err.count('\n') == 1 and ': error: ' in err
