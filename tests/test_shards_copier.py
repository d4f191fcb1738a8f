"""Resharding's block copier: ``to_webdataset`` writes the bytes ``tarfile`` writes for the
same records (headers from a ustar template, pax headers where a member needs them, JSON ids
rewritten), an ``.idx`` equal to ``write_index``'s, shards the ``webdataset`` library reads;
the source checks still raise; and the per-process record cache never returns a rewritten
shard's old records. The headers and index lines it builds: test_shards_block_formats."""
import io
import json
import os
import tarfile

import numpy as np
import pandas as pd
import pytest
import webdataset as wds
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gluonbatch.curation import ImageTextPairDataset
from gluonbatch.shards import write_index
from gluonbatch.shards.json_ids import JsonIds, with_json_ids
from gluonbatch.shards.reader import shard_records
from gluonbatch.shards.tar import BLOCK, split_member_name
from gluonbatch.shards.ustar import NAME_BYTES

from helpers import ID, cut, examples, record, tar_infos, visible, write_shard, write_tar

# --------------------------------------------------------------------------- source datasets

#: Record ids of several kinds: short and long digits (as long as the new ids, whose JSON id
#: is rewritten in place, or not), a name of exactly 100 bytes with its ``.json`` (a plain
#: ustar name), names past 100 bytes (pax), non-ASCII (pax), upper case.
ID_STYLES = {
    'short': lambda n: '%d' % n,
    'width-2': lambda n: '9%d' % n,
    'width-3': lambda n: '7%02d' % n,
    'width-4': lambda n: '6%03d' % n,
    'padded': lambda n: '%09d' % n,
    'fits-100': lambda n: ('f%03d' % n).ljust(NAME_BYTES - len('.json'), 'f'),
    'long': lambda n: 'L%03d' % n + 'l' * 120,
    'unicode': lambda n: 'café-日本-%d' % n,
    'upper': lambda n: 'ID%dX' % n,
}
#: Members other than the image, caption and metadata: multi-dot, upper-case, non-ASCII,
#: '%' and long extensions: with new ids of 3 or 4 digits, names of 99 to 101 bytes (past
#: 100 bytes, pax records).
EXTRA_EXTS = ['seg.png', 'SEG.NPY', 'Ünï', 'Ωmega', 'a%b', 'x' * 95, 'z' * 96, 'y' * 97, 'cls']
EDGE_SIZES = [0, 1, 511, 512, 513]
sizes = st.one_of(st.sampled_from(EDGE_SIZES), st.integers(0, 1500))


@st.composite
def source_records(draw, count):
    """``count`` records: ``(id, [(ext, size), ...], json_style, keep)``; the members of
    each record in the order they are written, the JSON member's bytes made later."""
    out = []
    for n in range(count):
        key = ID_STYLES[draw(st.sampled_from(sorted(ID_STYLES)))](n)
        image = draw(st.sampled_from(['jpg', 'JPG', 'png', 'jpeg', 'webp']))
        members = [(image, draw(sizes)), (draw(st.sampled_from(['txt', 'TXT'])), draw(sizes)),
                   (draw(st.sampled_from(['json', 'Json'])), None)]
        members += [(ext, draw(sizes)) for ext in draw(st.lists(
            st.sampled_from(EXTRA_EXTS), max_size=2, unique_by=str.lower))]
        members = draw(st.permutations(members))
        # the id in the JSON as the record has it, another value, or no id at all; JSON of
        # one block (longer ones: test_json_members_of_several_blocks)
        json_style = draw(st.sampled_from(['plain', 'plain', 'tricky', 'other', 'absent']))
        out.append((key, members, json_style, draw(st.booleans())))
    return out


def json_member(key, n, style):
    """A record's ``.json`` as ``json.dumps(..., ensure_ascii=False)`` writes it: flat and
    plain, with quotes, braces and escapes in a string, another id, no id, or long."""
    meta = {'url': 'http://x/%d.jpg' % n, ID: key, 'caption': 'un café %d' % n, 'width': n,
            'score': n / 7}
    if style == 'tricky':
        meta['caption'] = 'un café "%d" {[\\]}' % n
    elif style == 'other':
        meta[ID] = 'not-%s' % key
    elif style == 'absent':
        del meta[ID]
    elif style == 'long':  # more than one block
        meta['text'] = 'a long text %d ' % n * 60
    return json.dumps(meta, ensure_ascii=False).encode('utf-8')


def member_bytes(ext, size, n):
    rng = np.random.default_rng(n * 1000 + len(ext) + size)
    return rng.integers(0, 256, size, dtype=np.uint8).tobytes()


def write_source(directory, shards, rng, indexed):
    """Write shards of ``source_records`` with tarfile (records in shuffled order) and pandas;
    return the records in dataset order (by shard, then id) as
    ``(id, [(ext, bytes), ...], keep)``."""
    os.makedirs(directory)
    ordered = []
    number = 0
    for shard, (recs, index) in enumerate(zip(shards, indexed)):
        built = []
        for key, members, style, keep in recs:
            split_member_name('%s.%s' % (key, members[0][0]), 'the test')  # a valid name
            data = [(ext, json_member(key, number, style) if size is None
                     else member_bytes(ext, size, number)) for ext, size in members]
            built.append((key, data, keep))
            number += 1
        stem = os.path.join(directory, '%05d' % shard)
        shuffled = [built[i] for i in rng.permutation(len(built))]
        write_tar(stem + '.tar', [('%s.%s' % (key, ext), data) for key, data, _ in shuffled
                                  for ext, data in data])
        rows = [built[i] for i in rng.permutation(len(built))]
        pd.DataFrame({ID: [key for key, _, _ in rows], 'keep': [keep for _, _, keep in rows],
                      'length': [sum(len(d) for _, d in data) for _, data, _ in rows]}
                     ).to_parquet(stem + '.parquet', index=False)
        if index:
            write_index(stem + '.tar')
        ordered += sorted(built, key=lambda rec: rec[0])
    return ordered


def expected_shards(ordered, samples_per_shard, max_shards, old_id_col, filtered):
    """Per output shard, its records as ``(new id, [(name, bytes), ...])``."""
    kept = [rec for rec in ordered if rec[2] or not filtered]
    digits = len(str(samples_per_shard - 1)) if samples_per_shard > 1 else 0
    out = []
    for shard, first in enumerate(range(0, len(kept), samples_per_shard)):
        records = []
        for sample, (old_id, members, _) in enumerate(kept[first:first + samples_per_shard]):
            new_id = '%0*d' % (max_shards + digits, sample + 10 ** digits * shard)
            ids = {ID: new_id}
            if old_id_col:
                ids[old_id_col] = old_id
            records.append((new_id, [
                ('%s.%s' % (new_id, ext.lower()),
                 with_json_ids(data, ids, old_id) if ext.lower() == 'json' else data)
                for ext, data in members]))
        out.append(records)
    return out


def reference_tar(records, mtime):
    """The tar ``tarfile`` writes for ``records`` (``(id, [(name, bytes), ...])``)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode='w', format=tarfile.PAX_FORMAT,
                      encoding='utf-8') as tar:
        for _, members in records:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.mode = len(data), mtime, 0o644
                tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def check_with_webdataset(wds, paths, expected):
    """The ``webdataset`` library reads every record of the shards, with their bytes."""
    got = [{key: value for key, value in sample.items() if not key.startswith('__')}
           | {'__key__': sample['__key__']}
           for sample in wds.WebDataset(paths, shardshuffle=False, empty_check=False)]
    want = [{name.partition('.')[2]: data for name, data in members} | {'__key__': new_id}
            for records in expected for new_id, members in records]
    assert got == want


def check_resharded(written, expected, tmp_path):
    """Each written shard is, byte for byte, the tar tarfile writes; its index is
    ``write_index``'s."""
    assert len(written) == len(expected)
    with tarfile.open(written[0]) as tar:
        mtime = tar.next().mtime
    for path, records in zip(written, expected):
        with open(path, 'rb') as handle:
            produced = handle.read()
        want = reference_tar(records, mtime)
        if produced != want:  # say where
            first = next(i for i, (a, b) in enumerate(zip(produced, want)) if a != b) \
                if min(len(produced), len(want)) else 0
            raise AssertionError('%s differs from tarfile\'s tar (%d and %d bytes) first at '
                                 'byte %d' % (path, len(produced), len(want), first))
        reference_idx = str(tmp_path / ('ref-%s.idx' % os.path.basename(path)[:-4]))
        write_index(path, reference_idx)
        with open(path[:-4] + '.idx', encoding='utf-8') as ours, \
                open(reference_idx, encoding='utf-8') as theirs:
            assert ours.read() == theirs.read()


@st.composite
def source_datasets(draw):
    """``(shards, indexed)``: each shard's records (``source_records``) and whether it has
    an ``.idx``."""
    counts = draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))
    return ([draw(source_records(count)) for count in counts],
            draw(st.lists(st.booleans(), min_size=len(counts), max_size=len(counts))))


def every_kind():
    """Two shards (one indexed) holding every id style, extension, edge size and JSON form;
    with new ids of 3 digits (3 per shard, 2 digits of shard) records 0 and 5 have their JSON
    id rewritten in place, with 4 digits record 8."""
    kinds = [('width-3', 'plain'), ('long', 'tricky'), ('unicode', 'plain'),
             ('fits-100', 'other'), ('short', 'absent'), ('width-3', 'plain'),
             ('upper', 'tricky'), ('padded', 'plain'), ('width-4', 'plain'),
             ('width-2', 'plain')]
    records = []
    for n, (id_style, json_style) in enumerate(kinds):
        extras = [(EXTRA_EXTS[n % 9], EDGE_SIZES[n % 5]), (EXTRA_EXTS[(n + 3) % 9], 1 + n)]
        members = [('JPG' if n % 2 else 'jpg', EDGE_SIZES[(n + 1) % 5]),
                   ('TXT' if n % 3 else 'txt', EDGE_SIZES[(n + 2) % 5]),
                   ('JSON' if n == 3 else 'json', None)] + extras
        members = members[n % 5:] + members[:n % 5]  # the JSON not always third
        records.append((ID_STYLES[id_style](n), members, json_style, n != 4))
    return [records[:5], records[5:]], [True, False]


@settings(max_examples=examples(20), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=source_datasets(), samples_per_shard=st.integers(1, 5),
       max_shards=st.integers(2, 3), old_id_col=st.sampled_from([None, 'old_key']),
       filtered=st.booleans(), seed=st.integers(0, 2 ** 16))
@example(spec=every_kind(), samples_per_shard=3, max_shards=2, old_id_col=None,
         filtered=True, seed=1)
@example(spec=every_kind(), samples_per_shard=2, max_shards=3, old_id_col='old_key',
         filtered=False, seed=2)
def test_resharded_tars_are_the_bytes_tarfile_writes(tmp_path_factory, spec,
                                                     samples_per_shard, max_shards,
                                                     old_id_col, filtered, seed):
    """Records in shuffled order, of every name kind and edge size, from several shards (some
    with an index) into several: each output tar equals the one tarfile writes for the
    kept records renamed, extensions in lower case and the JSON ids set."""
    shards, indexed = spec
    tmp_path = tmp_path_factory.mktemp('copy')
    ordered = write_source(str(tmp_path / 'src'), shards, np.random.default_rng(seed), indexed)
    expected = expected_shards(ordered, samples_per_shard, max_shards, old_id_col, filtered)
    ds = ImageTextPairDataset.from_webdataset(tmp_path / 'src', ID)
    out = tmp_path / 'out'
    written = ds.to_webdataset(out, 'keep' if filtered else None,
                               samples_per_shard=samples_per_shard, max_shards=max_shards,
                               old_id_col=old_id_col)
    if not expected:
        assert written == [] and not out.exists()
        return
    check_resharded(written, expected, tmp_path)


@pytest.mark.parametrize('samples_per_shard, old_id_col', [(3, None), (2, 'old_key')])
def test_the_webdataset_library_reads_resharded_shards(tmp_path, samples_per_shard,
                                                       old_id_col):
    """Every record, its members' names (ids, lower-case extensions, pax records) and bytes,
    as the ``webdataset`` package reads them."""
    shards, indexed = every_kind()
    ordered = write_source(str(tmp_path / 'src'), shards, np.random.default_rng(3), indexed)
    expected = expected_shards(ordered, samples_per_shard, 3, old_id_col, True)
    ds = ImageTextPairDataset.from_webdataset(tmp_path / 'src', ID)
    written = ds.to_webdataset(tmp_path / 'out', 'keep', samples_per_shard=samples_per_shard,
                               max_shards=3, old_id_col=old_id_col)
    assert len(written) > 1
    check_resharded(written, expected, tmp_path)
    check_with_webdataset(wds, written, expected)


@pytest.mark.parametrize('samples_per_shard, max_shards, in_place', [
    (3, 2, 2), (2, 3, 1)])
def test_json_ids_rewritten_in_place_and_anew_give_tarfiles_bytes(
        tmp_path, monkeypatch, samples_per_shard, max_shards, in_place):
    """The copier's two ways of setting a JSON id (over the old one in its buffer, where the
    new id is as long; new bytes otherwise) both give tarfile's tar."""
    results = []
    rewrite = JsonIds.__call__

    def spy(self, *args):
        out = rewrite(self, *args)
        results.extend(out)
        return out

    monkeypatch.setattr(JsonIds, '__call__', spy)
    shards, indexed = every_kind()
    ordered = write_source(str(tmp_path / 'src'), shards, np.random.default_rng(4), indexed)
    ds = ImageTextPairDataset.from_webdataset(tmp_path / 'src', ID)
    written = ds.to_webdataset(tmp_path / 'out', 'keep', samples_per_shard=samples_per_shard,
                               max_shards=max_shards)
    check_resharded(written, expected_shards(ordered, samples_per_shard, max_shards, None,
                                             True), tmp_path)
    assert len(results) == 9 and sum(result is None for result in results) == in_place


class InOrder:
    """A stand-in for a numpy Generator that keeps every order."""

    @staticmethod
    def permutation(count):
        return np.arange(count)


@pytest.mark.parametrize('old_id_col', [None, 'old_key'])
def test_json_members_of_several_blocks(tmp_path, old_id_col):
    """A record whose JSON spans two blocks, then one whose one-block JSON ends the tar."""
    shards = [[('%09d' % n, [('jpg', 3), ('txt', 5), ('json', None)], style, True)
               for n, style in enumerate(['long', 'plain', 'plain', 'long', 'plain'])]]
    ordered = write_source(str(tmp_path / 'src'), shards, InOrder(), [True])
    assert len(ordered[0][1][2][1]) > BLOCK >= len(ordered[-1][1][2][1])
    ds = ImageTextPairDataset.from_webdataset(tmp_path / 'src', ID)
    written = ds.to_webdataset(tmp_path / 'out', None, samples_per_shard=3, max_shards=2,
                               old_id_col=old_id_col)
    check_resharded(written, expected_shards(ordered, 3, 2, old_id_col, False), tmp_path)


# --------------------------------------------------------------------------- source errors

def source_with(directory, records_per_shard=(3, 4), index=True, members=None):
    """Shards written by the test helpers; ``members(shard, records)`` may change a
    shard's tar members. Returns the records per shard."""
    os.makedirs(directory)
    shards = []
    for shard, count in enumerate(records_per_shard):
        records = [record(shard, k) for k in range(count)]
        write_shard(directory, '%05d' % shard, records, index=index)
        if members is not None:
            write_tar(os.path.join(directory, '%05d.tar' % shard), members(shard, records))
        shards.append(records)
    return shards


def assert_refused(ds, out, message):
    """``to_webdataset`` raises ``message`` and leaves no visible shard: the shards of the
    run that were complete are not renamed into place."""
    with pytest.raises(ValueError, match=message) as raised:
        ds.to_webdataset(out, None, samples_per_shard=2)
    assert not out.exists() or visible(out) == []
    return str(raised.value)


@pytest.mark.parametrize('index', [True, False], ids=['idx', 'scanned'])
def test_a_record_without_json_is_refused(tmp_path, index):
    def without_json(shard, records):
        return [('%s.%s' % (rec['key'], ext), rec[ext]) for rec in records
                for ext in ('jpg', 'txt', 'json')
                if not (shard == 1 and rec is records[2] and ext == 'json')]

    path = str(tmp_path / 'src')
    shards = source_with(path, members=without_json, index=False)
    if index:
        write_index(os.path.join(path, '00001.tar'))
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    where = '00001.idx' if index else '00001.tar'
    assert_refused(ds, tmp_path / 'out', r"record '%s' in .*%s has no metadata member "
                                         r"\(\.json\); it has \.jpg, \.txt"
                   % (shards[1][2]['key'], where))


def index_tokens(path):
    with open(path, encoding='utf-8') as handle:
        return [line.split() for line in handle.read().splitlines()]


def write_tokens(path, lines):
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(''.join(' '.join(tokens) + '\n' for tokens in lines))


def test_an_index_size_that_disagrees_with_the_tar_is_refused(tmp_path):
    """A middle record (not one the reader checks when it opens the shard): the copier's
    bulk header check finds it, and tarfile's says what is wrong."""
    path = str(tmp_path / 'src')
    shards = source_with(path)
    idx = os.path.join(path, '00001.idx')
    lines = index_tokens(idx)
    txt = lines[2].index('txt')  # record 1 of the shard, line 2 after the first
    size = int(lines[2][txt + 2])
    assert size % BLOCK != 1  # one byte less keeps the data in its blocks
    lines[2][txt + 2] = str(size - 1)
    write_tokens(idx, lines)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    tar = os.path.join(path, '00001.tar')
    assert_refused(ds, tmp_path / 'out',
                   r"%s: expected member %s\.txt at byte \d+ \(%d bytes\) but its tar header "
                   r"says %d bytes; its index %s does not match it"
                   % (tar, shards[1][1]['key'], size - 1, size, idx))


@pytest.mark.parametrize('change', ['a-middle-caption', 'other-records'])
def test_a_stale_index_is_refused(tmp_path, change):
    """The tar rewritten after its index was written, as many members: a middle record's
    caption one byte longer (the same blocks, so only its size is stale), or other
    records altogether."""
    path = str(tmp_path / 'src')
    shards = source_with(path)
    tar, idx = os.path.join(path, '00001.tar'), os.path.join(path, '00001.idx')
    records = shards[1]
    if change == 'a-middle-caption':
        records[2]['txt'] += b'!'
        assert len(records[2]['txt']) % BLOCK != 1
    else:
        records = [record(7, k) for k in range(len(records))]
    write_tar(tar, [('%s.%s' % (rec['key'], ext), rec[ext]) for rec in records
                    for ext in ('jpg', 'txt', 'json')])
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    message = assert_refused(ds, tmp_path / 'out', 'does not match')
    assert tar in message and idx in message


@pytest.mark.parametrize('index', [True, False], ids=['idx', 'scanned'])
def test_a_tar_truncated_after_the_dataset_was_opened_is_refused(tmp_path, index):
    path = str(tmp_path / 'src')
    shards = source_with(path, index=index)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    assert ds.read_raw(3) == {ext: shards[1][0][ext] for ext in ('jpg', 'txt', 'json')}
    ds.reader.shard_ids(ds.reader.shards[1])  # the shard's whole table read before the cut
    tar = os.path.join(path, '00001.tar')
    cut(tar, tar_infos(tar)[7].offset)  # in the third record of the shard
    assert_refused(ds, tmp_path / 'out', r'%s ends at byte \d+, before the records read from '
                                         r'it: the tar was truncated after the dataset was '
                                         r'opened' % tar)


def test_a_tar_truncated_after_reads_by_lookup_is_refused(tmp_path):
    """Read by lookup only, the shard's table is read by the resharding, after the cut: its
    index then lists members past the tar's end."""
    path = str(tmp_path / 'src')
    shards = source_with(path, index=True)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    assert ds.read_raw(3) == {ext: shards[1][0][ext] for ext in ('jpg', 'txt', 'json')}
    assert ds.reader.tables_read() == []
    tar = os.path.join(path, '00001.tar')
    cut(tar, tar_infos(tar)[7].offset)
    assert_refused(ds, tmp_path / 'out', r'00001\.tar is truncated: it has \d+ bytes but its '
                                         r'index .*00001\.idx lists members up to byte \d+; '
                                         r'restore or re-copy it')


# --------------------------------------------------------------------------- the record cache

@pytest.mark.parametrize('index', [True, False], ids=['idx', 'scanned'])
def test_a_shard_rewritten_in_place_is_read_anew(tmp_path, index):
    """The per-process cache of shards' records is keyed by the files' identity: a shard
    whose tar and parquet (and index) are rewritten at the same paths (the tar's inode and
    size unchanged: only the ids and bytes differ) is read again by a dataset opened
    afterwards."""
    path = str(tmp_path / 'src')
    os.makedirs(path)
    old = [record(0, k, key='a%03d' % k) for k in range(3)]
    new = [record(0, k, key='b%03d' % k) for k in range(3)]
    for rec in new:  # other bytes, of the same length
        rec['txt'] = rec['txt'].upper()
    write_shard(path, '00000', old, index=index)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    assert ds.read_raw(1)['txt'] == old[1]['txt']
    shard = ds.reader.shards[0]
    cached = shard_records(shard, ID)
    assert cached is ds.reader.records(shard)  # the cached object
    assert shard_records(shard, ID) is cached  # while the files stay the same
    tar = os.path.join(path, '00000.tar')
    before = os.stat(tar)
    write_shard(path, '00000', new, index=index)
    after = os.stat(tar)
    assert (before.st_ino, before.st_size) == (after.st_ino, after.st_size)  # rewritten
    again = ImageTextPairDataset.from_webdataset(path, ID)
    assert [again.record_id(i) for i in range(3)] == [rec['key'] for rec in new]
    assert again.read_raw(1) == {ext: new[1][ext] for ext in ('jpg', 'txt', 'json')}
    assert again[2][2] == json.loads(new[2]['json'])
    fresh = shard_records(again.reader.shards[0], ID)
    assert fresh is not cached and fresh is again.reader.records(again.reader.shards[0])
    assert fresh.ids.tolist() == [rec['key'] for rec in new]
    assert shard_records(shard, ID) is fresh  # the old Shard names the same files
    assert cached.ids.tolist() == [rec['key'] for rec in old]  # the old object is not changed
