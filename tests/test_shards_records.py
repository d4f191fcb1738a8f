"""The record table: parquet ids against tar records, members of a record, extensions,
empty shards."""
import json
import os
import tarfile

import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gluonbatch.cli import main as cli_main
from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards import write_index

from helpers import (ID, check_record, examples, files, make_dataset, members_of,
                     read_everything, record, write_shard, write_tar)


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_parquet_ids_missing_from_the_tar(tmp_path, index):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records[:2]))
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(tmp_path / '00000.parquet')
    if index:
        write_index(tmp_path / '00000.tar')
    # the parquet is named first, with the id, whether or not there is an index
    held_by = '00000.idx' if index else '00000.tar'
    with pytest.raises(ValueError, match=r"^\S*00000.parquet lists ids that \S*%s does not "
                                         r"hold: '000000002'" % held_by) as raised:
        read_everything(tmp_path)
    if index:  # and the tar and index are cleared
        assert 'the parquet is not the one written with them' in str(raised.value)


def test_tar_records_missing_from_the_parquet(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    pd.DataFrame([rec['row'] for rec in records[1:]]).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.tar holds records missing from .*00000.parquet"
                                         r": '000000000'"):
        read_everything(tmp_path)


def test_same_count_different_ids(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    rows = [rec['row'] for rec in records]
    rows[1] = dict(rows[1], key='000009999')
    pd.DataFrame(rows).to_parquet(tmp_path / '00000.parquet')
    write_index(tmp_path / '00000.tar')
    with pytest.raises(ValueError, match=r"00000.parquet lists ids that .*00000.idx does not "
                                         r"hold: '000009999'"):
        read_everything(tmp_path)


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
        read_everything(tmp_path)


def test_bad_id_columns(tmp_path):
    records = [record(0, k) for k in range(3)]
    write_tar(tmp_path / '00000.tar', members_of(records))
    frame = pd.DataFrame([rec['row'] for rec in records])
    frame.to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.parquet has no id column 'id'; its columns "
                                         r"are \['key'"):
        read_everything(tmp_path, 'id')
    with pytest.raises(TypeError, match='id_col must be a str'):
        ImageTextPairDataset.from_webdataset(tmp_path, 0)
    frame.assign(key=frame[ID].astype(int)).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(TypeError, match=r"00000.parquet row 0: id 0 in column 'key' is not a str "
                                        r"\(int64\); ids must be strings"):
        read_everything(tmp_path)
    frame.assign(key=[records[0]['key']] * 3).to_parquet(tmp_path / '00000.parquet')
    with pytest.raises(ValueError, match=r"00000.parquet lists record ids more than once: "
                                         r"'000000000'"):
        read_everything(tmp_path)
    open(tmp_path / '00000.parquet', 'wb').write(b'not parquet at all')
    with pytest.raises(ValueError, match='00000.parquet is not a readable parquet file'):
        read_everything(tmp_path)


def test_same_id_in_two_shards_is_not_checked(tmp_path):
    """Ids are not checked across shards (that would read every shard): the dataset opens
    and each record is read by its index, from its own shard."""
    recs = [record(0, 0), dict(record(1, 0, key='000000000'), txt=b'the other caption')]
    for stem, rec in zip(('00000', '00001'), recs):
        write_shard(str(tmp_path), stem, [rec])
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    assert len(ds) == 2
    assert ds.metadata[ID].compute().tolist() == ['000000000'] * 2
    assert ds.metadata['shard'].compute().tolist() == [0, 1]
    for i, rec in enumerate(recs):
        assert ds.record_id(i) == '000000000'
        check_record(ds, i, rec)
        assert ds.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_extensions_match_case_insensitively(tmp_path, index):
    """.JPG is .jpg (as in the webdataset library); read_raw gives lower-case keys."""
    records = [record(0, k) for k in range(3)]
    cases = [('JPG', 'TXT', 'JSON'), ('Jpg', 'Txt', 'Json'), ('jpg', 'txt', 'json')]
    members = [('%s.%s' % (rec['key'], ext), rec[ext.lower()])
               for rec, exts in zip(records, cases) for ext in exts]
    write_tar(tmp_path / '00000.tar', members)
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(tmp_path / '00000.parquet')
    if index:
        write_index(tmp_path / '00000.tar')
        assert 'JPG ' in (tmp_path / '00000.idx').read_text()  # names as in the tar
    ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
    for i, rec in enumerate(records):
        check_record(ds, i, rec)
        assert ds.read_raw(i) == {ext: rec[ext] for ext in ('jpg', 'txt', 'json')}
    ds.to_webdataset(tmp_path / 'out', None)
    assert sorted(tar_names(tmp_path / 'out' / '00000.tar'))[:3] == [
        '000000000.jpg', '000000000.json', '000000000.txt']


def test_extensions_differing_only_in_case_are_one_member_twice(tmp_path):
    rec = record(0, 0)
    write_tar(tmp_path / '00000.tar', members_of([rec]))
    pd.DataFrame([rec['row']]).to_parquet(tmp_path / '00000.parquet')
    idx = tmp_path / '00000.idx'
    write_index(tmp_path / '00000.tar')
    first = idx.read_text().splitlines()[1].split()
    idx.write_text('v1.2 1\n%s JPG %s %s %s.JPG\n' % (' '.join(first), first[1], first[2],
                                                       rec['key']))
    with pytest.raises(ValueError, match=r"00000.idx line 2: member '000000000\.JPG' is "
                                         r"listed twice"):
        read_everything(tmp_path)
    write_tar(tmp_path / '00000.tar', members_of([rec]) + [(rec['key'] + '.JPG', rec['jpg'])])
    for attempt in (lambda: write_index(tmp_path / '00000.tar'),
                    lambda: read_everything(tmp_path, use_index=False)):
        with pytest.raises(ValueError, match=r"holds member '000000000\.JPG' twice"):
            attempt()


def tar_names(path):
    with tarfile.open(path) as tar:
        return tar.getnames()


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(0, 3), min_size=2, max_size=5).filter(
    lambda sizes: any(sizes) and 0 in sizes), index=st.booleans())
@example(sizes=[2, 0, 3], index=False)  # between others: it starts where the next one does
@example(sizes=[0, 2], index=True)
@example(sizes=[3, 1, 0], index=True)
def test_empty_shards_anywhere_read_save_and_reshard(tmp_path_factory, sizes, index):
    """An empty shard (a tar without members, a parquet without rows) may stand anywhere,
    first and between others included: every record is read, saved and resharded."""
    path = str(tmp_path_factory.mktemp('data'))
    expected = make_dataset(path, sizes=sizes)
    if index:  # an empty tar has no index: DALI refuses one of no samples
        for stem, size in enumerate(sizes):
            if size:
                write_index(os.path.join(path, '%05d.tar' % stem))
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    assert len(ds) == len(expected) == sum(sizes)
    for i, rec in enumerate(expected):
        check_record(ds, i, rec)
    ds.metadata['keep'] = ds.metadata['score'] >= 0  # every record
    ds.save_metadata(columns=['keep'])
    out = str(tmp_path_factory.mktemp('out'))
    written = ds.to_webdataset(out, 'keep', samples_per_shard=2, old_id_col='old_key')
    new = ImageTextPairDataset.from_webdataset(out, ID)
    assert len(written) == -(-len(expected) // 2)
    assert new.metadata['old_key'].compute().tolist() == [rec['key'] for rec in expected]
    for i, rec in enumerate(expected):
        raw = new.read_raw(i)
        assert (raw['jpg'], raw['txt']) == (rec['jpg'], rec['txt'])
        assert json.loads(raw['json'])['old_key'] == rec['key']
    again = str(tmp_path_factory.mktemp('cli')) + '/out'
    assert cli_main(['wds', 'reshard', path, again, '--samples-per-shard', '2']) == 0
    assert files(again) == files(out)
