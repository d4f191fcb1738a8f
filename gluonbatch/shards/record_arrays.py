"""A shard's members as numpy arrays, read in bulk from its ``.idx`` or its scanned member
list (its ids: :func:`~gluonbatch.shards.parquet.parquet_id_rows`), and the byte
matrices they are made of; the vectorized counterpart of
:func:`~gluonbatch.shards.index.read_index` and
:func:`~gluonbatch.shards.index.group_members`.

Each reader here is conservative: it returns None, never raises, for anything not plainly
well formed (a control byte, a ``'/'`` anywhere, whitespace other than single spaces and
newlines, a blank line, a token not what its place needs, ...); the caller then reads the
shard with the exact per-record code, which says precisely what is wrong, or accepts the
unusual but valid input. What they do return is what the exact code returns, as arrays.
"""
import operator
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .index import INDEX_VERSION
from .tar import BLOCK

__all__ = ['MemberArrays', 'byte_matrix', 'bytes_rows', 'as_strings', 'unicode_rows',
           'index_members', 'scanned_members']

_HEADER = re.compile(re.escape(INDEX_VERSION.encode()) + rb' ([0-9]{1,18})')
#: Whitespace other than ``' '`` and ``'\n'``: where the exact reader splits tokens or
#: lines (``str.split``, ``str.splitlines``) on characters the vectorized one does not
#: (``re``'s ``\s`` is the set ``str.isspace`` accepts).
_OTHER_SPACE = re.compile(r'[^\S \n]')
_SPACE, _NEWLINE, _DOT = 32, 10, 46
_CHUNK = 1 << 18  # bytes of text scanned at a time

# Eight bytes read as one little-endian uint64: byte k of a token is bits 8k..8k+7.
_WORD = np.dtype('<u8')
#: Masks keeping a word's first k bytes (``_LEADING[k]``) or last k bytes (``_TRAILING``).
_LEADING = np.array([(1 << 8 * k) - 1 for k in range(9)], _WORD)
_TRAILING = np.array([((1 << 8 * k) - 1) << 8 * (8 - k) for k in range(9)], _WORD)
_ZEROS, _OVER_NINE, _TOP_BITS = (np.uint64(int(byte * 8, 16)) for byte in ('30', '76', '80'))
_PAIRS, _QUADS, _HALF = (np.uint64(mask) for mask in (0x00FF00FF00FF00FF,
                                                       0x0000FFFF0000FFFF, 0xFFFFFFFF))

class MemberArrays(NamedTuple):
    """A shard's members in record order: ``keys`` and ``exts`` are zero-padded uint8 rows
    (one per member: its id and its extension as named in the tar, UTF-8), ``offsets`` and
    ``sizes`` int64; record ``r`` is members ``record_starts[r]:record_starts[r + 1]``, in
    the order the exact reader lists them."""

    keys: np.ndarray
    exts: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    record_starts: np.ndarray


def byte_matrix(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Rows ``buf[starts[i]:ends[i]]`` of a uint8 array, zero-padded to the longest one.

    >>> byte_matrix(np.frombuffer(b'ab cde', np.uint8), np.array([0, 3]),
    ...             np.array([2, 6])).tolist()
    [[97, 98, 0], [99, 100, 101]]
    """
    lengths = ends - starts
    if not len(lengths):
        return np.zeros((0, 1), np.uint8)
    width = max(int(lengths.max()), 1)
    total = int(lengths.sum())
    if width > 64 and total * 2 < len(lengths) * width:
        # a few long rows: place each byte, never the rectangle's padding
        matrix = np.zeros((len(lengths), width), np.uint8)
        row_starts = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        flat = np.arange(total) + row_starts  # each byte's position in buf
        matrix[np.repeat(np.arange(len(lengths)), lengths),
               flat - np.repeat(starts, lengths)] = buf[flat]
        return matrix
    # the usual case: a copy of the ``width`` bytes at each start, then the padding cleared
    matrix = _gather(buf, 'S%d' % width, starts).view(np.uint8).reshape(len(lengths), width)
    if total != len(lengths) * width:
        matrix *= np.arange(width) < lengths[:, None]
    return matrix


def bytes_rows(values: Sequence[bytes], width: int) -> np.ndarray:
    """:func:`byte_matrix` of ``values`` (bytes objects, the longest ``width`` long), a row
    each; where all are that long, a read-only view of their bytes.

    >>> bytes_rows([b'ab', b'c'], 2).tolist()
    [[97, 98], [99, 0]]
    """
    joined = np.frombuffer(b''.join(values), np.uint8)
    if width and len(joined) == width * len(values):  # one length: no padding
        return joined.reshape(len(values), width)
    lengths = np.fromiter(map(len, values), np.int64, len(values))
    ends = np.cumsum(lengths)
    return byte_matrix(joined, ends - lengths, ends)


def as_strings(matrix: np.ndarray) -> np.ndarray:
    """The rows of a C-contiguous uint8 :func:`byte_matrix` as one ``S`` array (a view).

    Without NUL bytes in the rows, equality and order of these are those of the strings
    (bytes compare unsigned, and UTF-8 byte order is code point order).

    >>> as_strings(np.array([[97, 98], [99, 0]], np.uint8)).tolist()
    [b'ab', b'c']
    """
    return matrix.view('S%d' % matrix.shape[1]).reshape(len(matrix))


def unicode_rows(rows: np.ndarray) -> np.ndarray:
    """:func:`~gluonbatch.shards.parquet.parquet_id_rows`' rows as numpy's ``str`` array
    (what ``np.array(ids, dtype=str)`` makes of the ids).

    >>> unicode_rows(np.array([[97, 98], [195, 169]], np.uint8))
    array(['ab', 'é'], dtype='<U2')
    """
    if rows.max() < 0x80:  # ASCII: each byte is its code point
        return rows.astype(np.uint32).view(np.dtype((str, rows.shape[1]))).reshape(len(rows))
    return np.array([value.decode('utf-8') for value in as_strings(rows).tolist()], dtype=str)


def _gather(buf, dtype, starts):
    """The ``dtype`` items beginning at bytes ``starts`` (none negative) of ``buf``, a
    contiguous uint8 array, read as if zeros followed it."""
    size = np.dtype(dtype).itemsize
    tail = max(len(buf) - size + 1, 0)  # items from here on need bytes past the end
    if len(starts) and int(starts.max()) >= tail:
        # the few items near the end: from a zero-padded copy of the last bytes
        near = np.flatnonzero(starts >= tail)
        padded = np.zeros(len(buf) - tail + size, np.uint8)
        padded[:len(buf) - tail] = buf[tail:]
        gathered = _gather(buf, dtype, np.minimum(starts, max(tail - 1, 0))) if tail else \
            np.empty(len(starts), dtype)
        gathered[near] = _gather(padded, dtype, starts[near] - tail)
        return gathered
    # one item per byte of buf: a stride of 1 (gathering these beats a 2-D window view)
    return np.ndarray((tail,), dtype, buffer=buf, strides=(1,))[starts]


def _eight_digits(buf, ends, lengths):
    """The value of the last ``lengths`` (1 to 8) bytes before ``ends`` (8 or more) as
    decimal digits, as uint64; None if any of them is not an ASCII digit. The eight bytes
    before ``ends`` are read as one word and turned into a number at once ("SWAR"): the
    first digit in its lowest byte, the bytes before the token cleared (leading zeros)."""
    digits = _gather(buf, _WORD, ends - 8)
    digits ^= _ZEROS
    digits &= _TRAILING[lengths]
    # a digit byte is now 0..9: adding 0x76 sets its top bit past 9 (and no carry leaves
    # a byte below 0x80, which is the only case the sum is trusted for)
    spare = digits + _OVER_NINE
    spare |= digits
    spare &= _TOP_BITS
    if spare.any():
        return None
    for shift, scale, lanes in ((8, 10, _PAIRS), (16, 100, _QUADS), (32, 10000, _HALF)):
        # neighbouring lanes of 1, 2 and 4 digits joined: 2, 4 and 8 digits
        np.right_shift(digits, np.uint64(shift), out=spare)
        digits *= np.uint64(scale)
        digits += spare
        digits &= lanes
    return digits


def _whole_numbers(buf, starts, ends):
    """The decimal tokens ``buf[starts[i]:ends[i]]`` as int64, or None if any is not 1 to
    16 ASCII digits (or ends before byte 8, or byte 16 for more than 8 digits)."""
    lengths = ends - starts
    if int(lengths.min()) < 1 or int(lengths.max()) > 16 or int(ends.min()) < 8:
        return None
    longer = np.flatnonzero(lengths > 8)
    value = _eight_digits(buf, ends, np.minimum(lengths, 8) if len(longer) else lengths)
    if value is None or not len(longer):
        return None if value is None else value.view(np.int64)
    if int(ends[longer].min()) < 16:
        return None
    high = _eight_digits(buf, ends[longer] - 8, lengths[longer] - 8)
    if high is None:
        return None
    value[longer] += high * np.uint64(10 ** 8)
    return value.view(np.int64)


def _token_rows(buf, starts, lengths):
    """:func:`byte_matrix` of tokens (1 byte long at least); 8 bytes wide where none is
    longer, read as one word each and cleared past their length."""
    if int(lengths.max()) > 8:
        return byte_matrix(buf, starts, starts + lengths)
    words = _gather(buf, _WORD, starts)
    words &= _LEADING[lengths]
    return words.view(np.uint8).reshape(len(starts), 8)


def _plain_text(data, buf):
    """Whether ``data`` (``buf`` its bytes) has no ``'/'`` or ``'\\'`` and, beyond ASCII,
    is UTF-8 without whitespace other than ``' '`` and ``'\\n'``."""
    if b'/' in data or b'\\' in data:
        return False
    if buf.max() >= 0x80:
        try:
            text = data.decode('utf-8')
        except UnicodeDecodeError:
            return False
        return _OTHER_SPACE.search(text) is None
    return True


def _separators(buf):
    """Positions (int32) of the bytes up to ``' '`` in ``buf`` and which of them are
    newlines, if all are spaces and newlines; None where a control byte is among them (or
    ``buf`` is 2 GiB or more)."""
    if len(buf) >= 1 << 31:
        return None
    positions, newlines = [], []
    below = np.empty(min(len(buf), _CHUNK), bool)
    # a chunk at a time: small temporaries, reused, rather than a few the size of buf
    for begin in range(0, len(buf), _CHUNK):
        chunk = buf[begin:begin + _CHUNK]
        found = np.flatnonzero(np.less_equal(chunk, _SPACE, out=below[:len(chunk)]))
        kinds = chunk[found]
        lines = kinds == _NEWLINE
        if np.count_nonzero(lines) + np.count_nonzero(kinds == _SPACE) != len(kinds):
            return None
        found = found.astype(np.int32)
        found += begin
        positions.append(found)
        newlines.append(lines)
    if not positions:
        return np.zeros(0, np.int32), np.zeros(0, bool)
    return np.concatenate(positions), np.concatenate(newlines)


def _one_id_per_line(keys, per_line, record_starts):
    """Whether each line's members (``per_line`` of them, rows of ``keys``) have the id of
    its first; compared as bytes, which is faster than as ``S`` strings."""
    if (per_line == per_line[0]).all():  # lines alike: no gather
        lines = keys.reshape(len(per_line), per_line[0], -1)
        return bool((lines == lines[:, :1]).all())
    return np.array_equal(keys, keys[np.repeat(record_starts[:-1], per_line)])


def _same_rows(first, second):
    """Whether two byte matrices of one shape are equal; a word a row where 8 wide."""
    if first.shape[1] == 8:
        return np.array_equal(first.view(np.uint64), second.view(np.uint64))
    return np.array_equal(first, second)


def index_members(data: bytes, tar_size: int) -> MemberArrays | None:
    """The members an ``.idx`` file's bytes list, or None where the exact reader is needed.

    Returns :class:`MemberArrays`, one record per line, members in line order, after the
    checks of :func:`~gluonbatch.shards.index.read_index` (header and line count,
    groups of four tokens, names against extensions, one id per line, data offsets in the
    tar). Not checked here: ids listed on two lines and extensions differing only in case,
    which the record table checks.

    Examples
    --------
    >>> text = b'v1.2 1\\njpg 512 3 0001.jpg txt 1024 5 0001.txt\\n'
    >>> members = index_members(text, 2048)
    >>> members.offsets.tolist(), members.sizes.tolist(), as_strings(members.exts).tolist()
    ([512, 1024], [3, 5], [b'jpg', b'txt'])
    >>> index_members(text.replace(b' 512 ', b' 500 '), 2048) is None  # not a data offset
    True
    """
    newline = data.find(b'\n')
    header = _HEADER.fullmatch(data, 0, max(newline, 0))
    if header is None or int(header.group(1)) == 0:
        return None
    if not data.endswith(b'\n'):  # the last line reads alike with or without one
        data += b'\n'
    buf = np.frombuffer(data, np.uint8)
    found = _separators(buf)
    if found is None or not _plain_text(data, buf):
        return None
    # after the header's space and newline, each token ends at a separator, a line's last
    # token at a newline
    ends, newlines = found[0][2:], found[1][2:]
    line_ends = np.flatnonzero(newlines)
    if len(line_ends) != int(header.group(1)):
        return None
    tokens = np.diff(line_ends, prepend=-1)
    if (tokens % 4).any():
        return None
    per_line = tokens // 4
    record_starts = np.concatenate([[0], np.cumsum(per_line)])
    # per member, where its four tokens end (views); each starts after the one before, and
    # an empty one (a blank line, a space too many) makes some token too short below
    ext_ends, offset_ends, size_ends, name_ends = (ends[field::4] for field in range(4))
    ext_starts = np.empty_like(ext_ends)
    ext_starts[0] = newline + 1
    np.add(name_ends[:-1], 1, out=ext_starts[1:])
    ext_lengths = ext_ends - ext_starts
    name_starts = size_ends + 1
    dots = name_ends - ext_lengths - 1  # where the name's extension would begin
    if int(ext_lengths.min()) < 1 or not (
            (dots > name_starts).all() and (buf[dots] == _DOT).all()):
        return None
    exts = _token_rows(buf, ext_starts, ext_lengths)
    keys = byte_matrix(buf, name_starts, dots)
    if not _same_rows(exts, _token_rows(buf, dots + 1, ext_lengths)) or \
            (keys == _DOT).any():  # another '.' first: the name splits elsewhere
        return None
    if not _one_id_per_line(keys, per_line, record_starts):
        return None
    offsets = _whole_numbers(buf, ext_ends + 1, offset_ends)
    sizes = _whole_numbers(buf, offset_ends + 1, size_ends)
    if offsets is None or sizes is None:
        return None
    if (offsets < BLOCK).any() or (offsets % BLOCK).any() or (offsets + sizes > tar_size).any():
        return None
    return MemberArrays(keys, exts, offsets, sizes, record_starts)


def scanned_members(members: Sequence[tuple[str, int, int]]) -> MemberArrays | None:
    """:class:`MemberArrays` of a scanned tar's ``[(name, data offset, size), ...]``, one
    record per id (in id order), its members in tar order as
    :func:`~gluonbatch.shards.index.group_members` groups them; None where the exact
    grouping is needed (an empty list, a name the exact code may refuse, sizes beyond
    int64). Extensions differing only in case are not checked here.

    >>> members = scanned_members([('b.jpg', 512, 3), ('a.txt', 1536, 1), ('b.txt', 2560, 2)])
    >>> as_strings(members.keys).tolist(), members.offsets.tolist()
    ([b'a', b'b', b'b'], [1536, 512, 2560])
    >>> members.record_starts.tolist()
    [0, 1, 3]
    """
    if not members:
        return None
    names = list(map(operator.itemgetter(0), members))
    try:
        data = ('\n'.join(names) + '\n').encode('utf-8')
        offsets, sizes = (np.fromiter(map(operator.itemgetter(field), members), np.int64,
                                      len(members)) for field in (1, 2))
    except (UnicodeEncodeError, OverflowError, TypeError):
        return None
    buf = np.frombuffer(data, np.uint8)
    found = _separators(buf)
    if found is None or not found[1].all() or len(found[0]) != len(names) or \
            not _plain_text(data, buf):
        return None
    ends = found[0]
    starts = np.concatenate([[0], ends[:-1] + 1])
    dots = np.append(np.flatnonzero(buf == _DOT), len(buf))
    dots = dots[np.searchsorted(dots, starts)]  # each name's first '.'
    if not ((dots > starts) & (dots < ends - 1)).all():
        return None
    keys = byte_matrix(buf, starts, dots)
    ids = as_strings(keys)
    if not (ids[1:] >= ids[:-1]).all():  # a record's members apart, or ids out of order
        order = np.argsort(ids, kind='stable')  # stable: each id's members in tar order
        keys, ids, dots, ends = keys[order], ids[order], dots[order], ends[order]
        offsets, sizes = offsets[order], sizes[order]
    record_starts = np.concatenate([[0], np.flatnonzero(ids[1:] != ids[:-1]) + 1, [len(ids)]])
    return MemberArrays(keys, _token_rows(buf, dots + 1, ends - dots - 1), offsets, sizes,
                        record_starts)
