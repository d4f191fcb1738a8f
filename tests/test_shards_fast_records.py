"""A shard's record table read in bulk with numpy against the exact per-record reading:
the same attributes (dtypes too) for every valid shard, the same error type and message for
every bad one, and the exact reading's result where the bulk reading only declines."""
import os
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gluonbatch.shards import IMAGE_EXTENSIONS, write_index
from gluonbatch.shards.record_arrays import index_members
from gluonbatch.shards.records import ShardRecords, header_starts, record_spans, vectorized_fields
from gluonbatch.shards.files import Shard

from helpers import examples, write_tar

ARRAYS = ('ids', 'members', 'starts', 'spans', 'slots', 'verified')
#: Ids: digits and letters, a few characters beyond ASCII (UTF-8 in the tar and index).
ID_CHARACTERS = '0123456789abcdefXYZ_-\x7f\u00e9\u00fc\u5b57'
IMAGES = [ext for name in IMAGE_EXTENSIONS for ext in (name, name.upper(), name.title())]
EXTRAS = ['seg.png', 'cls', 'tar.gz', 'metadata.json', 'x', 'Cls2']


def write_shard(directory, members, ids, index=False, ids_as='string'):
    """``00000.tar`` of ``members`` (``[(name, bytes)]``), ``00000.parquet`` of ``ids`` and,
    with ``index``, ``00000.idx`` by :func:`write_index`; the shard, as the reader has it."""
    directory = str(directory)
    write_tar(os.path.join(directory, '00000.tar'), members)
    parquet = os.path.join(directory, '00000.parquet')
    if ids_as == 'pandas':
        pd.DataFrame({'key': ids}).to_parquet(parquet)
    else:
        pq.write_table(pa.table({'key': pa.array(ids, getattr(pa, ids_as)())}), parquet)
    if index:
        write_index(os.path.join(directory, '00000.tar'))
    shard = Shard(directory, '00000', index)
    shard.start, shard.stop = 0, len(ids)
    return shard


def assert_same_records(shard):
    """The shard reads alike both ways; returns whether the bulk reading read it."""
    vectorized = vectorized_fields(shard, 'key')[0] is not None
    ours, exact = ShardRecords(shard, 'key'), ShardRecords(shard, 'key', vectorized=False)
    for name in ARRAYS:
        mine, theirs = getattr(ours, name), getattr(exact, name)
        assert (mine.dtype, mine.shape) == (theirs.dtype, theirs.shape), name
        np.testing.assert_array_equal(mine, theirs, err_msg=name)
    assert ours.exts == exact.exts and ours.keys == exact.keys
    return vectorized


def error_of(read):
    with pytest.raises(Exception) as info:
        read()
    return type(info.value), str(info.value)


def assert_same_error(shard, message):
    """Both readings refuse the shard alike, with an error matching ``message``."""
    ours = error_of(lambda: ShardRecords(shard, 'key'))
    assert ours == error_of(lambda: ShardRecords(shard, 'key', vectorized=False))
    assert re.search(message, ours[1]), ours


@st.composite
def shards(draw):
    """``(members, ids, index, ids_as)`` of a valid shard: records of varied members in
    varied orders, or all alike; ids and members in any order, a record's members apart."""
    keys = draw(st.lists(st.text(ID_CHARACTERS, min_size=1, max_size=10)
                         | st.text('0123456789', min_size=100, max_size=110),
                         min_size=1, max_size=8, unique=True))
    alike = draw(st.booleans())
    records = []
    for key in keys:
        if not alike or not records:
            exts = [draw(st.sampled_from(IMAGES)), draw(st.sampled_from(['txt', 'TXT', 'Txt'])),
                    draw(st.sampled_from(['json', 'JSON']))]
            exts = draw(st.permutations(exts + draw(st.lists(st.sampled_from(EXTRAS),
                                                             unique=True, max_size=2))))
        records.append((key, exts))
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
    members = [('%s.%s' % (key, ext), bytes(rng.integers(0, 256, rng.integers(0, 1100),
                                                         dtype=np.uint8)))
               for number in draw(st.permutations(range(len(records))))
               for key, exts in [records[number]] for ext in exts]
    if draw(st.booleans()):  # some records' first member after all the others
        apart = {'%s.%s' % (key, exts[0])
                 for key, exts in draw(st.lists(st.sampled_from(records), max_size=3))}
        members = [member for member in members if member[0] not in apart] + \
            [member for member in members if member[0] in apart]
    ids = draw(st.permutations(keys))
    return members, ids, draw(st.booleans()), draw(st.sampled_from(['string', 'large_string',
                                                                     'pandas']))


@settings(max_examples=examples(35), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=shards())
@example(spec=([('b.jpg', b'x'), ('a.txt', b''), ('b.txt', b'y'), ('a.json', b'{}'),
                ('a.PNG', b'z' * 600), ('b.json', b'{}')], ['a', 'b'], True, 'string'))
@example(spec=([('%09d.%s' % (key, ext), b'x' * key) for key in range(40)
                for ext in ('jpg', 'txt', 'json')],
               ['%09d' % key for key in reversed(range(40))], True, 'pandas'))
def test_bulk_reading_matches_the_exact_one(tmp_path_factory, spec):
    members, ids, index, ids_as = spec
    shard = write_shard(tmp_path_factory.mktemp('shard'), members, ids, index, ids_as)
    assert assert_same_records(shard), 'a well-formed shard is read in bulk'


def test_an_empty_shard_reads_alike(tmp_path):
    shard = write_shard(tmp_path, [], [])
    assert_same_records(shard)
    assert len(ShardRecords(shard, 'key').ids) == 0


# ------------------------------------------------------------------- bad or unusual shards

KEYS = ['000000000', '000000001', '000000002']


def plain_shard(directory, index=True, ids=KEYS, members=None):
    if members is None:
        members = [('%s.%s' % (key, ext), ext.encode() * (3 + number))
                   for number, key in enumerate(KEYS) for ext in ('jpg', 'txt', 'json')]
    return write_shard(directory, members, ids, index)


def edit_index(shard, edit):
    """Rewrite the shard's index: ``edit`` maps its lines (without newlines) to new ones,
    or, given ``raw``, its bytes to new bytes."""
    with open(shard.idx, 'rb') as handle:
        data = handle.read()
    if getattr(edit, 'raw', False):
        data = edit(data)
    else:
        data = ('\n'.join(edit(data.decode('utf-8').splitlines())) + '\n').encode('utf-8')
    with open(shard.idx, 'wb') as handle:
        handle.write(data)


def raw(edit):
    edit.raw = True
    return edit


def in_line(number, old, new):
    """Replace ``old`` by ``new`` once in line ``number`` (the first line is 0)."""
    return lambda lines: lines[:number] + [lines[number].replace(old, new, 1)] + \
        lines[number + 1:]


def tokens_of(line):
    return line.split(' ')


BAD_INDEXES = {
    'version': (lambda lines: ['v1.1 3'] + lines[1:], r'first line must be "v1.2'),
    'empty-file': (raw(lambda data: b''), r'first line must be "v1.2 <number of samples>", '
                                          r"found ''"),
    'header-only': (raw(lambda data: data.splitlines(True)[0]),
                    r'first line says 3 samples but it lists 0'),
    'count-vs-lines': (in_line(0, '3', '4'), r'says 4 samples but it lists 3'),
    'count-vs-parquet': (lambda lines: ['v1.2 2'] + lines[1:3],
                         r'lists ids that .*00000.idx does not hold: .*the index .*is stale'),
    'tokens': (in_line(1, ' 000000000.jpg', ' 000000000.jpg x'), r'line 2: expected groups'),
    'slash': (in_line(1, ' 000000000.jpg', ' x/000000000.jpg'), r'path components'),
    'backslash': (in_line(2, ' 000000001.txt', ' 000000001\\x.txt'), r'path components'),
    'nul': (raw(lambda data: data.replace(b'000000001.txt', b'000000001\0.txt')),
            r'path components or whitespace'),
    'control-byte': (raw(lambda data: data.replace(b'000000001.txt', b'0000\x01001.txt')),
                     r'one sample have different ids'),
    'not-utf8': (raw(lambda data: data.replace(b'000000002.jpg', b'00000000\xff.jpg')),
                 r'is not a text index file'),
    'two-ids-on-a-line': (in_line(1, ' 000000000.txt', ' 000000009.txt'),
                          r'one sample have different ids'),
    'ext-mismatch': (in_line(1, 'jpg 512', 'png 512'),
                     r"extension 'png' does not match member '000000000.jpg'"),
    'no-dot': (in_line(3, ' 000000002.json', ' 000000002'), r'is not <id>\.<extension>'),
    'empty-id': (in_line(3, ' 000000002.json', ' .json'), r'is not <id>\.<extension>'),
    'two-dots-first': (in_line(3, ' 000000002.json', ' 00.0000002.json'),
                       r"extension 'json' does not match member '00\.0000002\.json'"),
    'offset-not-block': (in_line(1, ' 512 ', ' 100 '), r'data offset 100, which is not'),
    'offset-zero': (in_line(1, ' 512 ', ' 0 '), r'data offset 0, which is not'),
    'offset-not-a-number': (in_line(1, ' 512 ', ' x '), r'must be whole numbers'),
    'offset-negative': (in_line(1, ' 512 ', ' -512 '), r'must be whole numbers'),
    'offset-20-digits': (in_line(1, ' 512 ', ' 51200000000000000000 '), r'past the end'),
    'past-the-end': (lambda lines: lines[:3] + [' '.join(tokens_of(lines[3])[:-2] + [
        '99999', tokens_of(lines[3])[-1]])], r"member '000000002\.json' at bytes .* past the "
                                             r"end of the tar"),
    'line-twice': (lambda lines: lines[:2] + [lines[1]] + lines[3:],
                   r"line 3: record '000000000' is listed twice"),
    'case-clash': (lambda lines: lines[:1] + [lines[1] + ' TXT 512 3 000000000.TXT']
                   + lines[2:], r"line 2: member '000000000\.TXT' is listed twice"),
    'no-image': (lambda lines: lines[:1] + [' '.join(tokens_of(lines[1])[4:])] + lines[2:],
                 r"record '000000000' in .*00000\.idx has no image members"),
    'no-caption': (lambda lines: lines[:2] + [' '.join(tokens_of(lines[2])[:4]
                                                       + tokens_of(lines[2])[8:])] + lines[3:],
                   r"record '000000001' .* has no caption member"),
    'no-metadata': (lambda lines: lines[:3] + [' '.join(tokens_of(lines[3])[:8])],
                    r"record '000000002' .* has no metadata member"),
    'two-images': (lambda lines: lines[:1] + [lines[1] + ' webp 512 3 000000000.webp']
                   + lines[2:], r"has 2 image members \(\.jpg, \.txt, \.json, \.webp\)"),
    'another-id': (lambda lines: lines[:3] + [lines[3].replace('000000002', '000000009')],
                   r"00000\.parquet lists ids that .*00000\.idx does not hold: '000000002'"),
}


@pytest.mark.parametrize('name', sorted(BAD_INDEXES))
def test_bad_indexes_raise_the_exact_error(tmp_path, name):
    edit, message = BAD_INDEXES[name]
    shard = plain_shard(tmp_path)
    edit_index(shard, edit)
    assert vectorized_fields(shard, 'key')[0] is None
    assert_same_error(shard, message)


#: Unusual indexes the exact reading accepts, and whether the bulk reading reads them too
#: (where it declines, the records are the exact reading's).
UNUSUAL_INDEXES = {
    'crlf': (raw(lambda data: data.replace(b'\n', b'\r\n')), False),
    'tabs': (raw(lambda data: data.replace(b'jpg ', b'jpg\t')), False),
    'two-spaces': (raw(lambda data: data.replace(b' txt ', b'  txt ')), False),
    'edge-spaces': (lambda lines: lines[:1] + [' ' + line + ' ' for line in lines[1:]], False),
    'blank-lines': (lambda lines: lines[:2] + [''] + lines[2:] + ['', ''], False),
    'unicode-digits': (in_line(1, ' 512 ', ' \uff15\uff11\uff12 '), False),
    'unicode-space': (in_line(2, ' txt ', '\u3000txt\u2003'), False),
    'header-spaces': (in_line(0, ' ', '  '), False),
    'no-last-newline': (raw(lambda data: data[:-1]), True),
    'leading-zeros': (in_line(1, ' 512 ', ' 0000512 '), True),
}


@pytest.mark.parametrize('name', sorted(UNUSUAL_INDEXES))
def test_unusual_indexes_read_as_the_exact_reading_reads_them(tmp_path, name):
    edit, in_bulk = UNUSUAL_INDEXES[name]
    shard = plain_shard(tmp_path)
    edit_index(shard, edit)
    assert assert_same_records(shard) == in_bulk
    assert len(ShardRecords(shard, 'key').ids) == 3


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
def test_control_characters_in_names_read_as_the_exact_reading_reads_them(tmp_path, index):
    """Control characters other than whitespace are allowed in names; the bulk reading
    leaves them to the exact one."""
    keys = ['a\x01', 'b\x1b']
    shard = write_shard(tmp_path, [('%s.%s' % (key, ext), b'x') for key in keys
                                   for ext in ('jpg', 'txt', 'json')], keys, index)
    assert not assert_same_records(shard)
    assert ShardRecords(shard, 'key').ids.tolist() == keys


def test_ids_not_of_plain_strings_read_as_the_exact_reading_reads_them(tmp_path):
    """A categorical id column (a parquet dictionary) is read exactly: pandas orders it by
    its categories, not by the ids."""
    shard = plain_shard(tmp_path)
    pd.DataFrame({'key': pd.Categorical(KEYS[::-1], categories=KEYS[::-1])}).to_parquet(
        shard.parquet)
    assert not assert_same_records(shard)


BAD_IDS = {
    'twice': (KEYS[:2] + KEYS[:1], r"lists record ids more than once: '000000000'"),
    'int': (pa.array([0, 1, 2]), r"row 0: id 0 in column 'key' is not a str \(int64\)"),
    'null': ([None] + KEYS[1:], r"row 0: id None in column 'key' is not a str"),
    'nul': (['000000000\0'] + KEYS[1:], r"lists ids that .* does not hold: '000000000\\x00'"),
    'empty': ([''] + KEYS[1:], r"lists ids that .* does not hold: ''"),
    'other': (KEYS[:2] + ['00000000\u00e9'], r"lists ids that .* does not hold: '00000000"),
}


@pytest.mark.parametrize('index', [False, True], ids=['scanned', 'idx'])
@pytest.mark.parametrize('name', sorted(BAD_IDS))
def test_bad_ids_raise_the_exact_error(tmp_path, name, index):
    ids, message = BAD_IDS[name]
    shard = plain_shard(tmp_path, index)
    pq.write_table(pa.table({'key': ids}), shard.parquet)
    assert vectorized_fields(shard, 'key')[0] is None
    assert_same_error(shard, message)


@pytest.mark.parametrize('damage, message', [
    (lambda path: pd.DataFrame({'id': KEYS}).to_parquet(path), r"has no id column 'key'"),
    (lambda path: open(path, 'wb').write(b'not parquet'), r'is not a readable parquet file'),
    (lambda path: pd.DataFrame({'key': KEYS}).set_index('key').to_parquet(path), r"'key'"),
], ids=['no-id-column', 'not-parquet', 'ids-as-the-index'])
def test_unreadable_id_columns_raise_the_exact_error(tmp_path, damage, message):
    shard = plain_shard(tmp_path)
    damage(shard.parquet)
    assert_same_error(shard, message)


def members_without(ext, extra=()):
    return [('%s.%s' % (key, kind), b'data') for key in KEYS for kind in ('jpg', 'txt', 'json')
            if not (key == KEYS[1] and kind == ext)] + list(extra)


BAD_TARS = {
    'case-clash': (members_without(None, [(KEYS[2] + '.Json', b'{}')]),
                   r"holds member '000000002\.Json' twice \(record '000000002'\)"),
    'no-caption': (members_without('txt'), r"record '000000001' .*00000\.tar has no caption"),
    'no-image': (members_without('jpg'), r"record '000000001' .* has no image members"),
    'two-images': (members_without(None, [(KEYS[0] + '.jpeg', b'x')]), r'has 2 image members'),
    'extra-record': (members_without(None, [('000000009.jpg', b'x')]),
                     r"00000\.tar holds records missing from .*00000\.parquet: '000000009'"),
    'missing-record': ([member for member in members_without(None)
                        if not member[0].startswith(KEYS[2])],
                       r"00000\.parquet lists ids that .*00000\.tar does not hold: '000000002'"),
    'no-extension': (members_without(None, [('000000001', b'x')]), r'is not <id>\.<extension>'),
    'space-in-name': (members_without(None, [('000000001 .cls', b'x')]), r'whitespace'),
}


@pytest.mark.parametrize('name', sorted(BAD_TARS))
def test_bad_tars_raise_the_exact_error(tmp_path, name):
    members, message = BAD_TARS[name]
    shard = plain_shard(tmp_path, index=False, members=members)
    assert_same_error(shard, message)


# ------------------------------------------------------------------- the pieces

@settings(max_examples=examples(30), deadline=None)
@given(fields=st.lists(st.tuples(st.integers(1, 10 ** 10), st.integers(0, 10 ** 15),
                                 st.integers(0, 3)), min_size=1, max_size=20),
       bad=st.sampled_from([None, ' ', '+', '-', 'a', '/', '\u0661']))
def test_index_members_reads_numbers_of_any_width(fields, bad):
    """Offsets (data offsets: multiples of 512) and sizes of 1 to 16 digits, leading zeros
    included, read as ``int`` reads them; a token with any other character is declined."""
    lines = ['%s %s %s 0000.txt' % ('txt', '0' * zeros + str(block * 512), size)
             for block, size, zeros in fields]
    text = 'v1.2 %d\n%s\n' % (len(lines), '\n'.join(lines))
    members = index_members(text.encode('utf-8'), 10 ** 18)
    assert members.offsets.tolist() == [block * 512 for block, _, _ in fields]
    assert members.sizes.tolist() == [size for _, size, _ in fields]
    assert members.offsets.dtype == members.sizes.dtype == np.int64
    if bad is not None:
        broken = text.replace(' %d ' % fields[-1][1], ' %s%d ' % (bad, fields[-1][1]))
        assert index_members(broken.encode('utf-8'), 10 ** 18) is None


@settings(max_examples=examples(30), deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12), seed=st.integers(0, 99))
def test_record_spans_match_a_record_by_record_reckoning(sizes, seed):
    """Records of equal member counts (reduced column by column) or not (``reduceat``)."""
    for counts in (sizes, [sizes[0]] * len(sizes)):
        rng = np.random.default_rng(seed)
        total = sum(counts)
        offsets = (np.cumsum(rng.integers(1, 4, total)) * 512).astype(np.int64)
        offsets = offsets[rng.permutation(total)] if seed % 2 else offsets
        members = np.zeros((total, 4), np.int64)
        members[:, 0], members[:, 1] = offsets, rng.integers(0, 600, total)
        members[:, 3] = header_starts(members[:, 0], members[:, 1])
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        spans = record_spans(members, starts)
        for record in range(len(counts)):
            rows = members[starts[record]:starts[record + 1]]
            low = rows[:, 3].min()
            ends = rows[:, 0] + -(-rows[:, 1] // 512) * 512
            adjacent = ends.max() - low == (ends - rows[:, 3]).sum()
            expected = (rows[:, 0] + rows[:, 1]).max() - low if adjacent else -1
            assert spans[record].tolist() == [low, expected]
