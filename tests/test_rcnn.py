"""FasterRCNNTrainBatchify / MaskRCNNTrainBatchify against gluoncv on real model-zoo nets.

The networks are built offline (no weights) and fed by gluoncv's own train transforms on
synthetic images, boxes and polygons; gluoncv's batchifiers are the reference.
"""
import warnings

import mxnet as mx
import numpy as np
import pytest
from gluoncv.data import batchify as gcv
from gluoncv.data.transforms.presets.rcnn import (FasterRCNNDefaultTrainTransform,
                                                  MaskRCNNDefaultTrainTransform)

import gluonbatch
from gluonbatch.batchify import FasterRCNNTrainBatchify, MaskRCNNTrainBatchify
from gluonbatch.batchify.rcnn import FeatureShapes
from helpers import assert_same_batch

NETS = {'c4': ('faster_rcnn_resnet50_v1b_voc', False),
        'fpn': ('faster_rcnn_fpn_resnet50_v1b_coco', True),
        'mask': ('mask_rcnn_resnet50_v1b_coco', False)}


@pytest.fixture(scope='module')
def nets(zoo_net):
    """Only the anchor generators are initialized: the batchifiers and gluoncv's presets
    read the anchors and the ``features`` graph, nothing else."""
    return {key: zoo_net(name, anchors_only=True) for key, (name, _) in NETS.items()}


@pytest.fixture(scope='module')
def transforms(nets):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return {'c4': FasterRCNNDefaultTrainTransform(short=(128, 224), max_size=320,
                                                      net=nets['c4']),
                'fpn': FasterRCNNDefaultTrainTransform(short=(128, 224), max_size=320,
                                                       net=nets['fpn'], multi_stage=True),
                'mask': MaskRCNNDefaultTrainTransform(short=(128, 224), max_size=320,
                                                      net=nets['mask'])}


def make_samples(transform, count, seed, masks=False):
    """``count`` samples of random size with 1..3 boxes (and polygons for Mask R-CNN)."""
    rng = np.random.default_rng(seed)
    samples = []
    for _ in range(count):
        height, width = int(rng.integers(100, 300)), int(rng.integers(100, 300))
        image = mx.nd.array(rng.integers(0, 255, (height, width, 3)), dtype='uint8')
        boxes = []
        for _ in range(int(rng.integers(1, 4))):
            x0, y0 = rng.integers(0, width // 2), rng.integers(0, height // 2)
            x1, y1 = x0 + rng.integers(10, width // 2), y0 + rng.integers(10, height // 2)
            boxes.append([x0, y0, x1, y1, rng.integers(0, 20)])
        boxes = np.array(boxes, np.float32)
        if masks:
            polygons = [[np.array([[b[0], b[1]], [b[2], b[1]], [b[2], b[3]], [b[0], b[3]]],
                                  np.float32)] for b in boxes]
            samples.append(transform(image, boxes, polygons))
        else:
            samples.append(transform(image, boxes))
    return samples


@pytest.mark.parametrize('kind', ['c4', 'fpn', 'mask'])
@pytest.mark.parametrize('count, num_shards', [(4, 1), (4, 2), (4, 4), (3, 2), (2, 1)])
def test_bit_exact_against_gluoncv(nets, transforms, kind, count, num_shards):
    samples = make_samples(transforms[kind], count, seed=count * 10 + num_shards,
                           masks=kind == 'mask')
    ours_cls, theirs_cls = ((MaskRCNNTrainBatchify, gcv.MaskRCNNTrainBatchify) if kind == 'mask'
                            else (FasterRCNNTrainBatchify, gcv.FasterRCNNTrainBatchify))
    ours = ours_cls(nets[kind], num_shards)(samples)
    theirs = theirs_cls(nets[kind], num_shards)(samples)
    assert_same_batch(ours, theirs, compare_context=False, arrays_only=True)


@pytest.mark.parametrize('kind', ['c4', 'fpn'])
def test_cache_never_serves_one_size_for_another(nets, transforms, kind):
    ours = FasterRCNNTrainBatchify(nets[kind], num_shards=2)
    theirs = gcv.FasterRCNNTrainBatchify(nets[kind], num_shards=2)
    first, second, third = (make_samples(transforms[kind], 4, seed) for seed in (1, 2, 3))
    batches = [first, second, first, third, second]
    for samples in batches:
        assert_same_batch(ours(samples), theirs(samples), compare_context=False,
                          arrays_only=True)
    info = ours.feature_shapes.cache_info()
    assert info.hits > 0 and info.misses >= 2
    # every cached entry is what a fresh shape inference gives
    fresh = FeatureShapes(nets[kind])
    for samples in batches[:2]:
        height, width = ours(samples)[0][0].shape[2:]
        assert ours.feature_shapes(height, width) == fresh(height, width)


def test_feature_levels_follow_the_graph(nets):
    assert FeatureShapes(nets['c4']).num_levels == 1
    fpn = FeatureShapes(nets['fpn'])
    assert fpn.num_levels == 5
    sizes = fpn(256, 320)
    assert sizes[0] == (64, 80) and [h for h, _ in sizes] == sorted((h for h, _ in sizes),
                                                                    reverse=True)


@pytest.mark.parametrize('count, num_shards, sizes', [(5, 4, [2, 1, 1, 1]), (7, 3, [3, 2, 2])])
def test_uneven_shards_equal_gluoncv_on_each_shard(nets, transforms, count, num_shards, sizes):
    samples = make_samples(transforms['c4'], count, seed=7)
    images, boxes, cls, box, mask = FasterRCNNTrainBatchify(nets['c4'], num_shards)(samples)
    assert [i.shape[0] for i in images] == sizes and len(cls) == num_shards
    reference = gcv.FasterRCNNTrainBatchify(nets['c4'], 1)
    start = 0
    for shard, size in enumerate(sizes):
        want = reference(samples[start:start + size])
        assert_same_batch((images[shard], boxes[shard], cls[shard], box[shard], mask[shard]),
                          (want[0], want[1], want[2][0], want[3][0], want[4][0]),
                          compare_context=False, arrays_only=True)
        start += size


def test_more_shards_than_samples(nets, transforms):
    samples = make_samples(transforms['c4'], 2, seed=3)
    with pytest.warns(UserWarning, match='num_shards=4 is larger than the batch of 2'):
        images, boxes, cls, box, mask = FasterRCNNTrainBatchify(nets['c4'], 4)(samples)
    assert isinstance(images, list) and len(images) == len(cls) == len(mask) == 2
    with pytest.warns(UserWarning):
        single = MaskRCNNTrainBatchify(nets['mask'], 3)(
            make_samples(transforms['mask'], 1, seed=4, masks=True))
    assert all(len(part) == 1 for part in single)


def test_wrong_element_count(nets, transforms):
    samples = make_samples(transforms['c4'], 2, seed=5)
    with pytest.raises(ValueError, match='sample 1 has 4 elements; FasterRCNNTrainBatchify '
                                         'expects 5'):
        FasterRCNNTrainBatchify(nets['c4'])([samples[0], samples[1][:4]])
    with pytest.raises(ValueError, match='sample 0 has 5 elements; MaskRCNNTrainBatchify '
                                         'expects 6'):
        MaskRCNNTrainBatchify(nets['mask'])(samples)


def test_image_rank_not_three(nets, transforms):
    samples = make_samples(transforms['c4'], 2, seed=6)
    bad = (samples[1][0][0],) + tuple(samples[1][1:])
    with pytest.raises(ValueError, match=r'sample 1: image has shape \(\d+, \d+\); expected'):
        FasterRCNNTrainBatchify(nets['c4'])([samples[0], bad])


def test_targets_larger_than_their_feature_map(nets, transforms):
    samples = make_samples(transforms['c4'], 2, seed=8)
    image, boxes, cls, box, mask = samples[1]
    huge = [mx.nd.zeros((500, 500, cls[0].shape[2]))]
    with pytest.raises(ValueError, match=r'sample 1: rpn cls target of level 0 has shape '
                                         r'\(500, 500, 15\); the padded image'):
        FasterRCNNTrainBatchify(nets['c4'])([samples[0], (image, boxes, huge, box, mask)])


def test_wrong_number_of_target_levels(nets, transforms):
    samples = make_samples(transforms['c4'], 1, seed=9)
    image, boxes, cls, box, mask = samples[0]
    with pytest.raises(ValueError, match='sample 0 has rpn box targets for 2 feature level'):
        FasterRCNNTrainBatchify(nets['c4'])([(image, boxes, cls, box * 2, mask)])


def test_net_without_features():
    with pytest.raises(ValueError, match='Dense has no callable `features`'):
        FasterRCNNTrainBatchify(mx.gluon.nn.Dense(3))


def _net_with_features(features):
    net = mx.gluon.nn.Sequential()
    net.features = features
    return net


SAMPLE = (np.zeros((3, 32, 32), np.float32), np.zeros((1, 5), np.float32),
          [np.zeros((2, 2, 1))], [np.zeros((2, 2, 4))], [np.zeros((2, 2, 4))])


def test_graph_whose_shapes_cannot_be_inferred():
    class UnknownWeight(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.dot(x, F.var('weight_of_unknown_shape'))

    batchify = FasterRCNNTrainBatchify(_net_with_features(UnknownWeight()))
    with pytest.raises(ValueError, match='cannot infer the feature-map shapes of '
                                         'net.features for an image of 32x32'):
        batchify([SAMPLE])


def test_graph_without_image_feature_maps():
    batchify = FasterRCNNTrainBatchify(_net_with_features(mx.gluon.nn.Dense(4)))
    with pytest.raises(ValueError, match=r'does not give 4-d .* for an image of 32x32 '
                                         r'\(got \[\(1, 4\)\]\)'):
        batchify([SAMPLE])


def test_features_that_cannot_be_traced():
    class Eager(mx.gluon.Block):
        def forward(self, x):
            return x.asnumpy()

    with pytest.raises(ValueError, match='cannot be traced symbolically'):
        FasterRCNNTrainBatchify(_net_with_features(Eager()))


def test_reexported_from_package():
    assert gluonbatch.FasterRCNNTrainBatchify is FasterRCNNTrainBatchify
    assert gluonbatch.MaskRCNNTrainBatchify is MaskRCNNTrainBatchify


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_in_a_dataloader_with_workers(nets, transforms, num_workers):
    samples = make_samples(transforms['fpn'], 6, seed=11)
    dataset = mx.gluon.data.SimpleDataset(samples)
    ours = FasterRCNNTrainBatchify(nets['fpn'], num_shards=2)
    reference = gcv.FasterRCNNTrainBatchify(nets['fpn'], num_shards=2)
    loader = mx.gluon.data.DataLoader(dataset, batch_size=3, batchify_fn=ours,
                                      num_workers=num_workers)
    for index, batch in enumerate(loader):
        assert_same_batch(batch, reference(samples[index * 3:index * 3 + 3]),
                          compare_context=False, arrays_only=True)


def test_pickling_keeps_the_live_cache_and_restores_elsewhere(nets, tmp_path):
    import pickle
    import subprocess
    import sys

    batchify = FasterRCNNTrainBatchify(nets['fpn'], num_shards=2)
    expected = batchify.feature_shapes(160, 224)
    restored = pickle.loads(pickle.dumps(batchify))
    # a new object (pickling round trips are not identities) that, in this process and in
    # forked DataLoader workers, shares the live cache
    assert restored.feature_shapes is not batchify.feature_shapes
    hits = batchify.feature_shapes.cache_info().hits
    assert restored.feature_shapes(160, 224) == expected
    assert batchify.feature_shapes.cache_info().hits == hits + 1
    assert restored.feature_shapes.cache_info() == batchify.feature_shapes.cache_info()
    path = tmp_path / 'batchify.pkl'
    path.write_bytes(pickle.dumps(batchify))
    code = ('import pickle, sys; b = pickle.load(open(sys.argv[1], "rb")); '
            'print(b.feature_shapes(160, 224), b.feature_shapes.cache_info().misses)')
    result = subprocess.run([sys.executable, '-c', code, str(path)], capture_output=True,
                            text=True, check=True)
    assert result.stdout.strip() == '%s 1' % (expected,)
