"""ImageTextPairDataset: sharded image-text datasets read at random, resharded, indexed.

Every dataset here is built by this file's own writer (tarfile, Pillow JPEGs, pandas
parquet), not by gluonbatch's, so the reader is checked against independently written
shards; faults (truncation, corrupt headers, stale indexes, bad names) are injected into
those files.
"""
import io
import json
import logging
import math
import os
import pickle
import shutil
import subprocess
import tarfile

import mxnet as mx
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from gluonbatch import cli, default_collate
from gluonbatch import webdataset as wds
from gluonbatch.batchify import List, Pad, Tuple
from gluonbatch.webdataset import ImageTextPairDataset, write_index

ID = 'key'
TIMEOUT = 60  # seconds a DataLoader waits for a worker


# --------------------------------------------------------------------------- test data

def jpeg_bytes(seed, height, width):
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, 'JPEG', quality=85)
    return out.getvalue()


def record(shard, sample, digits=4):
    """One record of shard ``shard``: id by the layout's rule, real JPEG, caption, json."""
    key = '%05d%0*d' % (shard, digits, sample)
    height, width = 8 + (3 * shard + sample) % 9, 8 + (5 * shard + 2 * sample) % 11
    caption = 'caption of %s: a café, number %d' % (key, sample)
    meta = {ID: key, 'width': width, 'height': height, 'url': 'http://x/%s.jpg' % key}
    return {'key': key, 'jpg': jpeg_bytes(int(key), height, width),
            'txt': caption.encode('utf-8'), 'json': json.dumps(meta).encode('utf-8'),
            'row': {ID: key, 'caption': caption, 'width': width, 'height': height,
                    'score': float(sample) / 10, 'shard': shard}}


def write_tar(path, members):
    """A tar of ``[(name, bytes), ...]`` written by the stdlib."""
    with tarfile.open(path, 'w') as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1700000000
            tar.addfile(info, io.BytesIO(data))


def members_of(records):
    return [('%s.%s' % (rec['key'], ext), rec[ext]) for rec in records
            for ext in ('jpg', 'txt', 'json')]


def write_shard(directory, stem, records, shuffle=None, index=False):
    """``stem.tar`` + ``stem.parquet`` (+ ``stem.idx``); ``shuffle`` permutes both orders."""
    order = list(records)
    if shuffle is not None:
        order = [order[i] for i in shuffle.permutation(len(order))]
    write_tar(os.path.join(directory, stem + '.tar'), members_of(order))
    if shuffle is not None:
        order = [order[i] for i in shuffle.permutation(len(order))]
    frame = pd.DataFrame([rec['row'] for rec in order],
                         columns=[ID, 'caption', 'width', 'height', 'score', 'shard'])
    frame.to_parquet(os.path.join(directory, stem + '.parquet'), index=False)
    if index:
        write_index(os.path.join(directory, stem + '.tar'))


def make_dataset(directory, sizes=(3, 2, 4), index=False, shuffle_seed=None):
    """Shards of the given sizes; returns the records in the dataset's expected order."""
    os.makedirs(directory, exist_ok=True)
    expected = []
    rng = None if shuffle_seed is None else np.random.default_rng(shuffle_seed)
    for shard, size in enumerate(sizes):
        records = [record(shard, sample) for sample in range(size)]
        write_shard(directory, '%05d' % shard, records, shuffle=rng, index=index)
        expected += sorted(records, key=lambda rec: rec['key'])
    return expected


def check_record(ds, i, rec):
    image, caption, meta = ds[i]
    assert isinstance(image, mx.nd.NDArray) and image.dtype == np.uint8
    assert image.shape == (rec['row']['height'], rec['row']['width'], 3)
    np.testing.assert_array_equal(image.asnumpy(), mx.image.imdecode(rec['jpg']).asnumpy())
    assert caption == rec['txt'].decode('utf-8') and isinstance(caption, str)
    assert meta == json.loads(rec['json'])


def files(directory):
    return sorted(os.listdir(directory))


@pytest.fixture
def data(tmp_path):
    path = str(tmp_path / 'data')
    return path, make_dataset(path)


# --------------------------------------------------------------------------- reading

@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_reads_every_record_in_shard_order_sorted_by_id(tmp_path, index):
    path = str(tmp_path / 'data')
    expected = make_dataset(path, sizes=(4, 3, 5), index=index, shuffle_seed=7)
    before = files(path)
    ds = ImageTextPairDataset.from_webdataset(path, id_col=ID)
    assert len(ds) == len(expected) == 12
    assert list(ds.metadata[ID]) == [rec['key'] for rec in expected]
    assert list(ds.metadata['shard']) == [0] * 4 + [1] * 3 + [2] * 5
    assert list(ds.metadata.index) == list(range(12))
    for i, rec in enumerate(expected):
        check_record(ds, i, rec)
        assert ds.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}
    assert files(path) == before  # nothing written beside the data


def test_attributes_and_indexing(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(os.path.relpath(path), ID)
    assert ds.path == path and ds.id_col == ID
    assert ds.tar_files == [os.path.join(path, '%05d.tar' % k) for k in range(3)]
    assert isinstance(ds.metadata, pd.DataFrame)
    assert isinstance(ds, mx.gluon.data.Dataset)
    assert 'shards=3, records=9' in repr(ds)
    assert ds[-1][1] == ds[8][1] == ds[np.int64(8)][1] == expected[8]['txt'].decode()
    with pytest.raises(IndexError, match='out of range'):
        ds[9]
    with pytest.raises(IndexError):
        ds[-10]
    with pytest.raises(TypeError, match='must be an int'):
        ds['0']


def test_index_and_scan_give_the_same_dataset(tmp_path):
    path = str(tmp_path / 'data')
    make_dataset(path, sizes=(5, 1, 3), index=True)
    with_idx = ImageTextPairDataset.from_webdataset(path, ID)
    scanned = ImageTextPairDataset.from_webdataset(path, ID, use_index=False)
    assert all(shard.idx for shard in with_idx._shards)
    assert not any(shard.idx for shard in scanned._shards)
    pd.testing.assert_frame_equal(with_idx.metadata, scanned.metadata)
    np.testing.assert_array_equal(with_idx._members, scanned._members)
    for i in range(len(scanned)):
        assert with_idx.read_raw(i) == scanned.read_raw(i)


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_any_shard_sizes_read_alike_with_and_without_index(tmp_path_factory, sizes, seed):
    path = str(tmp_path_factory.mktemp('sizes'))
    expected = make_dataset(path, sizes=sizes, shuffle_seed=seed)
    scanned = ImageTextPairDataset.from_webdataset(path, ID)
    for tar in scanned.tar_files:
        write_index(tar)
    indexed = ImageTextPairDataset.from_webdataset(path, ID)
    assert len(scanned) == len(indexed) == sum(sizes)
    assert list(indexed.metadata[ID]) == [rec['key'] for rec in expected]
    pd.testing.assert_frame_equal(indexed.metadata, scanned.metadata)
    for i, rec in enumerate(expected):
        assert indexed.read_raw(i) == scanned.read_raw(i) == {
            ext: rec[ext] for ext in ('jpg', 'txt', 'json')}


def test_write_index_format_matches_tarfile_offsets(tmp_path):
    path = str(tmp_path / 'data')
    make_dataset(path, sizes=(3,))
    tar_path = os.path.join(path, '00000.tar')
    assert write_index(tar_path) == os.path.join(path, '00000.idx')
    lines = open(os.path.join(path, '00000.idx')).read().splitlines()
    assert lines[0] == 'v1.2 3'
    with tarfile.open(tar_path) as tar:
        infos = tar.getmembers()
    for line, sample in zip(lines[1:], [infos[0:3], infos[3:6], infos[6:9]]):
        tokens = line.split(' ')
        assert len(tokens) == 12
        for (ext, offset, size, name), info in zip(zip(*[iter(tokens)] * 4), sample):
            assert (name, int(offset), int(size)) == (info.name, info.offset_data, info.size)
            assert ext == info.name.split('.', 1)[1]
    custom = str(tmp_path / 'elsewhere.idx')
    assert write_index(tar_path, custom) == custom
    assert open(custom).read() == '\n'.join(lines) + '\n'
    assert not [name for name in files(path) if name.endswith('.tmp')]


def test_multi_dot_extensions_and_extra_members(tmp_path):
    path = str(tmp_path)
    rec = record(0, 0)
    write_tar(os.path.join(path, '00000.tar'),
              members_of([rec]) + [(rec['key'] + '.seg.png', b'not read')])
    pd.DataFrame([rec['row']]).to_parquet(os.path.join(path, '00000.parquet'))
    write_index(os.path.join(path, '00000.tar'))
    last = tar_infos(os.path.join(path, '00000.tar'))[-1]
    assert open(os.path.join(path, '00000.idx')).read().split()[-4:] == [
        'seg.png', str(last.offset_data), '8', rec['key'] + '.seg.png']
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    check_record(ds, 0, rec)
    assert ds.read_raw(0)['seg.png'] == b'not read'


@pytest.mark.skipif(shutil.which('tar') is None, reason='needs GNU tar')
def test_reads_a_tar_made_by_gnu_tar(tmp_path):
    loose = tmp_path / 'loose'
    loose.mkdir()
    records = [record(0, k) for k in range(3)]
    names = []
    for name, data in members_of(records):
        (loose / name).write_bytes(data)
        names.append(name)
    path = tmp_path / 'data'
    path.mkdir()
    subprocess.run(['tar', '-C', str(loose), '-cf', str(path / '00000.tar')] + names,
                   check=True)
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(path / '00000.parquet')
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    for i, rec in enumerate(records):
        check_record(ds, i, rec)


def test_transform_and_transform_first(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    first = ds.transform_first(lambda image: mx.image.imresize(image, 5, 4))
    image, caption, meta = first[2]
    assert image.shape == (4, 5, 3) and caption == expected[2]['txt'].decode()
    whole = ds.transform(lambda image, caption, meta: (image.shape, caption.upper(), meta[ID]))
    assert whole[3] == (ds[3][0].shape, expected[3]['txt'].decode().upper(), expected[3]['key'])


@pytest.mark.parametrize('num_workers, thread_pool', [(0, False), (1, False), (2, False),
                                                      (2, True)],
                         ids=['main', '1proc', '2proc', '2threads'])
def test_dataloader_with_gluonbatch_batchify(data, num_workers, thread_pool):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]  # the parent opens a handle before the workers fork
    loader = mx.gluon.data.DataLoader(ds, batch_size=4, shuffle=True, last_batch='keep',
                                      batchify_fn=Tuple(Pad(axis=(0, 1)), List(), List()),
                                      num_workers=num_workers, thread_pool=thread_pool,
                                      timeout=TIMEOUT)
    by_key = {rec['key']: rec for rec in expected}
    for _ in range(2):
        seen = []
        for images, captions, metas in loader:
            assert images.dtype == np.uint8 and images.shape[0] == len(captions) == len(metas)
            for image, meta in zip(images.asnumpy(), metas):
                rec = by_key[meta[ID]]
                height, width = rec['row']['height'], rec['row']['width']
                np.testing.assert_array_equal(image[:height, :width],
                                              mx.image.imdecode(rec['jpg']).asnumpy())
                assert not image[height:].any() and not image[:, width:].any()
            seen += [meta[ID] for meta in metas]
        assert sorted(seen) == sorted(by_key)


def test_default_collate_after_resize(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID).transform_first(
        lambda image: mx.image.imresize(image, 6, 6))
    loader = mx.gluon.data.DataLoader(ds, batch_size=5, batchify_fn=default_collate)
    images, captions, metas = next(iter(loader))
    assert images.shape == (5, 6, 6, 3) and images.context == mx.Context('cpu_shared', 0)
    assert captions == [rec['txt'].decode() for rec in expected[:5]]
    assert metas[ID] == [rec['key'] for rec in expected[:5]]
    assert metas['width'].asnumpy().tolist() == [rec['row']['width'] for rec in expected[:5]]


def test_forked_process_opens_its_own_handles(data):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]
    parent_handle = ds._handles[ds.tar_files[0]]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: read, report whether it used the parent's handle object
        code = 1
        try:
            ds[1]
            os.write(write, b'own' if ds._handles[ds.tar_files[0]] is not parent_handle
                     else b'shared')
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    answer = os.read(read, 64)
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert answer == b'own'
    assert ds._handles[ds.tar_files[0]] is parent_handle and not parent_handle.closed
    ds[1]


def test_pickled_dataset_reads_after_unpickling(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]
    copy = pickle.loads(pickle.dumps(ds))
    check_record(copy, 5, expected[5])
    ds.close()
    check_record(ds, 4, expected[4])  # reopens


# --------------------------------------------------------------------------- save_metadata

def test_save_metadata_replaces_own_parquets_atomically(data, monkeypatch):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['long'] = ds.metadata['caption'].str.len() > 33
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(wds.os, 'replace',
                        lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    written = ds.save_metadata()
    assert written == [os.path.join(path, '%05d.parquet' % k) for k in range(3)]
    assert [dst for _, dst in replaced] == written
    assert all(os.path.basename(src).startswith('.') and src.endswith('.tmp')
               and os.path.dirname(src) == path for src, _ in replaced)
    assert not [name for name in files(path) if name.endswith('.tmp')]
    again = ImageTextPairDataset.from_webdataset(path, ID)
    pd.testing.assert_frame_equal(again.metadata, ds.metadata)
    check_record(again, 3, expected[3])


def test_save_metadata_subset_and_other_path(data, tmp_path):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    out = tmp_path / 'meta'
    written = ds.save_metadata(out, columns=['score', 'width'])
    assert files(out) == ['00000.parquet', '00001.parquet', '00002.parquet']
    assert written == [str(out / name) for name in files(out)]
    second = pd.read_parquet(out / '00001.parquet')
    assert list(second.columns) == [ID, 'score', 'width']  # the id is always saved
    pd.testing.assert_frame_equal(second, ds.metadata[[ID, 'score', 'width']].iloc[3:5]
                                  .reset_index(drop=True))
    ds.save_metadata(out, columns=[ID, 'caption'])
    assert list(pd.read_parquet(out / '00000.parquet').columns) == [ID, 'caption']
    with pytest.raises(ValueError, match=r"no column\(s\) \['nope'\]"):
        ds.save_metadata(out, columns=['nope'])


def test_metadata_rows_must_stay(data):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata = ds.metadata.iloc[::-1]
    with pytest.raises(ValueError, match='reordered'):
        ds.save_metadata()
    ds.metadata = ds.metadata.iloc[1:]
    with pytest.raises(ValueError, match='8 rows for 9 records'):
        ds.to_webdataset(os.path.join(path, 'out'), None)


# --------------------------------------------------------------------------- to_webdataset

def check_resharded(out, source_records, mask, samples_per_shard, max_shards, old_id_col,
                    written):
    """The new dataset: shard sizes, ids by the rule, member bytes and metadata kept."""
    kept = [rec for rec, keep in zip(source_records, mask) if keep]
    digits = math.ceil(math.log10(samples_per_shard)) if samples_per_shard > 1 else 0
    num_shards = -(-len(kept) // samples_per_shard)
    stems = ['%0*d' % (max_shards, k) for k in range(num_shards)]
    assert written == [os.path.join(out, stem + '.tar') for stem in stems]
    assert files(out) == sorted(stem + ext for stem in stems
                                for ext in ('.tar', '.parquet', '.idx'))
    new = ImageTextPairDataset.from_webdataset(out, ID)
    scanned = ImageTextPairDataset.from_webdataset(out, ID, use_index=False)
    pd.testing.assert_frame_equal(new.metadata, scanned.metadata)
    expected_ids = ['%0*d' % (max_shards + digits, sample + 10 ** digits * shard)
                    for shard in range(num_shards)
                    for sample in range(min(samples_per_shard,
                                            len(kept) - shard * samples_per_shard))]
    assert list(new.metadata[ID]) == expected_ids
    for i, (rec, new_id) in enumerate(zip(kept, expected_ids)):
        assert new.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}
        assert new.metadata['score'][i] == rec['row']['score']
        if old_id_col:
            assert new.metadata[old_id_col][i] == rec['key']
    with tarfile.open(written[0]) as tar:
        assert tar.getnames()[:3] == ['%s.%s' % (expected_ids[0], ext)
                                      for ext in ('jpg', 'txt', 'json')]
    return new


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('source'))
    return path, make_dataset(path, sizes=(4, 3, 5))


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mask=st.lists(st.booleans(), min_size=12, max_size=12).filter(any),
       samples_per_shard=st.integers(1, 13), max_shards=st.integers(2, 3),
       old_id_col=st.sampled_from([None, 'old_key']))
def test_reshard_keeps_filtered_records_renumbered(source, tmp_path_factory, mask,
                                                   samples_per_shard, max_shards, old_id_col):
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['keep'] = mask  # a column added in memory
    out = str(tmp_path_factory.mktemp('out'))
    written = ds.to_webdataset(out, 'keep', samples_per_shard=samples_per_shard,
                               max_shards=max_shards, old_id_col=old_id_col)
    new = check_resharded(out, records, mask, samples_per_shard, max_shards, old_id_col,
                          written)
    assert new.metadata['keep'].all()


@pytest.mark.parametrize('samples_per_shard', [1, 5, 10, 10000])
def test_reshard_default_layout(source, tmp_path, samples_per_shard):
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    written = ds.to_webdataset(tmp_path / 'out', None, samples_per_shard=samples_per_shard)
    check_resharded(str(tmp_path / 'out'), records, [True] * 12, samples_per_shard, 5, None,
                    written)
    if samples_per_shard == 10000:  # DESIGN's example: shard 0, 4-digit record numbers
        assert ImageTextPairDataset.from_webdataset(tmp_path / 'out', ID).metadata[ID][11] \
            == '000000011'


def test_reshard_with_nothing_kept_writes_nothing(source, tmp_path, caplog):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['keep'] = False
    with caplog.at_level(logging.INFO, logger='gluonbatch.webdataset'):
        assert ds.to_webdataset(tmp_path / 'new', 'keep') == []
    assert not (tmp_path / 'new').exists()
    assert 'nothing written' in caplog.text
    (tmp_path / 'empty').mkdir()
    assert ds.to_webdataset(tmp_path / 'empty', 'keep', samples_per_shard=1) == []
    assert files(tmp_path / 'empty') == []


def test_reshard_refuses_the_source_directory(source, tmp_path):
    path, _ = source
    before = files(path)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    os.symlink(path, tmp_path / 'link')
    for target in (path, path + '/', os.path.relpath(path), str(tmp_path / 'link')):
        with pytest.raises(ValueError, match='is the source directory'):
            ds.to_webdataset(target, None)
    assert files(path) == before


def test_reshard_refuses_bad_arguments_before_writing(source, tmp_path):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    out = tmp_path / 'out'
    with pytest.raises(ValueError, match="no filter column 'nope'"):
        ds.to_webdataset(out, 'nope')
    ds.metadata['score_kept'] = ds.metadata['score']
    with pytest.raises(TypeError, match="filter column 'score_kept' must be bool"):
        ds.to_webdataset(out, 'score_kept')
    with pytest.raises(ValueError, match="old_id_col 'caption' is already a column"):
        ds.to_webdataset(out, None, old_id_col='caption')
    with pytest.raises(ValueError, match='need 12 shards, more than max_shards=1'):
        ds.to_webdataset(out, None, samples_per_shard=1, max_shards=1)
    with pytest.raises(ValueError, match='samples_per_shard must be at least 1'):
        ds.to_webdataset(out, None, samples_per_shard=0)
    with pytest.raises(TypeError, match='max_shards must be an int'):
        ds.to_webdataset(out, None, max_shards=2.0)
    assert not out.exists()
    out.mkdir()
    (out / '00003.parquet').write_bytes(b'')
    with pytest.raises(ValueError, match='already holds shard files'):
        ds.to_webdataset(out, None)
    assert files(out) == ['00003.parquet']
    # exactly 10**max_shards shards fit
    written = ds.to_webdataset(tmp_path / 'ten', None, samples_per_shard=2, max_shards=1)
    assert len(written) == 6


def test_reshard_failure_leaves_only_complete_shards(source, tmp_path, monkeypatch):
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    real = ds._read_members

    def fail_at_seventh(i):
        if i == 6:
            raise OSError('disk on fire')
        return real(i)

    monkeypatch.setattr(ds, '_read_members', fail_at_seventh)
    out = tmp_path / 'out'
    with pytest.raises(OSError, match='disk on fire'):
        ds.to_webdataset(out, None, samples_per_shard=4)
    assert files(out) == ['00000.idx', '00000.parquet', '00000.tar']
    new = ImageTextPairDataset.from_webdataset(out, ID)
    assert [new.read_raw(i)['jpg'] for i in range(4)] == [rec['jpg'] for rec in records[:4]]


def test_reshard_streams_one_record_at_a_time(source, tmp_path, monkeypatch):
    """Records are read one by one as they are written; no shard is held in memory."""
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    events = []
    real_read, real_add = ds._read_members, wds._ShardWriter.add
    monkeypatch.setattr(ds, '_read_members', lambda i: (events.append('read'), real_read(i))[1])
    monkeypatch.setattr(wds._ShardWriter, 'add',
                        lambda self, key, members: (events.append('add'),
                                                    real_add(self, key, members))[1])
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(wds.os, 'replace',
                        lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    ds.to_webdataset(tmp_path / 'out', None, samples_per_shard=10)
    assert events == ['read', 'add'] * 12
    out = str(tmp_path / 'out')
    assert replaced == [(os.path.join(out, '.%s.tmp' % name), os.path.join(out, name))
                        for stem in ('00000', '00001')
                        for name in (stem + '.tar', stem + '.idx', stem + '.parquet')]


# --------------------------------------------------------------------------- rank partitioning

@pytest.mark.parametrize('num_shards', [1, 3, 5])
def test_ranks_are_disjoint_and_cover_every_shard(tmp_path, num_shards):
    path = str(tmp_path)
    make_dataset(path, sizes=[2] * num_shards)
    everything = ImageTextPairDataset.from_webdataset(path, ID)
    for world_size in range(1, 7):
        parts = [ImageTextPairDataset.from_webdataset(path, ID, rank=rank,
                                                      world_size=world_size)
                 for rank in range(world_size)]
        tars = [tar for part in parts for tar in part.tar_files]
        assert sorted(tars) == everything.tar_files and len(set(tars)) == len(tars)
        ids = [key for part in parts for key in part.metadata[ID]]
        assert sorted(ids) == list(everything.metadata[ID])
        for rank, part in enumerate(parts):
            assert part.tar_files == everything.tar_files[rank::world_size]
            assert len(part) == 2 * len(part.tar_files)
            if len(part):
                assert part[len(part) - 1][2][ID] == part.metadata[ID].iloc[-1]


def test_rank_without_shards_is_empty(data, caplog):
    path, _ = data
    with caplog.at_level(logging.WARNING, logger='gluonbatch.webdataset'):
        ds = ImageTextPairDataset.from_webdataset(path, ID, rank=4, world_size=5)
    assert len(ds) == 0 and ds.tar_files == [] and list(ds.metadata.columns) == [ID]
    assert 'gets no shard' in caplog.text
    with pytest.raises(IndexError):
        ds[0]


@pytest.mark.parametrize('rank, world_size, error', [
    (2, 2, ValueError), (-1, 2, ValueError), (0, 0, ValueError), (0.0, 1, TypeError),
    (True, 2, TypeError)])
def test_bad_rank_arguments(data, rank, world_size, error):
    with pytest.raises(error, match='rank|world_size'):
        ImageTextPairDataset.from_webdataset(data[0], ID, rank=rank, world_size=world_size)


# --------------------------------------------------------------------------- bad input

def test_missing_directory_or_no_shards(tmp_path):
    with pytest.raises(FileNotFoundError, match='no dataset directory'):
        ImageTextPairDataset.from_webdataset(tmp_path / 'nope', ID)
    with pytest.raises(FileNotFoundError, match='holds no shards'):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


@pytest.mark.parametrize('remove, beside', [('00001.parquet', '00001.tar'),
                                            ('00001.tar', '00001.parquet')])
def test_shard_file_without_its_partner(data, remove, beside):
    path, _ = data
    os.remove(os.path.join(path, remove))
    with pytest.raises(FileNotFoundError, match='%s has no %s beside it'
                       % (os.path.join(path, beside), remove)):
        ImageTextPairDataset.from_webdataset(path, ID)


def test_index_without_its_tar(data):
    path, _ = data
    open(os.path.join(path, '00007.idx'), 'w').write('v1.2 0\n')
    with pytest.raises(FileNotFoundError, match='00007.idx has no 00007.tar'):
        ImageTextPairDataset.from_webdataset(path, ID)


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_parquet_ids_missing_from_the_tar(tmp_path, index):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records[:2]))
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(tmp_path / '00000.parquet')
    if index:
        write_index(tmp_path / '00000.tar')
    with pytest.raises(ValueError, match=r"00000.parquet lists .*(ids that|rows)"
                                         if not index else r'00000.idx does not match'):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)
    if not index:
        with pytest.raises(ValueError, match=r"00000.parquet lists ids that .*00000.tar does "
                                             r"not hold: '000000002'"):
            ImageTextPairDataset.from_webdataset(tmp_path, ID)


def test_tar_records_missing_from_the_parquet(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    pd.DataFrame([rec['row'] for rec in records[1:]]).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.tar holds records missing from .*00000.parquet"
                                         r": '000000000'"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


def test_same_count_different_ids(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    rows = [rec['row'] for rec in records]
    rows[1] = dict(rows[1], key='000009999')
    pd.DataFrame(rows).to_parquet(tmp_path / '00000.parquet')
    write_index(tmp_path / '00000.tar')
    with pytest.raises(ValueError, match=r"00000.parquet lists ids that .*00000.idx does not "
                                         r"hold: '000009999'"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


def cut(path, size):
    with open(path, 'r+b') as handle:
        handle.truncate(size)


def tar_infos(path):
    with tarfile.open(path) as tar:
        return tar.getmembers()


@pytest.mark.parametrize('where', ['mid-data', 'mid-header', 'at-member-end', 'empty'])
def test_truncated_tar(data, where):
    path, _ = data
    tar = os.path.join(path, '00001.tar')
    last = tar_infos(tar)[-1]
    size = {'mid-data': last.offset_data + last.size // 2, 'mid-header': last.offset + 100,
            'at-member-end': last.offset_data + -(-last.size // 512) * 512, 'empty': 0}[where]
    cut(tar, size)
    with pytest.raises(ValueError, match=r'%s (is truncated|is not a readable)' % tar):
        ImageTextPairDataset.from_webdataset(path, ID)


def test_tar_truncated_after_opening(data):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    cut(ds.tar_files[0], tar_infos(ds.tar_files[0])[4].offset_data)
    with pytest.raises(ValueError, match="truncated after the dataset was opened"):
        ds[1]
    ds[0]  # still there
    ds[3]  # another shard


@pytest.mark.parametrize('damage', ['middle-header', 'first-header', 'not-a-tar', 'gzip'])
def test_corrupt_tar(data, damage):
    path, _ = data
    tar = os.path.join(path, '00000.tar')
    content = bytearray(open(tar, 'rb').read())
    if damage == 'middle-header':  # checksum no longer matches: tarfile would stop silently
        content[tar_infos(tar)[4].offset + 10] ^= 0xFF
    elif damage == 'first-header':
        content[:512] = b'\x07' * 512
    elif damage == 'not-a-tar':
        content = bytearray(b'PK\x03\x04 this is a zip, not a tar' * 40)
    else:
        import gzip
        content = bytearray(gzip.compress(bytes(content)))
    open(tar, 'wb').write(content)
    with pytest.raises(ValueError, match=r'%s is (corrupt|not a readable)' % tar):
        ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match=tar):
        write_index(tar)


def edit_index(path, edit):
    idx = os.path.join(path, '00000.idx')
    lines = open(idx).read().splitlines()
    open(idx, 'w').write('\n'.join(edit(lines)) + '\n')


def test_index_offset_past_the_end(tmp_path):
    path = str(tmp_path)
    make_dataset(path, sizes=(3,), index=True)

    def past_end(lines):
        tokens = lines[2].split()
        tokens[1] = str(os.path.getsize(os.path.join(path, '00000.tar')))
        return lines[:2] + [' '.join(tokens)] + lines[3:]

    edit_index(path, past_end)
    with pytest.raises(ValueError, match=r"00000.idx does not match .*00000.tar: member "
                                         r"'000000001.jpg' at bytes .* past the end"):
        ImageTextPairDataset.from_webdataset(path, ID)


def test_index_member_name_mismatch(tmp_path):
    """An index whose offsets point at other members: found at open or at the read."""
    path = str(tmp_path)
    make_dataset(path, sizes=(4,), index=True)

    def swap_records(first, second):
        def edit(lines):
            a, b = lines[first].split(), lines[second].split()
            for k in (1, 2, 5, 6, 9, 10):  # swap offsets and sizes, keep the names
                a[k], b[k] = b[k], a[k]
            lines[first], lines[second] = ' '.join(a), ' '.join(b)
            return lines
        return edit

    edit_index(path, swap_records(2, 3))  # records 1 and 2: not checked at open
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match=r"00000.tar: expected member 000000001.jpg .* found the "
                                         r"header of '000000002.jpg'; its index .*00000.idx "
                                         r"does not match it"):
        ds[1]
    ds[0]
    ds[3]  # the other records still read
    edit_index(path, swap_records(3, 2))  # undo
    edit_index(path, swap_records(1, 4))  # the first and last records: found at open
    with pytest.raises(ValueError, match='expected member 000000000.jpg'):
        ImageTextPairDataset.from_webdataset(path, ID)


def test_index_of_another_tar(tmp_path):
    path = str(tmp_path)
    make_dataset(path, sizes=(3, 3), index=True)
    shutil.copyfile(os.path.join(path, '00001.idx'), os.path.join(path, '00000.idx'))
    with pytest.raises(ValueError, match=r"00000.parquet lists ids that .*00000.idx does not "
                                         r"hold"):
        ImageTextPairDataset.from_webdataset(path, ID)


@pytest.mark.parametrize('edit, message', [
    (lambda lines: ['v1.2 4'] + lines[1:], r'first line says 4 samples but it lists 3'),
    (lambda lines: ['v1.2 2'] + lines[1:3], r'lists 2 samples, the parquet 3 rows'),
    (lambda lines: ['v1.1 3'] + lines[1:], r'first line must be "v1.2 <number of samples>"'),
    (lambda lines: lines[:1] + [lines[1] + ' txt'] + lines[2:], r'line 2: expected groups'),
    (lambda lines: lines[:1] + [lines[1].replace(' 512 ', ' 100 ', 1)] + lines[2:],
     r'data offset 100, which is not a tar data offset'),
    (lambda lines: lines[:1] + [lines[1].replace(' 512 ', ' x ', 1)] + lines[2:],
     r'must be whole numbers'),
    (lambda lines: lines[:1] + [lines[1].replace('jpg 512', 'png 512', 1)] + lines[2:],
     r"extension 'png' does not match member '000000000.jpg'"),
    (lambda lines: lines[:2] + [lines[1]] + lines[3:], r"record '000000000' is listed twice"),
    (lambda lines: ['v1.2 2'] + [lines[1] + ' ' + lines[2]] + lines[3:],
     r'one sample have different ids'),
], ids=['count-vs-lines', 'count-vs-parquet', 'version', 'tokens', 'offset-not-block',
        'not-a-number', 'ext-mismatch', 'duplicate', 'mixed-ids'])
def test_malformed_or_mismatched_index(tmp_path, edit, message):
    path = str(tmp_path)
    make_dataset(path, sizes=(3,), index=True)
    edit_index(path, edit)
    with pytest.raises(ValueError, match=r'00000.idx.*' + message):
        ImageTextPairDataset.from_webdataset(path, ID)
    assert len(ImageTextPairDataset.from_webdataset(path, ID, use_index=False)) == 3


def test_index_member_size_mismatch(tmp_path):
    path = str(tmp_path)
    make_dataset(path, sizes=(3,), index=True)
    edit_index(path, lambda lines: lines[:1] + [lines[1].replace(' 000000000.txt',
                                                                 '0 000000000.txt')]
               + lines[2:])
    with pytest.raises(ValueError, match='expected member 000000000.txt .* its tar header '
                                         'says'):
        ImageTextPairDataset.from_webdataset(path, ID)


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_undecodable_image_names_the_record_and_loses_nothing_else(tmp_path, index):
    records = [record(0, k) for k in range(4)]
    records[2] = dict(records[2], jpg=b'\xff\xd8 this is no jpeg')
    write_shard(str(tmp_path), '00000', records, index=index)
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    with pytest.raises(ValueError, match=r"cannot decode the image of member 000000002.jpg of "
                                         r"record '000000002' \(index 2\) in .*00000.tar: "
                                         r".*Decoding failed"):
        ds[2]
    for i in (0, 1, 3):
        check_record(ds, i, records[i])
    assert ds.read_raw(2)['jpg'] == records[2]['jpg']
    loader = mx.gluon.data.DataLoader(ds, batch_size=2, num_workers=2, timeout=TIMEOUT,
                                      batchify_fn=Tuple(Pad(axis=(0, 1)), List(), List()))
    with pytest.raises(ValueError, match="record '000000002'"):
        list(loader)


def test_bad_caption_or_json_names_the_record(tmp_path):
    records = [record(0, k) for k in range(3)]
    records[0] = dict(records[0], txt=b'\xff\xfe not utf-8')
    records[1] = dict(records[1], json=b'{"unclosed": ')
    records[2] = dict(records[2], json=b'[1, 2]')
    write_shard(str(tmp_path), '00000', records)
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    with pytest.raises(ValueError, match=r"caption of record '000000000' \(index 0\) in .* is "
                                         r"not UTF-8"):
        ds[0]
    with pytest.raises(ValueError, match=r"json member of record '000000001' .* not valid JSON"):
        ds[1]
    with pytest.raises(ValueError, match=r"record '000000002' .* holds a list, not an object"):
        ds[2]


@pytest.mark.parametrize('name', ['../x.jpg', '../../etc/x.jpg', 'sub/000000000.jpg',
                                  '/tmp/abs.jpg', 'a b.jpg', 'noextension', '.jpg',
                                  '..\\x.jpg'])
def test_member_names_with_path_components_never_touch_the_file_system(tmp_path, name):
    path = tmp_path / 'deep' / 'data'
    path.mkdir(parents=True)
    rec = record(0, 0)
    write_tar(path / '00000.tar', members_of([rec]) + [(name, b'payload')])
    pd.DataFrame([rec['row']]).to_parquet(path / '00000.parquet')
    before = sorted(str(p) for p in tmp_path.rglob('*'))
    with pytest.raises(ValueError, match=r'00000.tar: member name %s' % repr(name)
                       .replace('\\', '\\\\').replace('.', r'\.')):
        ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match='member name'):
        write_index(path / '00000.tar')
    assert sorted(str(p) for p in tmp_path.rglob('*')) == before
    assert not os.path.exists('/tmp/abs.jpg')


@pytest.mark.parametrize('members, message', [
    (lambda rec: [m for m in members_of([rec]) if not m[0].endswith('.txt')],
     r"record '000000000' in .*00000.tar has no caption member \(\.txt\)"),
    (lambda rec: [m for m in members_of([rec]) if not m[0].endswith('.json')],
     r"has no metadata member \(\.json\)"),
    (lambda rec: [m for m in members_of([rec]) if not m[0].endswith('.jpg')],
     r"has no image members"),
    (lambda rec: members_of([rec]) + [(rec['key'] + '.png', rec['jpg'])],
     r"has 2 image members \(\.jpg, \.txt, \.json, \.png\)"),
    (lambda rec: members_of([rec]) + [(rec['key'] + '.txt', b'again')],
     r"holds member '000000000\.txt' twice"),
], ids=['no-txt', 'no-json', 'no-image', 'two-images', 'duplicate-member'])
def test_records_with_missing_or_extra_members(tmp_path, members, message):
    rec = record(0, 0)
    write_tar(tmp_path / '00000.tar', members(rec))
    pd.DataFrame([rec['row']]).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=message):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


def test_non_regular_members_are_refused(tmp_path):
    rec = record(0, 0)
    write_tar(tmp_path / '00000.tar', members_of([rec]))
    with tarfile.open(tmp_path / '00000.tar', 'a') as tar:
        link = tarfile.TarInfo('000000000.lnk')
        link.type, link.linkname = tarfile.SYMTYPE, '/etc/passwd'
        tar.addfile(link)
    pd.DataFrame([rec['row']]).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"member '000000000.lnk' is not a regular file"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


def test_bad_id_columns(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    frame = pd.DataFrame([rec['row'] for rec in records])
    frame.to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.parquet has no id column 'id'; its columns "
                                         r"are \['key'"):
        ImageTextPairDataset.from_webdataset(tmp_path, 'id')
    with pytest.raises(TypeError, match='id_col must be a str'):
        ImageTextPairDataset.from_webdataset(tmp_path, 0)
    frame.assign(key=frame[ID].astype(int)).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(TypeError, match=r"00000.parquet row 0: id 0 in column 'key' is not a str "
                                        r"\(int64\); ids must be strings"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)
    frame.assign(key=[records[0]['key']] * 3).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.parquet lists record ids more than once: "
                                         r"'000000000'"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)
    open(tmp_path / '00000.parquet', 'wb').write(b'not parquet at all')
    with pytest.raises(ValueError, match='00000.parquet is not a readable parquet file'):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


def test_same_id_in_two_shards(tmp_path):
    rec = record(0, 0)
    for stem in ('00000', '00001'):
        write_shard(str(tmp_path), stem, [rec])
    with pytest.raises(ValueError, match=r"record id '000000000' is in more than one shard: "
                                         r".*00000.parquet.*00001.parquet"):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


# --------------------------------------------------------------------------- the CLI

def test_cli_index_inspect_reshard(data, tmp_path, capsys):
    path, expected = data
    tars = [os.path.join(path, '%05d.tar' % k) for k in range(3)]
    assert cli.main(['wds', 'index'] + tars) == 0
    out = capsys.readouterr().out
    assert '00000.idx: 3 samples' in out and '00002.idx: 4 samples' in out
    assert cli.main(['wds', 'index', tars[0], '--output', str(tmp_path / 'x.idx')]) == 0
    assert open(tmp_path / 'x.idx').read() == open(tars[0][:-4] + '.idx').read()

    assert cli.main(['wds', 'inspect', path, '--records', '2']) == 0
    out = capsys.readouterr().out
    assert '3 shards (3 with .idx), 9 records' in out
    assert 'key (object), caption (object)' in out
    assert expected[1]['key'] in out and expected[2]['key'] not in out.split('records:')[1]

    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['wide'] = ds.metadata['width'] > 10
    ds.save_metadata()
    dst = tmp_path / 'dst'
    assert cli.main(['wds', 'reshard', path, str(dst), '--filter-column', 'wide',
                     '--samples-per-shard', '2', '--max-shards', '3',
                     '--old-id-col', 'old']) == 0
    kept = int(ds.metadata['wide'].sum())
    assert '%d of 9 records in %d shards' % (kept, -(-kept // 2)) in capsys.readouterr().out
    new = ImageTextPairDataset.from_webdataset(dst, ID)
    assert list(new.metadata['old']) == list(ds.metadata[ID][ds.metadata['wide']])
    assert new.metadata[ID][0] == '0000'


@pytest.mark.parametrize('argv, message', [
    (['wds', 'inspect', '{tmp}/nope'], 'gluonbatch wds inspect: error: no dataset directory'),
    (['wds', 'reshard', '{data}', '{data}'], 'is the source directory'),
    (['wds', 'reshard', '{data}', '{tmp}/o', '--filter-column', 'x'], "no filter column 'x'"),
    (['wds', 'index', '{tmp}/nope.tar'], 'gluonbatch wds index: error: no tar file'),
    (['wds', 'index', '{data}/00000.parquet'], 'is not a readable uncompressed tar'),
    (['wds', 'index', '{data}/00000.tar', '{data}/00001.tar', '-o', '{tmp}/x.idx'],
     '--output names one index file'),
])
def test_cli_errors_exit_non_zero_without_traceback(data, tmp_path, capsys, argv, message):
    argv = [arg.format(tmp=tmp_path, data=data[0]) for arg in argv]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert message in captured.err and 'Traceback' not in captured.err


def test_cli_inspect_reports_undecodable_records(tmp_path, capsys):
    records = [record(0, k) for k in range(2)]
    records[1] = dict(records[1], jpg=b'broken')
    write_shard(str(tmp_path), '00000', records)
    assert cli.main(['wds', 'inspect', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "000000001  error: cannot decode the image" in out and '000000000  image' in out
