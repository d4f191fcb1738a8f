"""Seeded loading end to end: the same batches everywhere, and no two samples sharing draws.

Each pipeline is a detection preset (gluonbatch's or gluoncv's) over the embedded
:class:`~gluonbatch.examples.synthetic.SyntheticDetection` with its training batchify
function, loaded by gluonbatch's loaders (``seed=``) or by MXNet's own ``DataLoader`` over a
:class:`~gluonbatch.seeded.SeededDataset` with a
:class:`~gluonbatch.samplers.SeededBatchSampler`. Every sample also carries a probe: a draw of
Python's ``random``, numpy's and MXNet's generators made before its preset runs. The
SHA-256 of every batch (each array's bytes, shape and dtype) over three epochs is compared
across worker counts, MXNet's thread pool, recycled shared memory on and off and MXNet's
numpy mode; the probes show that no two samples of a run share their draws.
"""
import hashlib
import multiprocessing
import random
import warnings

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data.mixup.detection import MixupDetection
from gluoncv.data.transforms import presets as gcv_presets

from gluonbatch import memory
from gluonbatch.batchify import (CenterNetTrainBatchify, FasterRCNNTrainBatchify,
                                 MaskRCNNTrainBatchify, Pad, SSDTrainBatchify, Stack, Tuple,
                                 YOLO3TrainBatchify)
from gluonbatch.dataloader import DetectionDataLoader, RandomTransformDataLoader
from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.seeded import SeededDataset
from gluonbatch.seeded.keys import batch_choice
from gluonbatch.transforms.presets import center_net, rcnn, ssd, yolo
from tiers import each_value, pairwise

SEED = 2024
SAMPLES, BATCH, EPOCHS = 10, 4, 3
SIZE_RANGE = ((40, 60), (50, 80))
SIZE = 64                      # SSD, CenterNet and the fixed YOLOv3 input size
YOLO_SIZES = (64, 96)          # the random shapes of gluonbatch's loader
NUM_CLASS = 20
RCNN = {'short': (32, 48), 'max_size': 96}
NETS = {'yolo': 'yolo3_mobilenet0.25_voc', 'ssd': 'ssd_300_mobilenet0.25_voc',
        'faster_rcnn': 'faster_rcnn_resnet50_v1b_voc', 'mask_rcnn': 'mask_rcnn_resnet18_v1b_coco'}

PRESETS = ['ssd', 'yolo', 'yolo_mixup', 'center_net', 'faster_rcnn', 'mask_rcnn']
SOURCES = ['gluonbatch', 'gluoncv']
#: (loader, workers): gluonbatch's loaders, MXNet's (processes, or threads)
RUNNERS = {'ours-0': ('ours', 0), 'ours-1': ('ours', 1), 'ours-2': ('ours', 2),
           'ours-4': ('ours', 4), 'mxnet-0': ('mxnet', 0), 'mxnet-1': ('mxnet', 1),
           'mxnet-2': ('mxnet', 2), 'mxnet-4': ('mxnet', 4), 'threads-2': ('threads', 2)}
RECYCLING = {'recycle': True, 'no-recycle': False}
MODES = {'legacy': False, 'numpy': True}


def _quietly(build, *args, **kwargs):
    """``build(*args, **kwargs)`` without its warnings (DetectionDataLoader is deprecated,
    still used; gluoncv's presets warn about their networks' untyped inputs)."""
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return build(*args, **kwargs)


# --------------------------------------------------------------------------- draws

class Draws(mx.gluon.data.Dataset):
    """16 samples, each one draw of Python's, numpy's and MXNet's generators. With a
    ``barrier``, every read waits for the other worker's: two workers load two batches
    each, in step, whatever the scheduling."""

    def __init__(self, barrier=None):
        self.barrier = barrier

    def __len__(self):
        return 16

    def __getitem__(self, index):
        if self.barrier is not None:
            self.barrier.wait(timeout=60)
        return np.array([random.random(), np.random.random(),
                         mx.nd.random.uniform().asscalar()], np.float64)


def draws_of(loader, epochs=2):
    """Per epoch, the (16, 3) draws of its samples in the order loaded."""
    return [np.concatenate([batch.asnumpy() for batch in loader]) for _ in range(epochs)]


def draws_dataset(num_workers):
    return Draws(multiprocessing.get_context('fork').Barrier(2) if num_workers == 2 else None)


def test_mxnet_workers_repeat_the_unseeded_draws():
    """Documents MXNet's behaviour (the reason for seeded loading): its worker processes
    fork with the parent's numpy and MXNet generator states, so two workers draw the same
    numbers for their samples; Python reseeds ``random`` in a forked child."""
    loader = mx.gluon.data.DataLoader(draws_dataset(2), batch_size=4, num_workers=2)
    for epoch in draws_of(loader):
        assert len(np.unique(epoch[:, 0])) == 16
        assert len(np.unique(epoch[:, 1])) == 8 and len(np.unique(epoch[:, 2])) == 8


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('loader_kind', ['mxnet', 'gluonbatch'])
def test_seeded_samples_draw_their_own_numbers(loader_kind, num_workers):
    dataset = draws_dataset(num_workers)
    if loader_kind == 'mxnet':
        loader = mx.gluon.data.DataLoader(
            SeededDataset(dataset), batch_sampler=SeededBatchSampler(16, 4, seed=SEED),
            num_workers=num_workers)
    else:
        loader = _quietly(DetectionDataLoader, dataset, batch_size=4, shuffle=True,
                          batchify_fn=Stack(), num_workers=num_workers, seed=SEED)
    epochs = draws_of(loader)
    for epoch in epochs:
        for generator in range(3):
            assert len(np.unique(epoch[:, generator])) == 16
    assert not set(epochs[0].ravel()) & set(epochs[1].ravel())  # the epochs differ
    want = draws_of(mx.gluon.data.DataLoader(
        SeededDataset(Draws()), batch_sampler=SeededBatchSampler(16, 4, seed=SEED)))
    np.testing.assert_array_equal(np.stack(epochs).astype(np.float32),
                                  np.stack(want).astype(np.float32))


# --------------------------------------------------------------------------- pipelines

class Probed:
    """A preset whose sample also carries the generators' first draws: Python's, numpy's
    and MXNet's, taken before the preset draws. A class, not a closure: its attributes
    (the preset's own generators) are searched by the seeded loaders."""

    def __init__(self, preset):
        self.preset = preset

    def __call__(self, *sample):
        probe = np.array([random.random(), np.random.random(),
                          mx.nd.random.uniform().asscalar()], np.float64)
        return tuple(self.preset(*sample)) + (probe,)


class ProbedBatchify:
    """The preset's batchify function on all but the last field; the probes stacked."""

    def __init__(self, batchify):
        self.batchify = batchify

    def __call__(self, samples):
        return self.batchify([sample[:-1] for sample in samples]), np.stack(
            [sample[-1] for sample in samples])


class Pipeline:
    """One preset of one source: the dataset before the preset, the presets (several for
    YOLOv3's random shapes; MXNet's loader takes the first) and the batchify function."""

    def __init__(self, dataset, presets, batchify):
        self.dataset = dataset
        self.presets = [Probed(preset) for preset in presets]
        self.batchify = ProbedBatchify(batchify)


def build_pipeline(preset, source, zoo_net, zoo_ssd_anchors):
    masks = preset == 'mask_rcnn'
    dataset = SyntheticDetection(SAMPLES, size_range=SIZE_RANGE, max_objects=3, masks=masks,
                                 seed=3)
    ours = source == 'gluonbatch'
    if preset == 'ssd':
        anchors = zoo_ssd_anchors(NETS['ssd'], SIZE, SIZE)
        if ours:
            return Pipeline(dataset, [ssd.SSDDefaultTrainTransform(SIZE, SIZE)],
                            SSDTrainBatchify(anchors))
        return Pipeline(dataset, [gcv_presets.ssd.SSDDefaultTrainTransform(SIZE, SIZE, anchors)],
                        Tuple(Stack(), Stack(), Stack()))
    if preset in ('yolo', 'yolo_mixup'):
        mixup = preset == 'yolo_mixup'
        net = zoo_net(NETS['yolo'])
        if mixup:
            dataset = MixupDetection(dataset, np.random.beta, 1.5, 1.5)
        if ours:
            return Pipeline(dataset, [yolo.YOLO3DefaultTrainTransform(size, size)
                                      for size in YOLO_SIZES],
                            YOLO3TrainBatchify(net, mixup=mixup))
        return Pipeline(dataset, [_quietly(gcv_presets.yolo.YOLO3DefaultTrainTransform,
                                           size, size, net, mixup=mixup)
                                  for size in YOLO_SIZES],
                        Tuple(*[Stack() for _ in range(6)], Pad(pad_val=-1)))
    if preset == 'center_net':
        if ours:
            return Pipeline(dataset, [center_net.CenterNetDefaultTrainTransform(
                SIZE, SIZE, NUM_CLASS, 4, targets=False)], CenterNetTrainBatchify(NUM_CLASS, 4))
        return Pipeline(dataset, [gcv_presets.center_net.CenterNetDefaultTrainTransform(
            SIZE, SIZE, NUM_CLASS, 4)], Tuple(*[Stack() for _ in range(6)]))
    net = zoo_net(NETS[preset], anchors_only=True)
    module = rcnn if ours else gcv_presets.rcnn
    if masks:
        return Pipeline(dataset, [_quietly(module.MaskRCNNDefaultTrainTransform, net=net,
                                           **RCNN)], MaskRCNNTrainBatchify(net))
    return Pipeline(dataset, [_quietly(module.FasterRCNNDefaultTrainTransform, net=net,
                                       **RCNN)], FasterRCNNTrainBatchify(net))


@pytest.fixture(scope='module')
def pipelines(zoo_net, zoo_ssd_anchors):
    """``pipelines(preset, source)``, each built once."""
    built = {}

    def pipeline(preset, source):
        if (preset, source) not in built:
            built[preset, source] = build_pipeline(preset, source, zoo_net, zoo_ssd_anchors)
        return built[preset, source]

    return pipeline


# --------------------------------------------------------------------------- running

def batch_digest(batch):
    """SHA-256 of every array leaf of ``batch`` (its dtype, shape and bytes), in order."""
    digest = hashlib.sha256()

    def visit(value):
        if isinstance(value, (list, tuple)):
            digest.update(b'(%d' % len(value))
            for item in value:
                visit(item)
            digest.update(b')')
            return
        array = value.asnumpy() if isinstance(value, mx.nd.NDArray) else np.asarray(value)
        digest.update(str(array.dtype).encode() + repr(array.shape).encode())
        digest.update(np.ascontiguousarray(array).tobytes())

    visit(batch)
    return digest.hexdigest()


def make_loader(pipeline, kind, num_workers):
    if kind == 'ours':
        if len(pipeline.presets) > 1:
            return RandomTransformDataLoader(
                pipeline.presets, pipeline.dataset, batch_size=BATCH, shuffle=True,
                last_batch='rollover', batchify_fn=pipeline.batchify,
                num_workers=num_workers, seed=SEED)
        return _quietly(DetectionDataLoader, pipeline.dataset.transform(pipeline.presets[0]),
                        batch_size=BATCH, shuffle=True, last_batch='rollover',
                        batchify_fn=pipeline.batchify, num_workers=num_workers, seed=SEED)
    return mx.gluon.data.DataLoader(
        SeededDataset(pipeline.dataset.transform(pipeline.presets[0])),
        batch_sampler=SeededBatchSampler(SAMPLES, BATCH, SEED, last_batch='rollover'),
        batchify_fn=pipeline.batchify, num_workers=num_workers,
        thread_pool=kind == 'threads')


def run(pipeline, kind, num_workers, epochs=EPOCHS):
    """Per epoch, the digests of the batches and the probes of the samples."""
    loader = make_loader(pipeline, kind, num_workers)
    digests, probes = [], []
    for _ in range(epochs):
        epoch = [(batch_digest(batch), batch[1]) for batch in loader]
        digests.append([digest for digest, _ in epoch])
        probes.append(np.concatenate([probe for _, probe in epoch]))
    return digests, probes


def family(kind, preset):
    """Which reference a run must match: gluonbatch's YOLOv3 loader draws random shapes,
    MXNet's loader has the one; the other presets load the same batches either way."""
    return 'ours' if kind == 'ours' and preset.startswith('yolo') else 'any'


@pytest.fixture(scope='module')
def reference(pipelines):
    """``reference(preset, source, family)``: the digests of the simplest run (gluonbatch's
    loader without workers, or MXNet's for the single-shape YOLOv3), once."""
    computed = {}

    def digests(preset, source, kind):
        key = preset, source, family(kind, preset)
        if key not in computed:
            runner = 'ours' if key[2] == 'ours' or not preset.startswith('yolo') else 'mxnet'
            computed[key] = run(pipelines(preset, source), runner, 0)[0]
        return computed[key]

    return digests


def assert_all_draws_distinct(probes):
    """No two samples of the run share a draw of any generator (a repeated key would)."""
    draws = np.concatenate(probes)
    for column, generator in enumerate(['random', 'numpy', 'mxnet']):
        values = draws[:, column]
        assert len(np.unique(values)) == len(values), generator


def matrix(**axes):
    """The everyday tier runs every value of ``axes`` (:func:`tiers.each_value`), the full
    tier a pairwise covering of them (:func:`tiers.pairwise`: every two values together,
    the same mechanisms as the whole product at a quarter of its time), less the
    combinations that only repeat another: recycling is a matter of worker processes, and
    without them (no workers, or threads) turning it off changes nothing."""
    names, every = each_value(**axes)
    everyday = [param for param in every if not param.marks]
    ran = {param.id for param in everyday}
    params = everyday + [param for param in pairwise(**axes)[1]
                         if not param.marks and param.id not in ran]
    params = [param if param.id in ran else
              pytest.param(*param.values, id=param.id, marks=pytest.mark.slow)
              for param in params]
    position = {name: index for index, name in enumerate(names.split(','))}

    def repeats(param):
        kind, num_workers = param.values[position['runner']]
        return param.values[position['recycling']] is False and (
            num_workers == 0 or kind == 'threads')

    return names, [param for param in params if not (param.marks and repeats(param))]


def check_the_same_batches(pipelines, reference, preset, source, runner, recycling,
                           numpy_mode=False):
    """Three epochs of ``preset`` loaded by ``runner``: the reference's batches, every
    sample with draws of its own."""
    kind, num_workers = runner
    pipeline = pipelines(preset, source)
    want = reference(preset, source, kind)
    if numpy_mode:
        mx.npx.set_np()
    try:
        # set before the loader forks its workers: they inherit it
        with memory.use_recycling(recycling):
            digests, probes = run(pipeline, kind, num_workers)
    finally:
        mx.npx.reset_np()
    assert digests == want
    # every batch its own (rollover: 8 of the 10 samples, then 12, then 8)
    assert [len(epoch) for epoch in probes] == [8, 12, 8]
    assert len({digest for epoch in digests for digest in epoch}) == sum(map(len, digests))
    assert_all_draws_distinct(probes)


@pytest.mark.parametrize(*matrix(preset=PRESETS, runner=RUNNERS, recycling=RECYCLING,
                                 numpy_mode=MODES))
def test_gluonbatch_presets_load_the_same_batches_everywhere(
        pipelines, reference, preset, runner, recycling, numpy_mode):
    check_the_same_batches(pipelines, reference, preset, 'gluonbatch', runner,
                           recycling, numpy_mode)


@pytest.mark.parametrize(*matrix(preset=PRESETS, runner=RUNNERS, recycling=RECYCLING))
def test_gluoncv_presets_load_the_same_batches_everywhere(
        pipelines, reference, preset, runner, recycling):
    """gluoncv's presets (legacy mode only: they call MXNet's legacy operators, which numpy
    mode refuses)."""
    check_the_same_batches(pipelines, reference, preset, 'gluoncv', runner,
                           recycling)


@pytest.mark.parametrize('kind', ['ours', 'mxnet'])
def test_recycling_off_by_the_environment_reaches_the_workers(pipelines, reference,
                                                              monkeypatch, kind):
    """``GLUONBATCH_RECYCLE=0`` as the workers fork: the same batches."""
    monkeypatch.setenv('GLUONBATCH_RECYCLE', '0')
    assert not memory.get_recycling()
    digests, _ = run(pipelines('ssd', 'gluonbatch'), kind, 2)
    assert digests == reference('ssd', 'gluonbatch', kind)


def test_yolo_input_sizes_are_functions_of_the_batch(pipelines):
    """gluonbatch's random-shape loader picks batch ``n`` of epoch ``e``'s input size
    from ``(seed, e, n)``, the same for any number of workers (the digests above)."""
    loader = make_loader(pipelines('yolo', 'gluonbatch'), 'ours', 0)
    sizes = [[batch[0][0].shape[-1] for batch in loader] for _ in range(EPOCHS)]
    assert sizes == [[YOLO_SIZES[batch_choice(SEED, epoch, number, len(YOLO_SIZES))]
                      for number in range(len(sizes[epoch]))] for epoch in range(EPOCHS)]
    assert {size for epoch in sizes for size in epoch} == set(YOLO_SIZES)
