"""Records read by lookup (a shard's ``.idx`` line found on its own, no whole table): the
same members as the table gives, for every valid shard; the table's error for every bad
one; the table read where a lookup is not certain or after enough reads; never stale bytes."""
import os
import re

import mxnet as mx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gluonbatch.curation import ImageTextPairDataset, make_example_dataset
from gluonbatch.shards import write_index
from gluonbatch.shards.reader import LOOKUPS_PER_SHARD, RecordReader

from helpers import examples, write_tar
from test_shards_fast_records import (BAD_INDEXES, UNUSUAL_INDEXES, edit_index, error_of,
                                          plain_shard, shards, write_shard)


def reads(reader, count):
    return [(reader.read_members(i), reader.describe(i)) for i in range(count)]


def table_reads(shard, count):
    """What a reader that reads the shard's whole table first returns."""
    reader = RecordReader([shard], 'key')
    reader.records(shard)
    return reads(reader, count)


def in_id_order(members, ids):
    """Whether the tar's records (and so the written index's lines) are in id order, each
    record's members together: the layout lookups serve."""
    keys = [name.split('.', 1)[0] for name, _ in members]
    runs = [key for number, key in enumerate(keys) if not number or keys[number - 1] != key]
    return runs == sorted(ids, key=str.encode)


@settings(max_examples=examples(30), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=shards(), sort=st.booleans())
def test_lookups_read_what_the_table_reads(tmp_path_factory, spec, sort):
    members, ids, _, ids_as = spec
    if sort:  # records in id order, as gluonbatch writes them
        members = sorted(members, key=lambda member: member[0].split('.', 1)[0].encode())
    shard = write_shard(tmp_path_factory.mktemp('shard'), members, ids, True, ids_as)
    reader = RecordReader([shard], 'key')
    assert reads(reader, len(ids)) == table_reads(shard, len(ids))
    if in_id_order(members, ids):
        assert reader.tables_read() == [], 'a shard in id order is served by lookup'


@pytest.mark.parametrize('name', sorted(BAD_INDEXES))
def test_bad_indexes_raise_the_table_error(tmp_path, name):
    edit, message = BAD_INDEXES[name]
    shard = plain_shard(tmp_path)
    edit_index(shard, edit)
    table = RecordReader([shard], 'key')
    expected = error_of(lambda: table.records(shard))
    assert re.search(message, expected[1]), expected
    reader = RecordReader([shard], 'key')
    assert error_of(lambda: reads(reader, 3)) == expected


@pytest.mark.parametrize('name', sorted(UNUSUAL_INDEXES))
def test_unusual_indexes_read_as_the_table_reads_them(tmp_path, name):
    edit, _ = UNUSUAL_INDEXES[name]
    shard = plain_shard(tmp_path)
    edit_index(shard, edit)
    assert reads(RecordReader([shard], 'key'), 3) == table_reads(shard, 3)


KEYS5 = ['%09d' % key for key in range(5)]


def five_records(directory):
    members = [('%s.%s' % (key, ext), ext.encode() * (3 + number))
               for number, key in enumerate(KEYS5) for ext in ('jpg', 'txt', 'json')]
    return members, write_shard(directory, members, KEYS5, index=True)


def test_a_record_missing_from_the_index_fails_when_read(tmp_path):
    """Checks across the shard are the table's: the records the index and parquet agree on
    read by lookup, and the one they disagree on raises the table's error."""
    members, shard = five_records(tmp_path)
    # still in id order: only the record that is not there is not found
    edit_index(shard, lambda lines: [line.replace(KEYS5[2], KEYS5[2] + 'a') for line in lines])
    reader = RecordReader([shard], 'key')
    assert reader.read_members(1) == [(name.split('.')[1], data) for name, data in members
                                      if name.startswith(KEYS5[1])]
    assert reader.tables_read() == []
    with pytest.raises(ValueError, match="lists ids that .* does not hold: '000000002'"):
        reader.read_members(2)


def test_an_index_out_of_id_order_reads_the_table(tmp_path):
    (tmp_path / 'sorted').mkdir()
    members, _ = five_records(tmp_path / 'sorted')
    backwards = [member for key in reversed(KEYS5) for member in members
                 if member[0].startswith(key)]
    (tmp_path / 'backwards').mkdir()
    shard = write_shard(tmp_path / 'backwards', backwards, KEYS5, index=True)
    reader = RecordReader([shard], 'key')
    assert reads(reader, 5) == table_reads(shard, 5)
    assert reader.tables_read() == [0]


def test_the_table_is_read_after_enough_lookups(tmp_path):
    path = make_example_dataset(str(tmp_path), num_shards=2,
                                samples_per_shard=LOOKUPS_PER_SHARD + 2, min_size=8,
                                max_size=8, index=True)
    ds = ImageTextPairDataset.from_webdataset(path, 'key')
    second = range(LOOKUPS_PER_SHARD + 2, len(ds))
    raw = []
    for count, i in enumerate(second):
        raw.append(ds.read_raw(i))
        assert ds.reader.tables_read() == ([] if count < LOOKUPS_PER_SHARD else [1])
    # a table read in this process serves every reader of the shard from their first read
    table = ImageTextPairDataset.from_webdataset(path, 'key')
    assert raw == [table.read_raw(i) for i in second]
    assert table.reader.tables_read() == [1]


def rewrite(directory, payload):
    """Shard ``00000`` of ``directory`` written again in place: the same ids, each member
    its extension in upper case, as many times as :func:`five_records` writes it, or
    ``payload`` times."""
    members = [('%s.%s' % (key, ext), ext.upper().encode() * (payload or 3 + number))
               for number, key in enumerate(KEYS5) for ext in ('jpg', 'txt', 'json')]
    write_tar(os.path.join(str(directory), '00000.tar'), members)
    write_index(os.path.join(str(directory), '00000.tar'))
    return members


@pytest.mark.parametrize('payload', [None, 600], ids=['same-layout', 'new-layout'])
def test_a_shard_rewritten_after_lookups_is_read_anew(tmp_path, payload):
    _, shard = five_records(tmp_path)
    reader = RecordReader([shard], 'key')
    before = reader.read_members(3)
    members = dict(rewrite(tmp_path, payload))
    after = reader.read_members(3)
    assert after != before
    assert after == [(ext, members['%s.%s' % (KEYS5[3], ext)]) for ext in ('jpg', 'txt', 'json')]


@pytest.mark.parametrize('extra', ['a-record-line', 'garbage', 'carriage-return'])
def test_an_index_with_more_lines_than_it_says_is_never_served(tmp_path, extra):
    """The table refuses an index whose lines outnumber its first line's count; lookups do
    not serve it either, whichever record is read."""
    shard = plain_shard(tmp_path)
    edit = {'a-record-line': lambda lines: lines + [lines[3].replace('000000002', '000000003')],
            'garbage': lambda lines: lines + ['x y z'],
            'carriage-return': lambda lines: lines[:2] + [lines[2] + '\rjpg 512 3 x.jpg']
            + lines[3:]}[extra]
    edit_index(shard, edit)
    expected = error_of(lambda: RecordReader([shard], 'key').records(shard))
    for row in range(3):
        reader = RecordReader([shard], 'key')
        assert error_of(lambda: reader.read_members(row)) == expected


@pytest.mark.parametrize('num_workers, thread_pool', [(0, False), (1, False), (2, False),
                                                      (2, True)],
                         ids=['main', '1proc', '2proc', '2threads'])
def test_a_dataloader_reads_every_record_by_lookup(tmp_path, num_workers, thread_pool):
    """Shuffled epochs over shards read by lookup, in the main process, worker processes
    (forked after the parent's first reads) and threads: every record, each once."""
    path = make_example_dataset(str(tmp_path), num_shards=3, samples_per_shard=7,
                                min_size=8, max_size=8, index=True)
    ds = ImageTextPairDataset.from_webdataset(path, 'key')
    expected = [ds[i][1] for i in range(len(ds))]  # captions: one per record
    assert ds.reader.tables_read() == []
    loader = mx.gluon.data.DataLoader(ds, batch_size=4, shuffle=True, last_batch='keep',
                                      batchify_fn=captions_and_ids, num_workers=num_workers,
                                      thread_pool=thread_pool, timeout=120)
    for _ in range(2):
        seen = {}
        for batch in loader:
            seen.update(batch)
        assert seen == {meta_id: caption for caption, meta_id in
                        zip(expected, [ds.record_id(i) for i in range(len(ds))])}
    table = ImageTextPairDataset.from_webdataset(path, 'key')
    for shard in table.reader.shards:
        table.reader.shard_ids(shard)
    assert [table[i][1] for i in range(len(table))] == expected


def captions_and_ids(samples):
    """A batch as ``[(json id, caption), ...]``: which record each sample is."""
    return [(meta['key'], caption) for _, caption, meta in samples]
