"""ImageTextPairDataset: reading records, DataLoaders, worker processes, decoding errors."""
import gc
import io
import json
import os
import pickle
import subprocess
import sys
import warnings

import dask.dataframe as dd
import mxnet as mx
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from gluonbatch import default_collate
from gluonbatch.batchify import List, Pad, Tuple
from gluonbatch.shards import IMAGE_EXTENSIONS, write_index
from gluonbatch.curation import ImageTextPairDataset

from helpers import (ID, TIMEOUT, check_record, cut, files, make_dataset, record, tar_infos,
                     write_shard, write_tar)


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_reads_every_record_in_shard_order_sorted_by_id(tmp_path, index):
    path = str(tmp_path / 'data')
    expected = make_dataset(path, sizes=(4, 3, 5), index=index, shuffle_seed=7)
    before = files(path)
    ds = ImageTextPairDataset.from_webdataset(path, id_col=ID)
    assert len(ds) == len(expected) == 12
    meta = ds.metadata.compute()
    assert meta[ID].tolist() == [rec['key'] for rec in expected]
    assert meta['shard'].tolist() == [0] * 4 + [1] * 3 + [2] * 5
    assert meta.index.tolist() == list(range(12))
    for i, rec in enumerate(expected):
        check_record(ds, i, rec)
        assert ds.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}
    assert files(path) == before  # nothing written beside the data


def test_attributes_and_indexing(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(os.path.relpath(path), ID)
    assert ds.path == path and ds.id_col == ID
    assert ds.tar_files == [os.path.join(path, '%05d.tar' % k) for k in range(3)]
    # lazy metadata: one partition per shard, indexed by record number
    assert isinstance(ds.metadata, dd.DataFrame)
    assert ds.metadata.npartitions == 3 and ds.metadata.divisions == (0, 3, 5, 8)
    assert [ds.record_id(i) for i in range(9)] == [rec['key'] for rec in expected]
    assert isinstance(ds, mx.gluon.data.Dataset)
    assert 'shards=3, records=9' in repr(ds)
    assert ds[-1][1] == ds[8][1] == ds[np.int64(8)][1] == expected[8]['txt'].decode()
    with pytest.raises(IndexError, match='out of range'):
        ds[9]
    with pytest.raises(IndexError):
        ds[-10]
    with pytest.raises(TypeError, match=r"record index must be an integer, got '0' \(str\)"):
        ds['0']
    with pytest.raises(TypeError, match='got True'):
        ds[True]


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


def descriptors_of(path):
    """This process's open file descriptors on ``path`` (from /proc/self/fd)."""
    found = []
    for fd in os.listdir('/proc/self/fd'):
        try:
            if os.readlink('/proc/self/fd/' + fd) == path:
                found.append(int(fd))
        except OSError:  # the descriptor of the listing itself, closed by now
            pass
    return sorted(found)


@pytest.mark.skipif(not os.path.isdir('/proc/self/fd'), reason='needs /proc/self/fd')
def test_forked_process_opens_its_own_handles(data):
    """The child moves the file position of the descriptor it inherited, then reads: the
    descriptor it reads through must be a new open file (position 0), not the parent's."""
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    tar = ds.tar_files[0]
    others = set(descriptors_of(tar))  # earlier tests' datasets, which may close meanwhile
    ds[0]
    inherited = sorted(set(descriptors_of(tar)) - others)
    assert len(inherited) == 1
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report (descriptor, file position) of what it has on the tar
        code = 1
        try:
            os.lseek(inherited[0], 1234, os.SEEK_SET)  # shared with the parent's handle
            ds[1]
            os.write(write, json.dumps([(fd, os.lseek(fd, 0, os.SEEK_CUR))
                                        for fd in descriptors_of(tar)
                                        if fd not in others]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    answer = os.read(read, 256)
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    child = json.loads(answer)
    assert child and all(position == 0 for _, position in child)
    assert os.lseek(inherited[0], 0, os.SEEK_CUR) == 1234  # the child did move the parent's
    assert sorted(set(descriptors_of(tar)) - others) == inherited
    check_record(ds, 1, data[1][1])  # the parent's handle still reads


def test_pickled_dataset_reads_after_unpickling(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]
    copy = pickle.loads(pickle.dumps(ds))
    check_record(copy, 5, expected[5])
    ds.close()
    check_record(ds, 4, expected[4])  # reopens


def _resource_warnings(caught):
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_a_collected_dataset_closes_its_tars_without_a_resource_warning(tmp_path, index):
    path = str(tmp_path / 'data')
    expected = make_dataset(path, index=index)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        ds = ImageTextPairDataset.from_webdataset(path, ID)
        loader = mx.gluon.data.DataLoader(ds, batch_size=4,
                                          batchify_fn=Tuple(List(), List(), List()))
        assert sum(len(captions) for _, captions, _ in loader) == len(expected)
        copy = ImageTextPairDataset.from_webdataset(path, ID)
        check_record(copy, 8, expected[8])
        assert copy.reader.open_files() == [copy.tar_files[2]]
        del ds, loader, copy
        gc.collect()
    assert _resource_warnings(caught) == []


def test_close_and_with_close_the_tars_and_reading_opens_them_again(data):
    path, expected = data
    with ImageTextPairDataset.from_webdataset(path, ID) as ds:
        assert ds.reader.open_files() == []  # opened on first read
        check_record(ds, 0, expected[0])
        check_record(ds, 5, expected[5])
        assert ds.reader.open_files() == sorted(ds.tar_files[::2])
        tar = ds.tar_files[0]
        if os.path.isdir('/proc/self/fd'):
            assert descriptors_of(tar)
    assert ds.reader.open_files() == []
    if os.path.isdir('/proc/self/fd'):
        assert descriptors_of(tar) == []  # closed, not only forgotten
    check_record(ds, 1, expected[1])  # a closed dataset reads on: the file opens again
    assert ds.reader.open_files() == [tar]
    ds.close()
    ds.close()  # closing twice is harmless
    assert ds.reader.open_files() == []


def test_a_forked_child_drops_its_inherited_tars_without_a_resource_warning(data):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]  # the parent's file, inherited by the child
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report the ResourceWarnings and the files it holds open
        code = 1
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter('always')
                ds[1]
                gc.collect()
                held = ds.reader.open_files()
                ds.close()
                gc.collect()
            os.write(write, json.dumps([_resource_warnings(caught), held]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    answer = os.read(read, 4096)
    os.close(read)
    assert os.waitpid(pid, 0)[1] == 0
    assert json.loads(answer) == [[], [ds.tar_files[0]]]
    check_record(ds, 2, expected[2])  # the parent's file still reads


WORKERS_READ = '''
import gc, sys
import mxnet as mx
from gluonbatch.batchify import List, Tuple
from gluonbatch.curation import ImageTextPairDataset

for workers in (0, 1, 2):
    ds = ImageTextPairDataset.from_webdataset(sys.argv[1], 'key')
    ds[0]  # open in the parent before the workers fork
    loader = mx.gluon.data.DataLoader(ds, batch_size=2, num_workers=workers,
                                      batchify_fn=Tuple(List(), List(), List()))
    print(sum(len(captions) for _, captions, _ in loader))
    del ds, loader
    gc.collect()
'''


@pytest.mark.slow  # a fresh interpreter; the tests above check collection and forking
def test_no_resource_warning_under_w_always_with_worker_processes(data):
    path, expected = data
    run = subprocess.run([sys.executable, '-W', 'always', '-c', WORKERS_READ, path],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [str(len(expected))] * 3
    assert 'ResourceWarning' not in run.stderr, run.stderr


def test_tar_truncated_after_opening(data):
    """A tar cut short after its shard was first used (its records read) fails at the read."""
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds[0]  # the first use of shard 0
    cut(ds.tar_files[0], tar_infos(ds.tar_files[0])[4].offset_data)
    with pytest.raises(ValueError, match="truncated after the dataset was opened"):
        ds[1]
    ds[0]  # still there
    ds[3]  # another shard


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


PILLOW_FORMATS = {'jpg': 'JPEG', 'jpeg': 'JPEG', 'png': 'PNG', 'webp': 'WEBP'}


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_every_advertised_image_extension_decodes(tmp_path, index):
    """One record per IMAGE_EXTENSIONS entry (upper case for a second record), each image
    made by Pillow; lossless formats decode to exactly the pixels written."""
    assert set(IMAGE_EXTENSIONS) == set(PILLOW_FORMATS)
    records, pixels = [], {}
    for sample, ext in enumerate(list(IMAGE_EXTENSIONS) + ['WEBP']):
        rec = record(0, sample)
        height, width = rec['row']['height'], rec['row']['width']
        array = np.random.default_rng(sample).integers(0, 256, (height, width, 3), np.uint8)
        encoded = io.BytesIO()
        Image.fromarray(array).save(encoded, PILLOW_FORMATS[ext.lower()], lossless=True)
        rec = dict(rec, image=(ext, encoded.getvalue()))
        records.append(rec)
        pixels[rec['key']] = (ext.lower(), array, encoded.getvalue())
    write_tar(tmp_path / '00000.tar', [
        ('%s.%s' % (rec['key'], name), data) for rec in records
        for name, data in [rec['image'], ('txt', rec['txt']), ('json', rec['json'])]])
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(tmp_path / '00000.parquet')
    if index:
        write_index(tmp_path / '00000.tar')
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    for i, rec in enumerate(records):
        image, caption, _ = ds[i]
        ext, array, encoded = pixels[rec['key']]
        assert isinstance(image, mx.nd.NDArray) and image.dtype == np.uint8
        if ext in ('png', 'webp'):  # lossless
            np.testing.assert_array_equal(image.asnumpy(), array)
        else:
            np.testing.assert_array_equal(image.asnumpy(), mx.image.imdecode(encoded).asnumpy())
        assert caption == rec['txt'].decode()
    mx.npx.set_np()  # numpy mode: every format decodes to an mx.np.ndarray
    try:
        assert [type(ds[i][0]) for i in range(len(records))] == [mx.np.ndarray] * len(records)
    finally:
        mx.npx.reset_np()


def test_an_undecodable_webp_names_the_record(tmp_path):
    rec = record(0, 0)
    write_tar(tmp_path / '00000.tar', [(rec['key'] + '.webp', b'RIFF\x00\x00 not a webp'),
                                       (rec['key'] + '.txt', rec['txt']),
                                       (rec['key'] + '.json', rec['json'])])
    pd.DataFrame([rec['row']]).to_parquet(tmp_path / '00000.parquet')
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    with pytest.raises(ValueError, match=r"cannot decode the image of member 000000000\.webp of "
                                         r"record '000000000'"):
        ds[0]
