"""The bulk formats resharding writes, against their one-at-a-time references: ustar
headers from a template (``HeaderBlocks``) byte-equal to ``tarfile``'s, the bulk header check
(``plain_headers_match``) confirming those and nothing else, index lines (``index_lines``)
equal to ``index_line`` per record, the digit rows both are made of (``digit_columns``),
and ``ranges_to_indices``."""
import io
import tarfile

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from gluonbatch.shards.index import digit_columns, index_line, index_lines
from gluonbatch.shards.tar import BLOCK, member_header
from gluonbatch.shards.ustar import (NAME_BYTES, HeaderBlocks, name_fields, plain_headers_match, ranges_to_indices)
from helpers import examples

MTIME = 1700000000

# --------------------------------------------------------------------------- ustar headers

def fields_of(names):
    """:func:`name_fields` rows of whole member names (``<key>.<ext>``)."""
    parts = [name.partition('.') for name in names]
    exts = sorted({ext for _, _, ext in parts})
    return name_fields([key.encode('utf-8') for key, _, _ in parts], np.arange(len(names)),
                       np.array([exts.index(ext) for _, _, ext in parts]), exts)


@pytest.mark.parametrize('size', [0, 1, 511, 512, 513, 8 ** 11 - 1])
def test_template_headers_equal_tarfile_up_to_8_gib(size):
    """The largest size of a plain ustar header (8**11 - 1) and names up to exactly 100
    bytes: the template's header is tarfile's, byte for byte."""
    names = ['0.jpg', '000001.seg.png', 'k' * 96 + '.txt', 'K' * 50 + '.' + 'e' * 49,
             '00001.a%b']
    assert len(names[2]) == len(names[3]) == NAME_BYTES
    rows = fields_of(names)
    assert rows[2].all() and rows[3].all()  # a 100-byte name fills the field, no NUL
    for mtime in (0, MTIME):
        blocks = HeaderBlocks(mtime).build(rows, np.full(len(names), size))
        assert blocks.shape == (len(names), BLOCK) and blocks.dtype == np.uint8
        for name, block in zip(names, blocks):
            assert block.tobytes() == member_header(name, size, mtime), name
        assert not HeaderBlocks(mtime).needs_pax(rows, np.full(len(names), size)).any()


@pytest.mark.parametrize('name, size', [
    ('000001.jpg', 8 ** 11), ('000001.jpg', 2 ** 40),
    ('k' * 97 + '.txt', 0), ('k' * 96 + '.json', 7),  # 101 bytes
    ('000001.ünï', 5), ('café.jpg', 5), ('日本.txt', 512)])
def test_members_that_need_pax_are_left_to_tarfile(name, size):
    """At 8 GiB, past 100 bytes or not ASCII: needs_pax says so, build refuses, and
    member_header (tarfile) writes pax records that give the name and size back."""
    rows = fields_of([name, '000002.jpg'])
    blocks = HeaderBlocks(MTIME)
    assert blocks.needs_pax(rows, np.array([size, 1])).tolist() == [True, False]
    with pytest.raises(ValueError, match='plain ustar headers only'):
        blocks.build(rows, np.array([size, 1]))
    header = member_header(name, size, MTIME)
    assert len(header) > BLOCK and len(header) % BLOCK == 0
    with tarfile.open(fileobj=io.BytesIO(header), mode='r:', encoding='utf-8') as tar:
        info = tar.next()
    assert (info.name, info.size, info.offset_data, info.mtime) == (name, size, len(header),
                                                                     MTIME)


def headers_match(blocks, names, sizes):
    """:func:`plain_headers_match` of header blocks (rows), laid in a buffer between other
    blocks, as the copier reads them from a tar."""
    blocks = np.asarray(blocks, np.uint8).reshape(-1, BLOCK)
    buffer = np.full((2 * len(blocks) + 1, BLOCK), ord('0'), np.uint8)  # not headers
    buffer[1::2] = blocks
    return plain_headers_match(buffer.ravel(), BLOCK * (1 + 2 * np.arange(len(blocks))),
                               names, sizes)


def test_plain_headers_match_tarfile_headers_and_nothing_else():
    names = ['0.jpg', '000001.seg.png', 'k' * 96 + '.txt', '00001.a%b', '7.cls']
    sizes = np.array([0, 1, 513, 8 ** 11 - 1, 512])
    rows = fields_of(names)
    for fmt in (tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT, tarfile.GNU_FORMAT):
        blocks = []
        for name, size in zip(names, sizes.tolist()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.uid, info.uname = size, 12345, 1000, 'someone'
            blocks.append(np.frombuffer(info.tobuf(fmt, 'utf-8'), np.uint8))
        blocks = np.stack(blocks)
        assert headers_match(blocks, rows, sizes).all(), fmt
        # positions in any order, a header checked twice
        order = np.array([4, 0, 0, 2, 1, 3])
        assert plain_headers_match(blocks.ravel(), order * BLOCK, rows[order],
                                   sizes[order]).all(), fmt
        assert not headers_match(blocks, rows, sizes + 1).any()
        assert not headers_match(blocks, rows[::-1], sizes[::-1])[[0, 1, 3, 4]].any()
        assert not headers_match(blocks, fields_of([n + 'x' for n in names]), sizes).any()
    # another type of entry of the same name and size: never a plain member
    for kind in (tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.DIRTYPE, tarfile.FIFOTYPE):
        info = tarfile.TarInfo(names[0])
        info.type, info.linkname = kind, 'target'
        block = np.frombuffer(info.tobuf(tarfile.PAX_FORMAT, 'utf-8'), np.uint8)
        assert not headers_match(block, rows[:1], sizes[:1]).any(), kind
    regular = np.frombuffer(member_header(names[0], 0, MTIME), np.uint8)
    assert headers_match(regular, rows[:1], [0]).all()
    for where, value in ((156, ord('5')), (156, ord('2')), (257, 0), (345, ord('p'))):
        edited = regular.copy()  # type (directory, symlink), no ustar magic, a name prefix
        edited[where] = value
        assert not headers_match(edited, rows[:1], [0]).any(), (where, value)
    # names that are not plain (name_fields rows of 0xff) match no header
    assert not headers_match(np.frombuffer(member_header('café.jpg', 0, 0)[-BLOCK:],
                                           np.uint8), fields_of(['café.jpg']), [0]).any()
    assert not headers_match(regular, rows[:1], [8 ** 11]).any()


# --------------------------------------------------------------------------- index lines

index_exts = st.text('abcZ%.é9', min_size=1, max_size=5)
offsets = st.integers(0, 2 ** 40)


@st.composite
def index_batches(draw):
    """``(keys, codes, exts, counts, offsets, sizes)`` for :func:`index_lines`: uniform
    records (one key width, the same member extensions) or mixed ones."""
    exts = draw(st.lists(index_exts, min_size=1, max_size=5, unique=True))
    count = draw(st.integers(0, 12))
    if draw(st.booleans()):  # uniform: what resharding writes
        width = draw(st.integers(1, 12))
        keys = ['%0*d' % (width, draw(st.integers(0, 10 ** width - 1))) for _ in range(count)]
        pattern = draw(st.lists(st.integers(0, len(exts) - 1), min_size=1, max_size=5))
        codes, counts = pattern * count, [len(pattern)] * count
    else:
        keys = draw(st.lists(st.text('0123456789aé日', min_size=1, max_size=12),
                             min_size=count, max_size=count))
        member_codes = draw(st.lists(st.lists(st.integers(0, len(exts) - 1), max_size=5),
                                     min_size=count, max_size=count))
        codes = [code for record_codes in member_codes for code in record_codes]
        counts = [len(record_codes) for record_codes in member_codes]
    total = len(codes)
    return (keys, np.array(codes, np.int64), exts, np.array(counts, np.int64),
            np.array(draw(st.lists(offsets, min_size=total, max_size=total)), np.int64),
            np.array(draw(st.lists(offsets, min_size=total, max_size=total)), np.int64))


@settings(max_examples=examples(200), deadline=None)
@given(batch=index_batches())
@example(batch=(['000', '001'], np.array([0, 1, 0, 1]), ['jpg', 'a%b'], np.array([2, 2]),
                np.array([0, 2 ** 40, 9, 10]), np.array([10 ** 12, 0, 99, 100])))
@example(batch=(['01', '2'], np.array([0, 0]), ['jpg'], np.array([1, 1]),
                np.array([512, 1024]), np.array([1, 1])))
def test_index_lines_equal_index_line_per_record(batch):
    keys, codes, exts, counts, member_offsets, member_sizes = batch
    ends = np.cumsum(counts).tolist()
    want = ''.join(index_line(key, [(exts[code], offset, size) for code, offset, size in zip(
        codes[end - n:end].tolist(), member_offsets[end - n:end].tolist(),
        member_sizes[end - n:end].tolist())]) + '\n'
                   for key, end, n in zip(keys, ends, counts.tolist()))
    assert index_lines(keys, codes, exts, counts, member_offsets, member_sizes) == want


@settings(max_examples=examples(200), deadline=None)
@given(ranges=st.lists(st.tuples(st.integers(0, 10 ** 6), st.one_of(st.just(0),
                                                                    st.integers(0, 20)))))
@example(ranges=[])
@example(ranges=[(5, 0), (7, 0)])
@example(ranges=[(5, 0), (3, 2), (9, 0), (0, 1), (3, 3)])
def test_ranges_to_indices_equal_concatenated_ranges(ranges):
    starts = np.array([start for start, _ in ranges], np.int64)
    counts = np.array([count for _, count in ranges], np.int64)
    want = [value for start, count in ranges for value in range(start, start + count)]
    got = ranges_to_indices(starts, counts)
    assert got.dtype == np.int64 and got.tolist() == want


# --------------------------------------------------------------------------- digit rows

def digits_by_formatting(value, base, width, zero_padded):
    """One row of :func:`digit_columns` by Python's formatting: the value's last ``width``
    digits, right-aligned, padded with zeros or NULs."""
    text = ''
    while True:
        value, digit = divmod(value, base)
        text = str(digit) + text
        if not value:
            break
    return text[-width:].rjust(width, '0' if zero_padded else '\0').encode('ascii')


@settings(max_examples=examples(300), deadline=None)
@given(values=st.lists(st.integers(0, 2 ** 62), max_size=20), base=st.integers(2, 10),
       width=st.none() | st.integers(1, 19), zero_padded=st.booleans())
@example(values=[0, 9, 10, 9999, 10000, 99999999, 10 ** 8, 10 ** 12 + 7], base=10,
         width=None, zero_padded=False)
@example(values=[0, 1, 10000, 123456789], base=10, width=5, zero_padded=False)
def test_digit_rows_are_the_values_formatted(values, base, width, zero_padded):
    """Every base, width (the last digits of longer values) and padding, decimal's groups of
    four included: each row is the value as Python formats it."""
    if width is not None and base ** (width - 1) >= 2 ** 63:
        width = 1
    rows = digit_columns(np.array(values, np.int64), base, width, zero_padded)
    if width is None:
        width = len(digits_by_formatting(max(values, default=0), base, 99, True).lstrip(b'0')
                    or b'0')
    assert rows.dtype == np.uint8 and rows.shape == (len(values), width)
    assert [row.tobytes() for row in rows] == [
        digits_by_formatting(value, base, width, zero_padded) for value in values]
