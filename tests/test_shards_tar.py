"""Tar members: scanning, names, member types, long names (pax and GNU), directory
entries, pax headers, members of 8 GiB or more, truncated and corrupt tars."""
import io
import os
import re
import shutil
import subprocess
import tarfile

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gluonbatch.cli import main as cli_main
from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards import write_index
from gluonbatch.shards.tar import check_headers, member_header, padded, scan_tar

from helpers import (ID, check_record, cut, examples, make_dataset, members_of,
                     read_everything, record, tar_infos, write_tar)


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


@pytest.mark.parametrize('where', ['mid-data', 'mid-header', 'at-member-end', 'empty'])
def test_truncated_tar(data, where):
    path, _ = data
    tar = os.path.join(path, '00001.tar')
    last = tar_infos(tar)[-1]
    size = {'mid-data': last.offset_data + last.size // 2, 'mid-header': last.offset + 100,
            'at-member-end': last.offset_data + -(-last.size // 512) * 512, 'empty': 0}[where]
    cut(tar, size)
    with pytest.raises(ValueError, match=r'%s (is truncated|is not a readable)' % tar):
        read_everything(path)


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
        read_everything(path)
    with pytest.raises(ValueError, match=tar):
        write_index(tar)


@pytest.mark.parametrize('name', ['../x.jpg', '../../etc/x.jpg', 'sub/000000000.jpg',
                                  'ABSOLUTE', 'a b.jpg', 'noextension', '.jpg',
                                  '..\\x.jpg'])
def test_member_names_with_path_components_never_touch_the_file_system(tmp_path, name):
    if name == 'ABSOLUTE':  # an absolute path of this test's own, watched like the rest
        name = str(tmp_path / 'abs.jpg')
    path = tmp_path / 'deep' / 'data'
    path.mkdir(parents=True)
    rec = record(0, 0)
    write_tar(path / '00000.tar', members_of([rec]) + [(name, b'payload')])
    pd.DataFrame([rec['row']]).to_parquet(path / '00000.parquet')
    before = sorted(str(p) for p in tmp_path.rglob('*'))
    with pytest.raises(ValueError, match=r'00000.tar: member name %s' % repr(name)
                       .replace('\\', '\\\\').replace('.', r'\.')):
        read_everything(path)
    with pytest.raises(ValueError, match='member name'):
        write_index(path / '00000.tar')
    assert sorted(str(p) for p in tmp_path.rglob('*')) == before
    assert not os.path.isabs(name) or not os.path.exists(name)


@pytest.mark.parametrize('raw', [b'000000000.caf\xe9.jpg', b'\xff\xfe.txt'])
def test_a_member_name_that_is_not_utf8_is_refused_naming_the_tar_and_member(tmp_path, raw,
                                                                           capsys):
    """Reading, indexing (function and command) and resharding refuse it alike, with a
    ValueError naming the tar and the member's bytes; nothing is written."""
    path = tmp_path / 'data'
    path.mkdir()
    rec = record(0, 0)
    with tarfile.open(path / '00000.tar', 'w', format=tarfile.GNU_FORMAT,
                      encoding='utf-8', errors='surrogateescape') as tar:
        for name, data in members_of([rec]) + [(raw.decode('utf-8', 'surrogateescape'),
                                                b'payload')]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    pd.DataFrame([rec['row']]).to_parquet(path / '00000.parquet')
    message = r'00000\.tar: member name %s is not UTF-8' % re.escape(repr(raw))
    before = sorted(os.listdir(path))
    with pytest.raises(ValueError, match=message):
        read_everything(path)
    with pytest.raises(ValueError, match=message):
        write_index(path / '00000.tar')
    assert cli_main(['wds', 'index', str(path / '00000.tar')]) == 1
    assert re.search('gluonbatch wds index: error: .*' + message, capsys.readouterr().err)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    with pytest.raises(ValueError, match=message):
        ds.to_webdataset(tmp_path / 'out', None)
    assert sorted(os.listdir(path)) == before and not os.path.exists(tmp_path / 'out')


def test_non_regular_members_are_refused(tmp_path):
    rec = record(0, 0)
    write_tar(tmp_path / '00000.tar', members_of([rec]))
    with tarfile.open(tmp_path / '00000.tar', 'a') as tar:
        link = tarfile.TarInfo('000000000.lnk')
        link.type, link.linkname = tarfile.SYMTYPE, '/etc/passwd'
        tar.addfile(link)
    pd.DataFrame([rec['row']]).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"member '000000000.lnk' is not a regular file"):
        read_everything(tmp_path)


def long_key(sample, length=146):
    """An id that makes member names of ``length + 4`` bytes (150 for ``.jpg``)."""
    return ('%05d' % sample).rjust(length, 'k')


def shard_from(directory, records, tar_members, fmt=tarfile.PAX_FORMAT, mtime=1700000000,
               index=False):
    """``00000.tar`` of ``tar_members`` and ``00000.parquet`` of ``records``' rows."""
    write_tar(os.path.join(directory, '00000.tar'), tar_members, fmt=fmt, mtime=mtime)
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(
        os.path.join(directory, '00000.parquet'))
    if index:
        write_index(os.path.join(directory, '00000.tar'))


def check_shard(directory, records):
    """Both readers (with and without the .idx) give every record, member bytes equal."""
    expected = sorted(records, key=lambda rec: rec['key'])
    for use_index in (True, False):
        ds = ImageTextPairDataset.from_webdataset(directory, ID, use_index=use_index)
        assert ds.metadata[ID].compute().tolist() == [rec['key'] for rec in expected]
        for i, rec in enumerate(expected):
            check_record(ds, i, rec)
            assert ds.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}


def index_entries(idx_path):
    """``{member name: (data offset, size)}`` of an .idx file."""
    tokens = [line.split() for line in open(idx_path, encoding='utf-8').read().splitlines()[1:]]
    return {name: (int(offset), int(size)) for line in tokens
            for _, offset, size, name in zip(*[iter(line)] * 4)}


def tar_entries(tar_path):
    """``{member name: (data offset, size)}`` of the regular members, by tarfile."""
    return {info.name: (info.offset_data, info.size) for info in tar_infos(tar_path)
            if info.isreg()}


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
@pytest.mark.parametrize('fmt', [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=['pax', 'gnu'])
def test_member_names_of_150_bytes(tmp_path, fmt, index):
    records = [record(0, k, key=long_key(k) if k % 2 else None) for k in range(4)]
    shard_from(str(tmp_path), records, members_of(records), fmt=fmt, index=index)
    tar = str(tmp_path / '00000.tar')
    assert {len(name.encode()) for name in tar_entries(tar)} >= {150, 151}
    check_shard(str(tmp_path), records)
    write_index(tar)
    assert index_entries(str(tmp_path / '00000.idx')) == tar_entries(tar)
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    ds.to_webdataset(tmp_path / 'out', None)
    copy = ImageTextPairDataset.from_webdataset(tmp_path / 'out', ID)
    new_ids = copy.metadata[ID].compute().tolist()
    for i in range(4):
        ours, theirs = copy.read_raw(i), ds.read_raw(i)
        del ours['json']  # it carries the new id:
        assert copy[i][2] == dict(ds[i][2], **{ID: new_ids[i]})
        assert ours == {ext: data for ext, data in theirs.items() if ext != 'json'}


@pytest.mark.parametrize('fmt', [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=['pax', 'gnu'])
def test_a_stale_index_of_long_names_is_found(tmp_path, fmt):
    """The full name of a long-named member is checked, not the 100 bytes of its header."""
    records = [record(0, k, key=long_key(k)) for k in range(4)]
    shard_from(str(tmp_path), records, members_of(records), fmt=fmt, index=True)
    idx = tmp_path / '00000.idx'
    lines = idx.read_text().splitlines()
    first, second = lines[2].split(), lines[3].split()  # records 1 and 2: not read at first use
    for k in (1, 2, 5, 6, 9, 10):  # swap offsets and sizes, keep the names
        first[k], second[k] = second[k], first[k]
    lines[2:4] = ' '.join(first), ' '.join(second)
    idx.write_text('\n'.join(lines) + '\n')
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    with pytest.raises(ValueError, match=r"expected member %s\.jpg .* found the header of '%s"
                                         r"\.jpg'; its index" % (long_key(1), long_key(2))):
        ds[1]


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_directory_entries_are_skipped(tmp_path, index):
    records = [record(0, k) for k in range(3)]
    members = members_of(records)
    members = ([('images', None), ('sub/', None)] + members[:4] + [('../odd dir', None)]
               + members[4:] + [('last', None)])
    shard_from(str(tmp_path), records, members, index=index)
    tar = str(tmp_path / '00000.tar')
    assert sum(info.isdir() for info in tar_infos(tar)) == 4
    check_shard(str(tmp_path), records)
    write_index(tar)
    assert index_entries(str(tmp_path / '00000.idx')) == tar_entries(tar)


def test_a_tar_of_directories_only_has_no_records(tmp_path):
    write_tar(tmp_path / '00000.tar', [('images', None)])
    pd.DataFrame({ID: pd.Series([], dtype=object)}).to_parquet(tmp_path / '00000.parquet')
    assert len(ImageTextPairDataset.from_webdataset(tmp_path, ID)) == 0
    with pytest.raises(ValueError, match='%s holds no records' % (tmp_path / '00000.tar')):
        write_index(tmp_path / '00000.tar')
    assert not (tmp_path / '00000.idx').exists()


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_pax_headers_on_every_member(tmp_path, index):
    """The webdataset library's TarWriter writes a float mtime: a pax header per member."""
    records = [record(0, k) for k in range(3)] + [record(0, 3, key='café-000003')]
    shard_from(str(tmp_path), records, members_of(records), mtime=1700000000.25, index=index)
    tar = str(tmp_path / '00000.tar')
    infos = tar_infos(tar)
    assert all(info.pax_headers.get('mtime') == '1700000000.25' for info in infos)
    assert all(info.offset_data - info.offset == 3 * 512 for info in infos)
    check_shard(str(tmp_path), records)
    write_index(tar)
    assert index_entries(str(tmp_path / '00000.idx')) == tar_entries(tar)


def write_raw_member(handle, name, data, fmt, size=None):
    """Append a member's headers (``TarInfo.tobuf``), data and padding; ``data`` None
    leaves a hole of ``size`` bytes (no disk blocks). Returns (headers start, data start)."""
    info = tarfile.TarInfo(name)
    info.size = len(data) if data is not None else size
    start = handle.tell()
    handle.write(info.tobuf(fmt))
    data_at = handle.tell()
    if data is None:
        handle.truncate(data_at + padded(size))
        handle.seek(data_at + padded(size))
    else:
        handle.write(data + bytes(padded(len(data)) - len(data)))
    return start, data_at


@pytest.mark.parametrize('fmt', [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=['pax', 'gnu'])
def test_a_member_of_8_gib_or_more(tmp_path, fmt):
    """A sparse tar with a 2**33 + 5 byte member (a pax size record, or a GNU base-256
    size field): scanned, indexed and its headers checked; its record is not read."""
    big = 2 ** 33 + 5
    records = [record(0, k) for k in range(3)]
    name = records[1]['key'] + '.bin'
    tar = str(tmp_path / '00000.tar')
    with open(tar, 'wb') as handle:
        for member, data in members_of(records[:2]):
            write_raw_member(handle, member, data, fmt)
        big_at, data_at = write_raw_member(handle, name, None, fmt, size=big)
        for member, data in members_of(records[2:]):
            write_raw_member(handle, member, data, fmt)
        handle.write(bytes(2 * 512))
    if os.stat(tar).st_blocks * 512 > 1 << 30:
        os.remove(tar)
        pytest.skip('the file system does not keep sparse files')
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(tmp_path / '00000.parquet')
    assert scan_tar(tar)[6] == (name, data_at, big)
    write_index(tar)
    assert index_entries(str(tmp_path / '00000.idx'))[name] == (data_at, big)
    for use_index in (True, False):
        ds = ImageTextPairDataset.from_webdataset(tmp_path, ID, use_index=use_index)
        for i in (0, 2):
            check_record(ds, i, records[i])
    with open(tar, 'rb') as handle:
        headers = os.pread(handle.fileno(), data_at - big_at, big_at)
    assert check_headers(headers, big_at, [(name, data_at, big)]) is None
    assert check_headers(headers, big_at, [(name, data_at, big - 1)]) == (
        name, data_at, big - 1, 'its tar header says %d bytes' % big)


plain_names = st.text(st.characters(blacklist_categories=('Cs', 'Cc', 'Zs', 'Zl', 'Zp'),
                                    blacklist_characters='./\\\x85\xa0'),
                      min_size=1, max_size=120)


@settings(max_examples=examples(60), deadline=None)
@given(key=plain_names, ext=plain_names, size=st.one_of(st.integers(0, 10 ** 6),
                                                      st.integers(8 ** 11 - 2, 2 ** 40)))
def test_member_header_round_trip(key, ext, size):
    """Headers written by member_header parse back (tarfile) to the same name and size."""
    name = '%s.%s' % (key, ext)
    header = member_header(name, size, 1700000000)
    assert len(header) % 512 == 0
    assert (len(header) == 512) == (len(name) <= 100 and name.isascii() and size < 8 ** 11)
    assert check_headers(header, 0, [(name, len(header), size)]) is None
    assert check_headers(header, 0, [(name + 'x', len(header), size)])[3] == (
        'found the header of %r' % name)
    info = tarfile.TarInfo.frombuf(header[-512:], 'utf-8', 'surrogateescape')
    assert info.isreg() and info.mode == 0o644


def _rewrite_header(tar_path, member_name, edit, fix_checksum):
    """Edit the ustar header of ``member_name`` in place (``edit(bytearray)``), optionally
    with a correct checksum, as a tar changed under an open dataset would be."""
    with tarfile.open(tar_path) as tar:
        offset = tar.getmember(member_name).offset
    with open(tar_path, 'r+b') as handle:
        handle.seek(offset)
        block = bytearray(handle.read(tarfile.BLOCKSIZE))
        edit(block)
        if fix_checksum:
            block[148:156] = b' ' * 8
            block[148:156] = b'%06o\0 ' % (sum(block) & 0o7777777)
        handle.seek(offset)
        handle.write(bytes(block))


HEADER_DAMAGE = {
    'checksum': (lambda block: block.__setitem__(slice(136, 137), b'7'), False),
    'type': (lambda block: block.__setitem__(slice(156, 157), b'2'), True),
    'name': (lambda block: block.__setitem__(slice(0, 1), b'9'), True),
    'size': (lambda block: block.__setitem__(slice(124, 136), b'%011o\0' % 1), True),
}


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
@pytest.mark.parametrize('damage', sorted(HEADER_DAMAGE))
def test_a_header_changed_after_open_is_refused(tmp_path, damage, index):
    """A member header changed after its shard was first used is refused at the read."""
    path = str(tmp_path / 'data')
    records = make_dataset(path, sizes=(3,), index=index)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    assert ds.record_id(0) == records[0]['key']  # the shard's first use: its records are read
    edit, fix_checksum = HEADER_DAMAGE[damage]
    _rewrite_header(os.path.join(path, '00000.tar'), '%s.txt' % records[1]['key'], edit,
                    fix_checksum)
    expected = r"00000.tar: expected member %s\.txt at byte" % records[1]['key']
    if index and damage == 'checksum':  # the tar stops reading there: the tar is at fault
        expected = (r"00000.tar is corrupt: no tar header at byte \d+, where its index "
                    r".*00000.idx puts the headers of member '%s\.txt'" % records[1]['key'])
    with pytest.raises(ValueError, match=expected):
        ds.read_raw(1)
    check_record(ds, 0, records[0])
    check_record(ds, 2, records[2])
