"""Tar members: scanning, names, member types, truncated and corrupt tars."""
import os
import shutil
import subprocess
import tarfile

import pandas as pd
import pytest

from gluonbatch.webdataset import ImageTextPairDataset, write_index

from wds_testdata import ID, check_record, cut, data, members_of, record, tar_infos, write_tar


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
        ImageTextPairDataset.from_webdataset(path, ID)


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
