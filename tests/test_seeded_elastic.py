"""Seeded loading is elastic: for one global batch size, the global batch -- which samples,
and their augmented arrays -- is the same on 1, 2 and 4 devices (``DeviceLoader`` over a
seeded loader, ``Pad(num_shards=D)``) and on 1, 2 and 4 ranks (a seeded loader per rank
with a ``SplitSampler``, the ranks' batches concatenated in rank order), and every rank
runs the same number of batches. The kvstore launcher's run of the same is in
tests/test_distributed.py; ``DeviceLoader`` passes the seeded loader's state through.
"""
import functools
import warnings

import mxnet as mx
import numpy as np
import pytest

from gluonbatch.batchify import Pad, Stack, Tuple
from gluonbatch.dataloader import DetectionDataLoader
from gluonbatch.devices import DeviceLoader
from gluonbatch.examples.synthetic import SyntheticDetection
from gluonbatch.samplers.split import SplitSampler
from gluonbatch.transforms.presets.rcnn import FasterRCNNDefaultTrainTransform
from tiers import pairwise

SEED, GLOBAL_BATCH, EPOCHS = 31, 4, 3
LAST_BATCH = ['keep', 'discard', 'pad', 'rollover']


class WithSize:
    """Faster R-CNN's train augmentation (a random short side and flip: images of many
    sizes), the sample with its image's height and width and its box count, to unpad."""

    def __init__(self):
        self.preset = FasterRCNNDefaultTrainTransform(short=(24, 40), max_size=64)

    def __call__(self, image, label):
        image, boxes = self.preset(image, label)
        return image, boxes, np.array(image.shape[1:] + boxes.shape[:1], np.float32)


def dataset(length):
    return SyntheticDetection(length, size_range=((40, 60), (50, 80)), max_objects=3,
                              seed=4).transform(WithSize())


def batchify(num_devices):
    return Tuple(Pad(axis=(1, 2), num_shards=num_devices),
                 Pad(pad_val=-1, num_shards=num_devices), Stack())


def loader(length, batch_size, last_batch, num_devices=1, num_workers=0, sampler=None):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # DetectionDataLoader is deprecated (still used)
        return DetectionDataLoader(dataset(length), batch_size=batch_size,
                                   shuffle=sampler is None, sampler=sampler,
                                   last_batch=last_batch, batchify_fn=batchify(num_devices),
                                   num_workers=num_workers, seed=SEED)


def samples_of(part):
    """The unpadded ``(image, boxes)`` bytes of every sample of one device's or rank's part
    ``(images, boxes, sizes)``."""
    images, boxes, sizes = (field.asnumpy() for field in part)
    found = []
    for image, box, (height, width, count) in zip(images, boxes, sizes.astype(int)):
        assert (image[:, height:] == 0).all() and (image[:, :, width:] == 0).all()
        assert (box[count:] == -1).all()  # the padding is padding
        found.append((image[:, :height, :width].tobytes(), box[:count].tobytes()))
    return found


def global_batches(parts_per_step):
    """Per pass, per step, the samples of the step's parts (devices or ranks), in order."""
    return [[[sample for part in step for sample in samples_of(part)] for step in epoch]
            for epoch in parts_per_step]


def device_run(length, last_batch, num_devices, num_workers):
    """Per pass, per step, the global batch's samples; and the most devices a step used."""
    per_device = DeviceLoader(loader(length, GLOBAL_BATCH, last_batch, num_devices,
                                     num_workers),
                              [mx.cpu(device) for device in range(num_devices)])
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # a last batch smaller than the devices: fewer slices
        passes = [list(per_device) for _ in range(EPOCHS)]
    return global_batches(passes), max(len(step) for epoch in passes for step in epoch)


@functools.lru_cache(maxsize=None)
def one_device(length, last_batch):
    """The global batches on one device, worked out once per case."""
    return device_run(length, last_batch, 1, 0)[0]


@pytest.mark.parametrize(*pairwise(last_batch=LAST_BATCH, num_devices=[2, 4],
                                   num_workers=[0, 2]))
def test_the_global_batch_is_the_same_on_1_2_and_4_devices(last_batch, num_devices,
                                                           num_workers):
    want = one_device(10, last_batch)
    got, devices_used = device_run(10, last_batch, num_devices, num_workers)
    assert devices_used == num_devices
    assert got == want
    assert want[0] != want[1]  # every epoch its own order and augmentations


def rank_run(length, last_batch, num_ranks, num_workers):
    """Every rank's batches over the passes: ``[rank][pass][step]``."""
    ranks = [loader(length, GLOBAL_BATCH // num_ranks, last_batch, num_workers=num_workers,
                    sampler=SplitSampler(length, num_ranks, rank, shuffle=True))
             for rank in range(num_ranks)]
    return [[list(rank) for _ in range(EPOCHS)] for rank in ranks]


@functools.lru_cache(maxsize=None)
def one_rank(length, last_batch):
    """The global batches on one rank, worked out once per case."""
    return global_batches([[[batch] for batch in epoch]
                           for epoch in rank_run(length, last_batch, 1, 0)[0]])


@pytest.mark.parametrize(*pairwise(length=[10, 12], last_batch=LAST_BATCH,
                                   num_ranks=[2, 4], num_workers=[0, 2]))
def test_the_global_batch_is_the_same_on_1_2_and_4_ranks(length, last_batch, num_ranks,
                                                         num_workers):
    if last_batch == 'keep' and length % GLOBAL_BATCH:
        with pytest.raises(ValueError, match=r"last_batch='keep' with num_parts=%d needs "
                           r'length to be a multiple of the global batch .* got length %d'
                           % (num_ranks, length)):
            rank_run(length, last_batch, num_ranks, num_workers)
        return
    want = one_rank(length, last_batch)
    ranks = rank_run(length, last_batch, num_ranks, num_workers)
    # every rank the same number of batches in every pass: none waits for another
    counts = [[len(epoch) for epoch in rank] for rank in ranks]
    assert counts == [counts[0]] * num_ranks
    assert counts[0] == [len(epoch) for epoch in want]
    got = global_batches([list(zip(*(rank[epoch] for rank in ranks)))
                          for epoch in range(EPOCHS)])
    assert got == want


def test_the_device_loader_passes_the_state_through():
    per_device = DeviceLoader(loader(10, GLOBAL_BATCH, 'rollover', num_devices=2),
                              [mx.cpu(0), mx.cpu(1)])
    assert per_device.state_dict() == per_device.loader.state_dict()
    first = [samples_of_devices(step) for step in per_device]
    state_after_first = per_device.state_dict()
    assert state_after_first['epoch'] == 1 and state_after_first['batch'] == 0
    batches = iter(per_device)
    second = [samples_of_devices(next(batches))]
    state = per_device.state_dict()
    assert (state['epoch'], state['batch']) == (1, 1)
    second += [samples_of_devices(step) for step in batches]
    # another loader, on another number of devices, resumes the run where it was
    other = DeviceLoader(loader(10, GLOBAL_BATCH, 'rollover', num_devices=4),
                         [mx.cpu(device) for device in range(4)])
    other.load_state_dict(state)
    assert [samples_of_devices(step) for step in other] == second[1:]
    other.set_epoch(0)
    assert [samples_of_devices(step) for step in other] == first
    assert other.state_dict()['epoch'] == 1


def samples_of_devices(per_device):
    return [sample for part in per_device for sample in samples_of(part)]


@pytest.mark.parametrize('method, arguments', [('state_dict', ()),
                                               ('load_state_dict', ({'epoch': 0},)),
                                               ('set_epoch', (1,))])
def test_the_device_loader_names_a_loader_without_state(method, arguments):
    plain = DeviceLoader(mx.gluon.data.DataLoader(dataset(4), batch_size=2,
                                                  batchify_fn=batchify(1)), [mx.cpu(0)])
    with pytest.raises(TypeError, match=r'DeviceLoader.%s\(\) calls its loader\'s, and '
                       r'DataLoader has no %s\(\): wrap a seeded gluonbatch loader'
                       % (method, method)):
        getattr(plain, method)(*arguments)


def test_an_unseeded_loader_raises_its_own_error():
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        unseeded = DetectionDataLoader(dataset(4), batch_size=2, batchify_fn=batchify(1))
    with pytest.raises(ValueError, match=r'state_dict\(\) needs a seeded loader'):
        DeviceLoader(unseeded, [mx.cpu(0)]).state_dict()
