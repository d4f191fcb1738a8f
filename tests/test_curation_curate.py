"""``gluonbatch wds embed / score / filter``: the curation steps from the command line give
what the Python stages give, on local threads and on a Dask scheduler's address."""
import re

import dask
import mxnet as mx
import numpy as np
import pyarrow.parquet as pq
import pytest

from gluonbatch.cli import main
from gluonbatch.curation import EmbeddingClassifier, GluonImageEmbedder, ImageTextPairDataset
from helpers import ID, make_dataset


def _export(block, prefix, shape):
    block.hybridize()
    block(mx.nd.zeros(shape))
    block.export(str(prefix))
    return mx.gluon.SymbolBlock.imports('%s-symbol.json' % prefix, ['data'],
                                        '%s-0000.params' % prefix)


@pytest.fixture
def curated(tmp_path):
    """A dataset, an exported backbone and head, and the columns the Python stages give."""
    path = str(tmp_path / 'data')
    make_dataset(path, sizes=(3, 2, 4))
    mx.random.seed(5)
    net = mx.gluon.nn.HybridSequential()
    net.add(mx.gluon.nn.Conv2D(5, 3, strides=2, in_channels=3), mx.gluon.nn.GlobalAvgPool2D(),
            mx.gluon.nn.Flatten())
    net.initialize(mx.init.Xavier())
    head = mx.gluon.nn.Dense(1, in_units=5)
    head.initialize(mx.init.Normal(1))
    backbone = _export(net, tmp_path / 'backbone', (1, 3, 16, 16))
    scorer = _export(head, tmp_path / 'head', (1, 5))
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds = GluonImageEmbedder(backbone, image_size=16)(ds)
    ds = EmbeddingClassifier(scorer, 'aesthetic_score')(ds)
    with dask.config.set(scheduler='threads'):  # the blocks of this process, not pickled
        return path, tmp_path, ds.metadata.compute()


def _embed_and_score(path, tmp_path, *options):
    assert main(['wds', 'embed', path, '--model', str(tmp_path / 'backbone'),
                 '--image-size', '16', '--batch-size', '4'] + list(options)) == 0
    assert main(['wds', 'score', path, '--model', str(tmp_path / 'head'),
                 '--column', 'aesthetic_score'] + list(options)) == 0


def test_embed_score_filter_give_what_the_stages_give(curated, capsys):
    path, tmp_path, want = curated
    first = str(tmp_path / 'data' / '00000.parquet')
    before = pq.read_table(first)
    _embed_and_score(path, tmp_path)
    out, err = capsys.readouterr()
    # the progress where the output is no terminal: a line per computation on stderr, no
    # bar; stdout has the results
    assert '\r' not in err
    assert len(re.findall(r'^(embed|score): (\d+)/\2 tasks? done in [\d.]+ s$', err, re.M)) == 2
    assert out.splitlines()[0].endswith('image_embedding for 9 records in 3 parquet files')
    assert len(out.splitlines()) == 2
    frame = ImageTextPairDataset.from_webdataset(path, ID).metadata.compute()
    np.testing.assert_allclose(np.stack(frame['image_embedding'].tolist()),
                               np.stack(want['image_embedding'].tolist()), rtol=1e-5)
    np.testing.assert_allclose(frame['aesthetic_score'], want['aesthetic_score'], rtol=1e-5)
    assert list(frame.columns[:2]) == [ID, 'caption']  # the columns it had are kept
    after = pq.read_table(first)  # as they were, the new ones after them
    assert after.column_names == before.column_names + ['image_embedding', 'aesthetic_score']
    assert after.select(before.column_names).equals(before)

    threshold = float(np.median(want['aesthetic_score']))
    dst = str(tmp_path / 'kept')
    assert main(['wds', 'filter', path, dst, '--where', 'aesthetic_score > %r' % threshold,
                 '--samples-per-shard', '2', '--old-id-col', 'old', '--no-progress']) == 0
    kept = ImageTextPairDataset.from_webdataset(dst, ID).metadata.compute()
    assert kept['old'].tolist() == want[ID][want['aesthetic_score'] > threshold].tolist()
    assert kept['keep'].all()


@pytest.mark.filterwarnings('ignore:Running on a single-machine scheduler')
def test_the_steps_on_a_scheduler_address(curated, cluster, capsys):
    path, tmp_path, want = curated
    address = cluster[0].scheduler_address
    _embed_and_score(path, tmp_path, '--scheduler', address)
    # the cluster computed them: a line of their tasks (one per shard) once per step
    err = capsys.readouterr().err
    assert re.findall(r'^(embed|score): 3/3 tasks done in [\d.]+ s$', err, re.M) == [
        'embed', 'score']
    dst = str(tmp_path / 'kept')
    assert main(['wds', 'filter', path, dst, '--where', 'aesthetic_score > 0',
                 '--scheduler', address]) == 0
    # a first pass over the input shards, then one task per output shard, each named
    err = capsys.readouterr().err
    assert re.findall(r'^filter \(([a-z ]+)\): (?:\d+)/\d+ tasks? done in [\d.]+ s$', err,
                      re.M) == ['selecting records', 'writing shards']
    frame = ImageTextPairDataset.from_webdataset(path, ID).metadata.compute()
    np.testing.assert_allclose(frame['aesthetic_score'], want['aesthetic_score'], rtol=1e-5)
    kept = ImageTextPairDataset.from_webdataset(dst, ID)
    assert len(kept) == int((want['aesthetic_score'] > 0).sum())


@pytest.mark.parametrize('args, code, message', [
    (['embed', '{path}'], 2, 'one of the arguments --model --network is required'),
    (['embed', '{path}', '--model', '{tmp}/none'], 1,
     'gluonbatch wds embed: error: no exported network at {tmp}/none'),
    (['score', '{path}', '--model', '{tmp}/head', '--column', 's'], 1,
     "EmbeddingClassifier needs the column 'image_embedding'"),
    (['filter', '{path}', '{tmp}/out', '--where', 'nope > 1'], 2,
     "--where 'nope > 1' is not an expression of the columns"),
])
def test_bad_curation_commands_say_why(curated, capsys, args, code, message):
    path, tmp_path, _ = curated
    args = [arg.format(path=path, tmp=tmp_path) for arg in args]
    try:
        assert main(['wds'] + args) == code
    except SystemExit as exit:
        assert exit.code == code
    assert message.format(path=path, tmp=tmp_path) in capsys.readouterr().err
