"""The .idx index: its format, and indexes that do not match their tar."""
import os
import re
import shutil
import tarfile

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards import write_index
from gluonbatch.shards.index import group_members, read_index

from helpers import (ID, check_record, edit_index, examples, files, make_dataset,
                     members_of, read_everything, record, tar_infos, write_tar)


def test_index_and_scan_give_the_same_dataset(tmp_path):
    path = str(tmp_path / 'data')
    make_dataset(path, sizes=(5, 1, 3), index=True)
    with_idx = ImageTextPairDataset.from_webdataset(path, ID)
    scanned = ImageTextPairDataset.from_webdataset(path, ID, use_index=False)
    tars = [os.path.join(path, '%05d.tar' % shard) for shard in range(3)]
    assert with_idx.tar_files == scanned.tar_files == tars
    pd.testing.assert_frame_equal(with_idx.metadata.compute(), scanned.metadata.compute())
    # each index lists every member of its tar where tarfile finds it, in tar order
    for tar in tars:
        infos = tar_infos(tar)
        assert read_index(tar[:-len('.tar')] + '.idx', tar, os.path.getsize(tar)) == \
            group_members([(i.name, i.offset_data, i.size) for i in infos], tar)
    # every record: the same members, bytes and member order either way
    for i in range(len(scanned)):
        assert list(with_idx.read_raw(i).items()) == list(scanned.read_raw(i).items())

    # The index of every shard is read (when its shard is first used), and ignored with
    # use_index=False: an index whose first member size is off by one is refused.
    for tar in tars:
        idx = tar[:-len('.tar')] + '.idx'
        good = open(idx).read()
        lines = good.splitlines()
        tokens = lines[1].split()
        tokens[2] = str(int(tokens[2]) + 1)
        open(idx, 'w').write('\n'.join(lines[:1] + [' '.join(tokens)] + lines[2:]) + '\n')
        with pytest.raises(ValueError, match=r'expected member %s .* its index %s does not '
                                             r'match it' % (tokens[3], re.escape(idx))):
            read_everything(path)
        ignored = ImageTextPairDataset.from_webdataset(path, ID, use_index=False)
        for i in range(len(scanned)):
            assert list(ignored.read_raw(i).items()) == list(scanned.read_raw(i).items())
        open(idx, 'w').write(good)


@settings(max_examples=examples(15), deadline=None)
@given(sizes=st.lists(st.integers(0, 4), min_size=1, max_size=4), seed=st.integers(0, 99))
def test_any_shard_sizes_read_alike_with_and_without_index(tmp_path_factory, sizes, seed):
    path = str(tmp_path_factory.mktemp('sizes'))
    expected = make_dataset(path, sizes=sizes, shuffle_seed=seed)
    scanned = ImageTextPairDataset.from_webdataset(path, ID)
    for tar, size in zip(scanned.tar_files, sizes):
        if size:
            write_index(tar)
        else:  # DALI refuses "v1.2 0"; the shard is read by scanning it
            with pytest.raises(ValueError, match='%s holds no records' % tar):
                write_index(tar)
    indexed = ImageTextPairDataset.from_webdataset(path, ID)
    assert len(scanned) == len(indexed) == sum(sizes)
    assert indexed.metadata[ID].compute().tolist() == [rec['key'] for rec in expected]
    pd.testing.assert_frame_equal(indexed.metadata.compute(), scanned.metadata.compute())
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
        read_everything(path)


def test_index_member_name_mismatch(tmp_path):
    """An index whose offsets point at other members: found at the shard's first use (its
    first and last records) or at the read."""
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

    edit_index(path, swap_records(2, 3))  # records 1 and 2: not checked at first use
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match=r"00000.tar: expected member 000000001.jpg .* found the "
                                         r"header of '000000002.jpg'; its index .*00000.idx "
                                         r"does not match it"):
        ds[1]
    ds[0]
    ds[3]  # the other records still read
    edit_index(path, swap_records(3, 2))  # undo
    edit_index(path, swap_records(1, 4))  # the first and last records: found at first use
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match='expected member 000000000.jpg'):
        ds[1]  # an intact record: the shard's first use checks records 0 and 3


def test_index_of_another_tar(tmp_path):
    path = str(tmp_path)
    make_dataset(path, sizes=(3, 3), index=True)
    shutil.copyfile(os.path.join(path, '00001.idx'), os.path.join(path, '00000.idx'))
    with pytest.raises(ValueError, match=r"00000.parquet lists ids that .*00000.idx does not "
                                         r"hold"):
        read_everything(path)


@pytest.mark.parametrize('edit, message', [
    (lambda lines: ['v1.2 4'] + lines[1:], r'first line says 4 samples but it lists 3'),
    (lambda lines: ['v1.2 2'] + lines[1:3], r' does not hold: .*the index .*is stale'),
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
        read_everything(path)
    assert len(read_everything(path, use_index=False)) == 3


def test_index_member_size_mismatch(tmp_path):
    path = str(tmp_path)
    make_dataset(path, sizes=(3,), index=True)
    edit_index(path, lambda lines: lines[:1] + [lines[1].replace(' 000000000.txt',
                                                                 '0 000000000.txt')]
               + lines[2:])
    with pytest.raises(ValueError, match='expected member 000000000.txt .* its tar header '
                                         'says'):
        read_everything(path)


def test_a_stale_index_error_names_the_member_its_offset_then_its_size(tmp_path):
    path = str(tmp_path / 'data')
    make_dataset(path, sizes=(2,), index=True)
    idx = os.path.join(path, '00000.idx')
    lines = open(idx).read().splitlines()
    tokens = lines[1].split()  # record 0: <ext> <offset> <size> <name> per member
    _, offset, size, name = tokens[:4]
    tokens[2] = str(int(size) + 1)
    lines[1] = ' '.join(tokens)
    open(idx, 'w').write('\n'.join(lines) + '\n')
    with pytest.raises(ValueError, match=r'expected member %s at byte %s \(%d bytes\)'
                                         % (re.escape(name), offset, int(size) + 1)):
        read_everything(path)
