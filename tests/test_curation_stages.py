"""The curation stages: the embedder's column is the net run on the decoded images, the
classifier's the head run on the embeddings, both lazy, both stored as parquet."""
import gc
import os
import threading

import mxnet as mx
import numpy as np
import pyarrow.parquet as pq
import pytest

from gluonbatch.curation import (EmbeddingClassifier, GluonImageEmbedder, ImageClassifier, ImageEmbedder, ImageTextPairDataset)
from helpers import ID, make_dataset

SIZE = 16
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255


class CountingNet(mx.gluon.nn.HybridBlock):
    """A small backbone that counts the images it has embedded."""

    def __init__(self):
        super().__init__()
        self.images = 0
        with self.name_scope():
            self.conv = mx.gluon.nn.Conv2D(6, 3, strides=2, in_channels=3)
            self.pool = mx.gluon.nn.GlobalAvgPool2D()

    def forward(self, x):
        self.images += x.shape[0]
        return self.pool(self.conv(x)).flatten()


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('source'))
    make_dataset(path, sizes=(3, 4, 2))
    return path


def _net():
    mx.random.seed(3)
    net = CountingNet()
    net.initialize(mx.init.Xavier())
    return net


def _by_hand(ds, net, normalize=True):
    """The embeddings computed one record at a time: resize, ImageNet-normalise, run."""
    rows = []
    for i in range(len(ds)):
        image = mx.image.imresize(ds[i][0], SIZE, SIZE).asnumpy().astype(np.float32)
        x = ((image - MEAN) / STD).transpose(2, 0, 1)[None]
        rows.append(net(mx.nd.array(x)).asnumpy()[0])
    rows = np.array(rows, dtype=np.float32)
    if normalize:
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_the_embedding_column_is_the_net_on_each_image_in_record_order(source, num_workers):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    net = _net()
    embedder = GluonImageEmbedder(net, image_size=SIZE, batch_size=3, num_workers=num_workers)
    before, columns = net.images, list(ds.metadata.columns)
    embedded = embedder(ds)
    assert embedded is not ds and embedded.metadata is not ds.metadata
    assert list(ds.metadata.columns) == columns  # the input is left as it was
    assert list(embedded.metadata.columns) == columns + ['image_embedding']
    assert net.images == before  # lazy: nothing embedded yet
    got = np.stack(embedded.metadata['image_embedding'].compute().tolist())
    assert net.images == before + len(ds)  # each record once
    np.testing.assert_allclose(got, _by_hand(ds, net), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, rtol=1e-5)


class OverlapNet(mx.gluon.nn.Block):
    """A net that records how many threads were inside its forward at once. Its first call
    from a shard's task stays inside until another shard's task is on its way into the net
    (the stage's ``run``, where the calls take turns), so the turns are really tested."""

    def __init__(self):
        super().__init__()
        self.inside, self.most = 0, 0
        self.running = set()  # the threads inside a stage's run, the net's call ahead of them
        self.overlapped = False  # a second thread reached run while one was inside the net
        self.changed = threading.Condition()

    def forward(self, x):
        with self.changed:
            self.inside += 1
            self.most = max(self.most, self.inside)
            if not self.overlapped and threading.get_ident() in self.running:
                # the timeout only bounds a hang: another shard's thread always comes
                self.overlapped = self.changed.wait_for(lambda: len(self.running) > 1, 60)
                # a second call not made to wait its turn would be inside now, or soon: a
                # moment's grace lets it show (calls that take turns pass whatever its length)
                self.changed.wait_for(lambda: self.inside > 1, 0.2)
            self.inside -= 1
            self.changed.notify_all()
        return x.reshape((0, -1)).sum(axis=1, keepdims=True)

    def entering(self):
        with self.changed:
            self.running.add(threading.get_ident())
            self.changed.notify_all()

    def leaving(self):
        with self.changed:
            self.running.discard(threading.get_ident())


class WatchedEmbedder(GluonImageEmbedder):
    """An embedder whose net is told when a thread enters and leaves the stage's run."""

    def run(self, batch):
        self.net.entering()
        try:
            return super().run(batch)
        finally:
            self.net.leaving()


def test_shards_computed_in_parallel_never_call_the_net_at_once(source):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    net = OverlapNet()
    ds = WatchedEmbedder(net, image_size=SIZE, batch_size=1)(ds)
    ds = EmbeddingClassifier(net, 'score', embedding_column='image_embedding', batch_size=1)(ds)
    frame = ds.metadata.compute(scheduler='threads', num_workers=3)
    assert net.overlapped  # two shards' threads wanted the net at once
    assert net.most == 1 and len(frame) == len(ds)


def test_an_empty_shard_gets_no_embeddings_and_no_scores(tmp_path):
    make_dataset(str(tmp_path), sizes=(2, 0, 3))
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    net = _net()
    ds = GluonImageEmbedder(net, image_size=SIZE, batch_size=2)(ds)
    ds = EmbeddingClassifier(mx.gluon.nn.Lambda(lambda x: x.sum(axis=1)), 'score')(ds)
    frame = ds.metadata.compute()
    embeddings = np.stack(frame['image_embedding'].tolist())
    np.testing.assert_allclose(embeddings, _by_hand(ds, net), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(frame['score'], embeddings.sum(axis=1), rtol=1e-5)


def test_each_stage_runs_its_own_model_whatever_the_others_loaded(source):
    """Models are kept per process and stage, a few at a time: six embedders of different
    nets in one computation must each give their own net's embeddings."""
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    nets = []
    for seed in range(6):
        mx.random.seed(seed)
        net = CountingNet()
        net.initialize(mx.init.Xavier())
        nets.append(net)
        ds = GluonImageEmbedder(net, image_size=SIZE, embedding_column='e%d' % seed)(ds)
    frame = ds.metadata.compute()
    for seed, net in enumerate(nets):
        np.testing.assert_allclose(np.stack(frame['e%d' % seed].tolist()), _by_hand(ds, net),
                                   rtol=1e-5, atol=1e-6)


def _descriptors_of(path):
    return [fd for fd in os.listdir('/proc/self/fd')
            if os.path.realpath('/proc/self/fd/' + fd) == os.path.realpath(path)]


@pytest.mark.skipif(not os.path.isdir('/proc/self/fd'), reason='needs /proc/self/fd')
def test_dropping_a_stages_copy_leaves_the_datasets_files_open(source):
    """The copy a stage returns reads through the same file handles; collecting it while
    the dataset reads must not close them under the reader."""
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    tar = ds.tar_files[0]
    others = set(_descriptors_of(tar))  # earlier tests' datasets, which may close meanwhile
    ds.read_raw(0)
    held = set(_descriptors_of(tar)) - others
    copy = GluonImageEmbedder(_net(), image_size=SIZE)(ds)
    assert copy.read_raw(1) == ds.read_raw(1)
    del copy
    gc.collect()
    assert set(_descriptors_of(tar)) - others == held and len(held) == 1


def test_embeddings_unnormalised_and_in_another_column(source):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    net = _net()
    ds = GluonImageEmbedder(net, image_size=SIZE, normalize_embeddings=False,
                            embedding_column='clip')(ds)
    got = np.stack(ds.metadata['clip'].compute().tolist())
    np.testing.assert_allclose(got, _by_hand(ds, net, normalize=False), rtol=1e-5, atol=1e-6)


def test_the_classifier_column_is_the_head_on_the_embeddings(source, tmp_path):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    ds = GluonImageEmbedder(_net(), image_size=SIZE, batch_size=4)(ds)
    head = mx.gluon.nn.Dense(1, in_units=6)
    head.initialize(mx.init.Normal(1))
    ds = EmbeddingClassifier(head, pred_column='aesthetic_score', batch_size=4)(ds)
    ds = EmbeddingClassifier(mx.gluon.nn.Lambda(lambda x: x.sum(axis=1) > 0), 'nsfw',
                             pred_type=bool)(ds)
    frame = ds.metadata.compute()
    embeddings = np.stack(frame['image_embedding'].tolist())
    want = head(mx.nd.array(embeddings)).asnumpy()[:, 0]
    np.testing.assert_allclose(frame['aesthetic_score'], want, rtol=1e-5, atol=1e-6)
    assert frame['aesthetic_score'].dtype == np.float32 and frame['nsfw'].dtype == bool
    np.testing.assert_array_equal(frame['nsfw'], embeddings.sum(axis=1) > 0)

    # embeddings are stored as fixed-size float32 lists and read back as they were
    written = ds.save_metadata(tmp_path / 'meta', columns=['image_embedding', 'aesthetic_score'])
    field = pq.read_schema(written[0]).field('image_embedding')
    assert str(field.type) == 'fixed_size_list<element: float>[6]'
    back = np.concatenate([np.stack(pq.read_table(p).column('image_embedding').to_pylist())
                           for p in written])
    np.testing.assert_array_equal(back.astype(np.float32), embeddings)


def test_a_filter_on_a_score_reshards(source, tmp_path):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    net = _net()
    ds = GluonImageEmbedder(net, image_size=SIZE)(ds)
    ds = EmbeddingClassifier(mx.gluon.nn.Lambda(lambda x: x[:, 0]), 'score')(ds)
    ds.metadata['keep'] = ds.metadata['score'] > ds.metadata['score'].quantile(0.5)
    frame = ds.metadata.compute()
    before = net.images
    ds.to_webdataset(tmp_path / 'kept', 'keep', samples_per_shard=2, old_id_col='old')
    assert net.images == before + len(ds)  # the pipeline ran once, not once per pass
    new = ImageTextPairDataset.from_webdataset(tmp_path / 'kept', ID)
    kept = new.metadata.compute()
    assert kept['old'].tolist() == frame[ID][frame['keep']].tolist()
    np.testing.assert_array_equal(np.stack(kept['image_embedding'].tolist()),
                                  np.stack(frame['image_embedding'][frame['keep']].tolist()))


@pytest.mark.filterwarnings('ignore:Running on a single-machine scheduler')
def test_stages_on_a_local_cluster_equal_the_threaded_result(source, cluster):
    import dask

    def scored():
        ds = ImageTextPairDataset.from_webdataset(source, ID)
        ds = GluonImageEmbedder(_net(), image_size=SIZE)(ds)
        head = mx.gluon.nn.Dense(1, in_units=6)
        head.initialize(mx.init.Constant(0.5))
        ds = EmbeddingClassifier(head, 'score')(ds)
        return ds.metadata.compute()

    with dask.config.set(scheduler=cluster[1]):
        on_cluster = scored()
    with dask.config.set(scheduler='threads'):
        threaded = scored()
    np.testing.assert_allclose(on_cluster['score'], threaded['score'], rtol=1e-5)
    np.testing.assert_allclose(np.stack(on_cluster['image_embedding'].tolist()),
                               np.stack(threaded['image_embedding'].tolist()), rtol=1e-5)


def test_stage_arguments_and_order_are_checked(source):
    ds = ImageTextPairDataset.from_webdataset(source, ID)
    with pytest.raises(ValueError, match=r"EmbeddingClassifier needs the column "
                                         r"'image_embedding' \(run an ImageEmbedder first\)"):
        ds = EmbeddingClassifier(mx.gluon.nn.Dense(1), 'score')(ds)
    with pytest.raises(TypeError, match='batch_size must be an integer'):
        GluonImageEmbedder(_net(), batch_size=2.5)
    with pytest.raises(ValueError, match='image_size'):
        GluonImageEmbedder(_net(), image_size=0)
    with pytest.raises(TypeError, match="net must be callable"):
        GluonImageEmbedder('resnet')
    with pytest.raises(TypeError, match='pred_column must be a str'):
        EmbeddingClassifier(mx.gluon.nn.Dense(1), pred_column=3)
    with pytest.raises(NotImplementedError, match='must define load_model'):
        ImageEmbedder(image_size=SIZE)(ds).metadata.compute()
    assert issubclass(EmbeddingClassifier, ImageClassifier)
