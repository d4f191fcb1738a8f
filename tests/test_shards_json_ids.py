"""Resharding's JSON id rewrite (:class:`JsonIds`): whatever the member's JSON looks like, the
result decodes to the source updated with the ids (in ``dict.update``'s key order), is the
bytes ``with_json_ids`` writes for JSON that ``json.dumps`` wrote, is written in place where
the id keeps its length, and never touches the other bytes of the buffer."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gluonbatch.shards.json_ids import JsonIds, with_json_ids
from gluonbatch.shards.tar import BLOCK
from helpers import examples

ID = 'key'
OLD = 'old_key'
#: Strings that are hard on a byte-level search: quotes, escapes, braces, brackets, the id
#: key's name in values and other keys, unicode, line breaks.
TRICKY = ['', 'key', '"key": "1"', 'a\\b', '{', '}', '[', ']', '{"key": "0"}', 'é', '日本',
          '\u2028', 'line\nbreak', 'tab\t', 'monkey', 'KEY', ' key', 'key ', ',', ':']
texts = st.one_of(st.sampled_from(TRICKY), st.text(max_size=12),
                  st.text('{}[]"\\:, keyé日', max_size=12))
keys = texts.filter(lambda key: key not in (ID, OLD))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                    st.floats(allow_nan=False, allow_infinity=False), texts)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(texts, inner, max_size=3)), max_leaves=8)
#: Old ids as member names allow them: no '.', '/', '\\' or whitespace.
old_ids = st.one_of(st.sampled_from(['000000001', '1', 'café', '日本語', 'a"b', 'ID{1}', '[x]',
                                     'key']),
                    st.text(st.characters(blacklist_categories=('Cs', 'Cc', 'Zs', 'Zl', 'Zp'),
                                          blacklist_characters='./\\\x85\xa0'),
                            min_size=1, max_size=12))
STYLES = ['ascii', 'utf8', 'compact', 'indent', 'newline']
#: Metadata as datasets usually have it: flat, strings without escapes (but a non-ASCII
#: letter, which ``ensure_ascii`` escapes).
plain_texts = st.text('abcXYZ019 _-é', max_size=10)
plain_scalars = st.one_of(st.none(), st.booleans(), st.integers(),
                          st.floats(allow_nan=False, allow_infinity=False), plain_texts)


def serialize(meta, style):
    if style == 'ascii':
        return json.dumps(meta).encode('utf-8')
    if style == 'compact':
        return json.dumps(meta, ensure_ascii=False, separators=(',', ':')).encode('utf-8')
    if style == 'indent':
        return json.dumps(meta, ensure_ascii=False, indent=1).encode('utf-8')
    text = json.dumps(meta, ensure_ascii=False)
    return (text + '\n' if style == 'newline' else text).encode('utf-8')


@st.composite
def members(draw):
    """A ``.json`` member: ``(source bytes, old id, new id, style, meta)``; ``meta`` is what
    was serialized (in ``style``, one of :data:`STYLES` or ``'escaped-first'``)."""
    if draw(st.booleans()):
        meta = draw(st.dictionaries(keys, values, max_size=5))
        old_id = draw(old_ids)
        state = draw(st.sampled_from(['old', 'old', 'absent', 'other', 'number', 'null',
                                      'list']))
    else:
        meta = draw(st.dictionaries(plain_texts, plain_scalars, max_size=6))
        old_id = draw(st.text('0123456789abc', min_size=1, max_size=12))
        state = draw(st.sampled_from(['old', 'old', 'old', 'absent']))
    if state != 'absent':
        value = {'old': old_id, 'other': old_id + 'x', 'number': 7, 'null': None,
                 'list': [old_id]}[state]
        items = list(meta.items())
        at = draw(st.integers(0, len(items)))
        meta = dict(items[:at] + [(ID, value)] + items[at:])
    padding = draw(st.sampled_from([0, 0, 0, 600, 5000]))  # several blocks, past 4096
    if padding:
        meta['padding'] = 'p' * padding
    # new ids as resharding writes them: digits, usually as long as the old id
    length = draw(st.one_of(st.just(len(old_id.encode('utf-8'))), st.integers(1, 14)))
    new_id = '%0*d' % (length, draw(st.integers(0, 10 ** length - 1)))
    style = draw(st.sampled_from(STYLES))
    source = serialize(meta, style)
    if meta and draw(st.integers(0, 4)) == 0:
        # the id key written twice, first with an escape: json.loads keeps the later value
        # (the other order: test_a_key_written_twice_decodes_as_updated)
        value = draw(st.sampled_from([old_id, old_id + 'x', 3]))
        source = b'{"\\u006bey": %s, %s' % (json.dumps(value).encode('utf-8'), source[1:])
        style = 'escaped-first'
    return source, old_id, new_id, style, meta


def in_place_certain(meta, style, old_id, new_id):
    """A flat object of plain strings (no quote, escape, brace, bracket or control
    character: nothing that could hide the id key or be taken for it), the id once with its
    old value, the new id as long: a member the bulk rewrite places whatever its form."""
    strings = [old_id] + [text for item in meta.items() for text in item
                          if isinstance(text, str)]
    return (meta.get(ID) == old_id and style in STYLES and style != 'newline'
            and len(new_id.encode('utf-8')) == len(old_id.encode('utf-8'))
            and len(serialize(meta, style)) <= 4096
            and not any(isinstance(value, (dict, list)) for value in meta.values())
            and not any(char in '"\\{}[]' or not char.isprintable() for text in strings
                        for char in text)
            and (style != 'ascii' or all(text.isascii() for text in strings))
            and old_id != ID and not any(text == ID for key, value in meta.items()
                                         if key != ID for text in (key, value)))


def block_layout(sources, seed):
    """The members in one buffer as a tar holds them: each after a block of other bytes
    (its header), at a block boundary, zero-padded to whole blocks; other members' bytes
    between them and after the last (8 blocks: as long as the longest member checked in
    bulk; a buffer ending with a JSON member: test_a_buffer_ending_with_a_short_member)."""
    rng = np.random.default_rng(seed)
    pieces, starts, at = [], [], 0
    for data in sources:
        header = rng.integers(0, 256, BLOCK, dtype=np.uint8)
        padded = -(-len(data) // BLOCK) * BLOCK
        pieces += [header, np.frombuffer(data.ljust(padded, b'\0'), np.uint8)]
        starts.append(at + BLOCK)
        at += BLOCK + padded
        if rng.random() < 0.5:  # another member of the record in between
            other = rng.integers(0, 256, BLOCK * int(rng.integers(1, 3)), dtype=np.uint8)
            pieces.append(other)
            at += len(other)
    pieces.append(rng.integers(0, 256, 8 * BLOCK, dtype=np.uint8))
    return np.concatenate(pieces), np.array(starts, np.int64)


def expected_meta(source, ids):
    expected = json.loads(source)
    expected.update(ids)
    return expected


def assert_id_only_changed(before, after, old_id, new_id):
    """``after`` is ``before`` with one occurrence of the old id's bytes replaced by the
    new id's, in place."""
    old, new = old_id.encode('utf-8'), new_id.encode('utf-8')
    assert len(old) == len(new) and len(before) == len(after)
    at = before.find(old)
    while at >= 0:
        if after == before[:at] + new + before[at + len(old):]:
            return
        at = before.find(old, at + 1)
    raise AssertionError('%r is not %r with %r for %r' % (after, before, new, old))


def check_member(source, result, member_after, old_id, new_id, style, old_id_col):
    """The checks of one member's rewrite; ``result`` is JsonIds' (None: in place),
    ``member_after`` the member's bytes in the buffer afterwards."""
    ids = {ID: new_id}
    if old_id_col:
        ids[old_id_col] = old_id
    written = member_after if result is None else result
    decoded = json.loads(written)
    expected = expected_meta(source, ids)
    assert decoded == expected and list(decoded) == list(expected)
    if style == 'utf8':  # JSON json.dumps wrote: the bytes with_json_ids writes
        assert written == with_json_ids(source, ids, 'the record')
    if result is None:
        assert old_id_col is None
        if new_id != old_id:
            assert_id_only_changed(source, member_after, old_id, new_id)
    else:
        assert member_after == source  # new bytes returned: the buffer keeps the old ones
    if old_id_col:
        assert result.endswith(b', "%s": %s}' % (old_id_col.encode(), json.dumps(
            old_id, ensure_ascii=False).encode('utf-8')))


@settings(max_examples=examples(200), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(members(), min_size=1, max_size=5),
       old_id_col=st.sampled_from([None, OLD]), seed=st.integers(0, 2 ** 16))
@example(batch=[(b'{"key": "000000001", "w": 3}', '000000001', '000000042', 'utf8',
                 {ID: '000000001', 'w': 3})], old_id_col=None, seed=0)
@example(batch=[(b'{"w":"key","key":"1"}', '1', '2', 'compact', {'w': 'key', ID: '1'})],
         old_id_col=None, seed=0)
@example(batch=[(b'{\n "key": "a\\"b"\n}', 'a"b', '123', 'indent', {ID: 'a"b'}),
                (b'{"key": "caf\\u00e9"}', 'café', '00000', 'ascii', {ID: 'café'})],
         old_id_col=OLD, seed=1)
def test_rewritten_json_is_the_source_updated_with_the_ids(batch, old_id_col, seed):
    sources = [source for source, *_ in batch]
    buffer, starts = block_layout(sources, seed)
    before = buffer.copy()
    sizes = np.array([len(source) for source in sources], np.int64)
    old = [old_id for _, old_id, *_ in batch]
    new = [new_id for _, _, new_id, *_ in batch]
    results = JsonIds(ID, old_id_col)(buffer, starts, sizes, new, old,
                                      lambda n: 'record %d' % n)
    assert len(results) == len(batch)
    outside = np.ones(len(buffer), bool)
    for (source, old_id, new_id, style, meta), start, result in zip(batch, starts, results):
        member_after = buffer[start:start + len(source)].tobytes()
        check_member(source, result, member_after, old_id, new_id, style, old_id_col)
        outside[start:start + len(source)] = False
        if old_id_col is None and in_place_certain(meta, style, old_id, new_id):
            # alone in its blocks, as a tar holds it: rewritten in place
            alone = np.frombuffer(source.ljust(-(-len(source) // BLOCK) * BLOCK, b'\0'),
                                  np.uint8).copy()
            assert JsonIds(ID)(alone, [0], [len(source)], [new_id], [old_id], str) == [None]
            check_member(source, None, alone[:len(source)].tobytes(), old_id, new_id, style,
                         None)
            assert not alone[len(source):].any()
    # headers, padding and the other members: not one byte changed
    np.testing.assert_array_equal(buffer[outside], before[outside])


@pytest.mark.parametrize('data, error', [
    (b'[1, 2]', 'holds a list, not an object'),
    (b'"000000001"', 'holds a str, not an object'),
    (b'12', 'holds an int, not an object'),
    (b'null', 'holds a NoneType, not an object'),
    (b'{"key": "000000001"', 'is not valid JSON'),
    (b'{"key": "000000001", [}', 'is not valid JSON'),
    (b'{"key": "000000001"} {}', 'is not valid JSON'),
    (b'{"key": 000000001}', 'is not valid JSON'),
    (b'', 'is not valid JSON'),
    (b'\xff{"key": "000000001"}', 'is not valid JSON'),
    (b'not json', 'is not valid JSON')])
@pytest.mark.parametrize('old_id_col', [None, OLD])
def test_a_member_that_is_not_a_json_object_is_refused_naming_its_record(data, error,
                                                                         old_id_col):
    """In a batch, after a valid member: the error names the record of the bad one. (A
    member the bulk check places, a flat object with the old id, is not otherwise
    validated: only its id's bytes change.)"""
    good = b'{"key": "000000000"}'
    buffer, starts = block_layout([good, data], 3)
    before = buffer.copy()
    names = ['record %r of shard.tar' % key for key in ('000000000', '000000001')]
    with pytest.raises(ValueError, match=r'^the \.json member of %s %s'
                       % (names[1], error)):
        JsonIds(ID, old_id_col)(buffer, starts, [len(good), len(data)],
                                ['000000007', '000000008'], ['000000000', '000000001'],
                                names.__getitem__)
    # the batch is not written: the valid member may have been rewritten, nothing else
    changed = np.flatnonzero(buffer != before)
    assert ((changed >= starts[0]) & (changed < starts[0] + len(good))).all()


DUPLICATES = [
    (b'{"\\u006bey": "1", "key": "1"}', None),
    (b'{"key": "1", "key": "1"}', None),
    (b'{"key": "5", "\\u006bey": "1"}', None),
    (b'{"k\\u0065y": "9", "w": 2, "key": "1"}', None),
    (b'{"key": "1", "w": {"key": "1"}}', None),
    (b'{"key": "1", "\\u006bey": "1"}', 'the literal key comes first'),
    (b'{"key": "1", "w": 2, "k\\u0065y": "1"}', 'the literal key comes first'),
]


@pytest.mark.parametrize('old_id_col', [None, OLD])
@pytest.mark.parametrize('data', [data for data, _ in DUPLICATES])
def test_a_key_written_twice_decodes_as_updated(data, old_id_col):
    """Raw JSON with the id key written twice (escaped or not): json.loads keeps the last
    value at the first place, and so must the rewritten member."""
    buffer, starts = block_layout([data], 5)
    [result] = JsonIds(ID, old_id_col)(buffer, starts, [len(data)], ['2'], ['1'], str)
    written = buffer[starts[0]:starts[0] + len(data)].tobytes() if result is None else result
    ids = {ID: '2', OLD: '1'} if old_id_col else {ID: '2'}
    expected = expected_meta(data, ids)
    decoded = json.loads(written)
    assert decoded == expected and list(decoded) == list(expected)


@pytest.mark.parametrize('meta', [{ID: '1', OLD: 'x', 'w': 3}, {OLD: 'x', ID: '1'}])
def test_an_old_id_key_already_in_the_json_is_updated_not_repeated(meta):
    data = json.dumps(meta, ensure_ascii=False).encode('utf-8')
    buffer, starts = block_layout([data], 6)
    [result] = JsonIds(ID, OLD)(buffer, starts, [len(data)], ['2'], ['1'], str)
    assert result == with_json_ids(data, {ID: '2', OLD: '1'}, 'the record')


def test_a_buffer_ending_with_a_short_member():
    """As the copier's buffer ends: a member of two blocks, then one of one block, last."""
    long = json.dumps({ID: '1', 'text': 'x' * 700}).encode('utf-8')
    short = b'{"key": "2"}'
    buffer = np.zeros(4 * BLOCK, np.uint8)
    buffer[:len(long)] = np.frombuffer(long, np.uint8)
    buffer[3 * BLOCK:3 * BLOCK + len(short)] = np.frombuffer(short, np.uint8)
    results = JsonIds(ID)(buffer, [0, 3 * BLOCK], [len(long), len(short)], ['7', '8'],
                          ['1', '2'], str)
    assert results == [None, None]
    assert json.loads(buffer[:len(long)].tobytes())[ID] == '7'
    assert buffer[3 * BLOCK:3 * BLOCK + len(short)].tobytes() == b'{"key": "8"}'


def test_members_at_any_byte_position():
    """Members not on block boundaries (the copier's are; other callers' may not be): the
    same rewrite."""
    sources = [b'{"key": "01", "w": 1}', b'{"w": [1], "key": "02"}', b'{"key":"03"}']
    buffer = np.frombuffer(b'xx'.join(sources) + b'yy', np.uint8).copy()
    starts = np.cumsum([0] + [len(source) + 2 for source in sources[:-1]])
    results = JsonIds(ID)(buffer, starts, [len(s) for s in sources], ['11', '12', '13'],
                          ['01', '02', '03'], str)
    written = [buffer[start:start + len(source)].tobytes() if result is None else result
               for source, start, result in zip(sources, starts, results)]
    assert written == [with_json_ids(source, {ID: new}, 'r') if n != 2 else b'{"key":"13"}'
                       for n, (source, new) in enumerate(zip(sources, ['11', '12', '13']))]
    assert buffer.tobytes().count(b'xx') == 2 and buffer.tobytes().endswith(b'yy')


def test_bytes_after_a_short_member_are_not_its_own():
    """The bulk check reads each member as a row as wide as the longest one: a short
    member's row runs on into the block after it (a header). JSON-like bytes there (the
    key, braces, a bracket, a backslash, the old key) do not stop it from rewriting the
    member in place."""
    short = b'{"key": "2"}'
    long = json.dumps({ID: '1', 'text': 'x' * 700}).encode('utf-8')
    tail = np.frombuffer((b'"key": "2", "%s": {[\\ ' % OLD.encode() * 30)[:BLOCK], np.uint8)
    buffer = np.zeros(5 * BLOCK, np.uint8)
    buffer[:len(short)] = np.frombuffer(short, np.uint8)
    buffer[BLOCK:2 * BLOCK] = tail
    buffer[2 * BLOCK:2 * BLOCK + len(long)] = np.frombuffer(long, np.uint8)
    results = JsonIds(ID)(buffer, [0, 2 * BLOCK], [len(short), len(long)], ['7', '8'],
                          ['2', '1'], str)
    assert results == [None, None]  # both rewritten in place: found certain in bulk
    assert buffer[:len(short)].tobytes() == b'{"key": "7"}'
    assert buffer[BLOCK:2 * BLOCK].tobytes() == tail.tobytes()
