"""The presets where gluoncv's run: DataLoader workers (0, 1, 2), thread pools, numpy mode,
YOLOv3's random-shape loader, and gluonbatch's batchify on their samples.

Each preset's own module of tests proves it seeded-equivalent to gluoncv's sample by sample;
these tests prove the equivalence survives the ways training scripts run them.
"""
import random

import gluoncv.data.batchify as gcv_batchify
import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import RandomTransformDataLoader
from gluoncv.data.transforms import presets as gcv_presets
from mxnet import npx

from gluonbatch import batchify
from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.transforms.presets import center_net, rcnn, ssd, yolo

#: max |difference| of normalized images allowed (2/255 of the pixel range / smallest std)
IMAGE_ATOL = 2 / 255 / 0.224


def presets(kind):
    """(gluonbatch preset class, gluoncv preset class, arguments, number of outputs);
    no networks."""
    if kind == 'ssd':
        return ssd.SSDDefaultTrainTransform, gcv_presets.ssd.SSDDefaultTrainTransform, (96, 64), 2
    if kind == 'yolo':
        return (yolo.YOLO3DefaultTrainTransform, gcv_presets.yolo.YOLO3DefaultTrainTransform,
                (64, 96), 2)
    if kind == 'center_net':
        return (center_net.CenterNetDefaultTrainTransform,
                gcv_presets.center_net.CenterNetDefaultTrainTransform, (64, 64, 20), 6)
    return (rcnn.FasterRCNNDefaultTrainTransform, gcv_presets.rcnn.FasterRCNNDefaultTrainTransform,
            (64, 96), 2)


class SeededPerSample(mx.gluon.data.Dataset):
    """Seeds Python's and numpy's generators with the sample index and transforms the sample
    with a fresh preset (CenterNet's carries its own generator): a sample's augmentation then
    no longer depends on the worker that draws it."""

    def __init__(self, dataset, preset, args):
        self._dataset, self._preset, self._args = dataset, preset, args

    def __len__(self):
        return len(self._dataset)

    def __getitem__(self, idx):
        random.seed(idx)
        np.random.seed(idx)
        return self._preset(*self._args)(*self._dataset[idx])


def as_numpy(value):
    return value.asnumpy() if hasattr(value, 'asnumpy') else np.asarray(value)


def assert_samples_alike(ours, theirs):
    """Images (first field) within rounding, the rest equal up to float32 rounding."""
    ours, theirs = [as_numpy(v) for v in ours], [as_numpy(v) for v in theirs]
    assert [a.shape for a in ours] == [b.shape for b in theirs]
    assert np.abs(ours[0] - theirs[0]).max() <= IMAGE_ATOL
    for a, b in zip(ours[1:], theirs[1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('kind', ['ssd', 'yolo', 'center_net', 'rcnn'])
def test_worker_samples_equal_gluoncv_samples(kind, num_workers):
    base = SyntheticDetection(length=6, seed=3)
    ours, theirs, args, fields = presets(kind)
    expected = [SeededPerSample(base, theirs, args)[i] for i in range(len(base))]
    # R-CNN images differ in size from sample to sample: one per batch
    batch_size = 1 if kind == 'rcnn' else 3
    fn = batchify.Tuple(*([batchify.Stack()] + [batchify.Pad(pad_val=-1)] * (fields - 1))
                        ) if fields == 2 else batchify.Tuple(*[batchify.Stack()] * fields)
    loader = mx.gluon.data.DataLoader(SeededPerSample(base, ours, args), batch_size, shuffle=False,
                                      batchify_fn=fn, num_workers=num_workers)
    seen = 0
    for batch in loader:
        assert len(batch) == fields
        for row in range(batch[0].shape[0]):
            want = expected[seen]
            got = [field[row].asnumpy() for field in batch]
            if fields == 2:  # the label: drop the padding rows
                got[1] = got[1][:len(want[1])]
            assert_samples_alike(got, want)
            seen += 1
    assert seen == len(base)


@pytest.mark.parametrize('kind', ['ssd', 'center_net'])
def test_thread_pool_loader_gives_whole_batches(kind):
    ours, _, args, fields = presets(kind)
    base = SyntheticDetection(length=8, seed=5)
    fn = batchify.Tuple(*([batchify.Stack()] * fields)) if fields > 2 else batchify.Tuple(
        batchify.Stack(), batchify.Pad(pad_val=-1))
    loader = mx.gluon.data.DataLoader(base.transform(ours(*args)), 4, batchify_fn=fn,
                                      num_workers=2, thread_pool=True)
    batches = list(loader)
    assert len(batches) == 2
    for batch in batches:
        assert batch[0].shape[:2] == (4, 3) and np.isfinite(batch[0].asnumpy()).all()


def test_numpy_mode_gives_the_legacy_samples():
    base = SyntheticDetection(length=3, seed=2)
    ours, _, args, _ = presets('ssd')
    legacy = [SeededPerSample(base, ours, args)[i] for i in range(3)]
    npx.set_np()
    try:
        image = mx.np.array(base[0][0].asnumpy(), dtype='uint8')
        in_np_mode = [SeededPerSample(base, ours, args)[i] for i in range(3)]
        sample = ours(*args)(image, base[0][1])
        batch = batchify.Stack()([sample[0], sample[0]])
        assert isinstance(batch, mx.np.ndarray) and batch.shape[0] == 2
    finally:
        npx.reset_np()
    for got, want in zip(in_np_mode, legacy):
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_random_shape_yolo_loader_matches_gluoncv():
    """YOLOv3's random-shape training: the loader draws a preset per batch from numpy's
    generator, between the samples' draws; with the same seeds both loaders agree."""
    base = SyntheticDetection(length=8, seed=4)
    sizes = [64, 96, 128]

    def batches(module):
        random.seed(11)
        np.random.seed(11)
        transforms = [module.YOLO3DefaultTrainTransform(s, s) for s in sizes]
        loader = RandomTransformDataLoader(
            transforms, base, batch_size=2, interval=1, last_batch='rollover', num_workers=0,
            batchify_fn=gcv_batchify.Tuple(gcv_batchify.Stack(), gcv_batchify.Pad(pad_val=-1)))
        return [(b[0].asnumpy(), b[1].asnumpy()) for b in loader]

    ours, theirs = batches(yolo), batches(gcv_presets.yolo)
    assert len(ours) == len(theirs) == 4
    assert len({b[0].shape[-1] for b in ours}) > 1  # the shapes really vary
    for (image, label), (want_image, want_label) in zip(ours, theirs):
        assert image.shape == want_image.shape
        assert np.abs(image - want_image).max() <= IMAGE_ATOL
        np.testing.assert_allclose(label, want_label, rtol=1e-6, atol=1e-4)
