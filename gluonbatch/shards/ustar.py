"""The tar headers of many members at once, as rows of a numpy array: built from one
template and checked in bulk.

:func:`~gluonbatch.shards.tar.member_header` (``TarInfo.tobuf``) writes one header in
about 20 us. A member whose name is ASCII and at most 100 bytes long, and whose size is
below 8 GiB, has a single 512-byte ustar header in which only the name, the size and the
checksum depend on the member. So :class:`HeaderBlocks` writes ``TarInfo.tobuf``'s header
once, for an empty name, and fills in those three fields for a whole array of members in a
few numpy operations: the same bytes, which the tests check against ``tarfile``. Any other
member (it needs pax records) is left to ``tarfile``. :func:`plain_headers_match` checks
headers read from a tar the same way.

Examples
--------
>>> names = name_fields([b'000001', b'000002'], np.array([0, 1]), np.array([0, 0]), ['jpg'])
>>> headers = HeaderBlocks(0).build(names, np.array([5, 70]))
>>> headers.tobytes()[:512] == member_header('000001.jpg', 5, 0)
True
>>> plain_headers_match(headers.ravel(), np.array([0, 512]), names, np.array([5, 70])).tolist()
[True, True]
"""
from collections.abc import Sequence

import numpy as np

from .index import digit_columns
from .record_arrays import bytes_rows
from .tar import (BLOCK, CHECKSUM_FIELD, NAME_FIELD, PREFIX_AT, REGULAR_TYPES, SIZE_FIELD, TYPE_AT, member_header)

__all__ = ['NAME_BYTES', 'HeaderBlocks', 'name_fields', 'plain_headers_match',
           'checksums_match', 'ranges_to_indices']

#: Bytes of the ustar name field: longer names need pax records.
NAME_BYTES = NAME_FIELD.stop
_MAGIC, _USTAR = slice(257, 262), np.frombuffer(b'ustar', np.uint8)  # POSIX and GNU
_BLOCK_ELEMENT = np.dtype((np.void, BLOCK))
_SIZE_DIGITS = 11              # then a NUL: sizes below 8 ** 11 bytes (8 GiB)
_LARGEST_PLAIN = 8 ** _SIZE_DIGITS - 1
_CHECKSUM_DIGITS = 6           # then a NUL and a space, as tarfile writes it


def _size_fields(sizes):
    """Size fields (uint8 rows) of ``sizes`` below 8 GiB: octal digits, then a NUL."""
    fields = np.zeros((len(sizes), SIZE_FIELD.stop - SIZE_FIELD.start), np.uint8)
    fields[:, :_SIZE_DIGITS] = digit_columns(sizes, 8, _SIZE_DIGITS, zero_padded=True)
    return fields


def _column(buffer, field):
    """Field ``field`` (a slice of a header) of every block of ``buffer`` as one array of
    numpy elements, a view: assigning an element writes the field's bytes."""
    width = field.stop - field.start
    return np.ndarray((len(buffer) // BLOCK,), np.dtype((np.void, width)), buffer,
                      field.start, (BLOCK,))


def name_fields(keys: Sequence[bytes], records: np.ndarray, codes: np.ndarray,
                exts: Sequence[str]) -> np.ndarray:
    """Per member, its name ``<key>.<ext>`` as a NUL-padded ustar name field (uint8 rows of
    :data:`NAME_BYTES`), or a row of ``0xff`` where the name is not plain (longer than the
    field, or not ASCII): no header's name field holds that, so such rows never match.

    Parameters
    ----------
    keys : list of bytes
        Record keys (UTF-8).
    records, codes : numpy.ndarray of int
        Per member, its record (an index into ``keys``) and its extension code.
    exts : list of str
        The extension of each code.

    Examples
    --------
    >>> name_fields([b'07'], np.array([0, 0]), np.array([1, 0]), ['jpg', 'txt'])[:, :7]
    array([[ 48,  55,  46, 116, 120, 116,   0],
           [ 48,  55,  46, 106, 112, 103,   0]], dtype=uint8)
    """
    lengths = np.fromiter(map(len, keys), np.int64, len(keys))
    fields = np.zeros((len(records), NAME_BYTES), np.uint8)
    plain = np.ones(len(records), bool)
    if not len(records):
        return fields
    table = bytes_rows(keys, int(lengths.max()))
    ascii_keys = (table < 0x80).all(axis=1) & (lengths <= NAME_BYTES)
    lead = min(table.shape[1], NAME_BYTES)
    fields[:, :lead] = np.take(table[:, :lead], records, axis=0)
    plain &= ascii_keys[records]
    member_lengths = lengths[records]
    for code, ext in enumerate(exts):
        suffix = np.frombuffer(('.' + ext).encode('utf-8'), np.uint8)
        members = np.flatnonzero(codes == code)
        if not ext.isascii():
            plain[members] = False
            continue
        fits = member_lengths[members] + len(suffix) <= NAME_BYTES
        plain[members[~fits]] = False
        members = members[fits]
        for at in np.unique(member_lengths[members]).tolist():  # one for fixed-width keys
            at_members = members[member_lengths[members] == at]
            fields[at_members, at:at + len(suffix)] = suffix
    fields[~plain] = 0xff
    return fields


class HeaderBlocks:
    """Builds the single-block ustar headers ``member_header`` writes, many at once.

    Parameters
    ----------
    mtime : int
        The members' modification time.
    """

    def __init__(self, mtime: int) -> None:
        self.mtime = mtime
        template = np.frombuffer(member_header('x', 0, mtime), np.uint8).copy()
        template[NAME_FIELD] = 0
        template[SIZE_FIELD] = 0
        template[CHECKSUM_FIELD] = ord(' ')
        self.template = template
        self._template_sum = int(template.sum())

    def build(self, names: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """The headers of members named by ``names`` (rows of :func:`name_fields`) with
        ``sizes``, as a ``(members, 512)`` uint8 array.

        Raises
        ------
        ValueError
            A member that needs pax records (a name that is not plain, a size of 8 GiB or
            more): build that one with :func:`~gluonbatch.shards.tar.member_header`.
        """
        blocks = np.empty(len(sizes) * BLOCK, np.uint8)
        self.write(blocks, np.arange(len(sizes)) * BLOCK, names, sizes)
        return blocks.reshape(-1, BLOCK)

    def write(self, buffer: np.ndarray, at: np.ndarray, names: np.ndarray,
              sizes: np.ndarray) -> None:
        """Write the headers :meth:`build` makes into ``buffer`` (uint8, whole blocks) at
        byte positions ``at`` (multiples of 512), field by field: a header's fields are
        each one numpy element of a strided view of the buffer."""
        sizes = np.asarray(sizes, np.int64)
        if self.needs_pax(names, sizes).any():
            raise ValueError('HeaderBlocks builds plain ustar headers only: a name of at most '
                             '%d ASCII bytes and a size below 8 GiB' % NAME_BYTES)
        rows = np.asarray(at, np.int64) // BLOCK
        size_field = _size_fields(sizes)
        # uint16 sums (a field's bytes add up to at most 100 * 255) are the fastest
        checksums = (names.sum(axis=1, dtype=np.uint16).astype(np.int64)
                     + size_field.sum(axis=1, dtype=np.uint16) + self._template_sum)
        checksum_field = np.empty((len(sizes), 8), np.uint8)
        checksum_field[:, :_CHECKSUM_DIGITS] = digit_columns(checksums, 8, _CHECKSUM_DIGITS,
                                                             zero_padded=True)
        checksum_field[:, _CHECKSUM_DIGITS:] = (0, ord(' '))
        # the template as one element: numpy fills with a scalar much faster
        _column(buffer, slice(0, BLOCK))[rows] = self.template.view(_BLOCK_ELEMENT)[0]
        for field, values in ((NAME_FIELD, names), (SIZE_FIELD, size_field),
                              (CHECKSUM_FIELD, checksum_field)):
            _column(buffer, field)[rows] = np.ascontiguousarray(values).view(
                np.dtype((np.void, field.stop - field.start)))[:, 0]

    def needs_pax(self, names: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """Per member, whether its header needs pax records (``build`` refuses it)."""
        return (names[:, 0] == 0xff) | (np.asarray(sizes) > _LARGEST_PLAIN)


def plain_headers_match(buffer: np.ndarray, at: np.ndarray, names: np.ndarray,
                        sizes: np.ndarray) -> np.ndarray:
    """Per header block of ``buffer`` (uint8, whole blocks) at byte positions ``at``,
    whether it is the plain ustar header of a regular file named by the row of ``names``
    (:func:`name_fields`) with that size, in the layout ``tarfile`` and GNU tar write: what a
    copy of the member relies on. The fields a copy does not keep (mode, owner, time) and
    the checksum over them are not checked. Each field is compared as one numpy element.

    False says only that this check cannot confirm the header: check those with
    :func:`~gluonbatch.shards.tar.check_headers`, which parses any header and says what
    is wrong.
    """
    sizes = np.asarray(sizes, np.int64)
    rows = np.asarray(at, np.int64) // BLOCK
    size_field = _size_fields(np.minimum(sizes, _LARGEST_PLAIN))
    def field(where):
        return _column(buffer, where)[rows]
    def elements(values):
        return np.ascontiguousarray(values).view(np.dtype((np.void, values.shape[1])))[:, 0]
    blocks = buffer.reshape(-1, BLOCK)
    kind = blocks[:, TYPE_AT][rows]
    return ((sizes <= _LARGEST_PLAIN)
            & (field(NAME_FIELD) == elements(names))
            & (field(SIZE_FIELD) == elements(size_field))
            & (field(_MAGIC) == _USTAR.view(np.dtype((np.void, len(_USTAR))))[0])
            & ((kind == REGULAR_TYPES[0]) | (kind == REGULAR_TYPES[1]))
            & (blocks[:, PREFIX_AT][rows] == 0))


def checksums_match(buffer: np.ndarray, at: np.ndarray | Sequence[int]) -> np.ndarray:
    """Per header block of ``buffer`` (uint8, whole blocks) at byte positions ``at``,
    whether its checksum field holds its checksum as ``tarfile`` and GNU tar write it (six
    octal digits, a NUL and a space): the sum of its bytes, the field's own counted as
    spaces. False says only that this check cannot confirm it (:func:`tarfile` can).

    >>> block = np.frombuffer(member_header('0001.txt', 5, 0), np.uint8).copy()
    >>> checksums_match(block, [0]).tolist()
    [True]
    >>> block[200] += 1
    >>> checksums_match(block, [0]).tolist()
    [False]
    """
    blocks = buffer.reshape(-1, BLOCK)[np.asarray(at, np.int64) // BLOCK]
    field = blocks[:, CHECKSUM_FIELD]
    sums = (blocks.sum(axis=1, dtype=np.int64) - field.sum(axis=1, dtype=np.int64)
            + 8 * ord(' '))
    digits = field[:, :_CHECKSUM_DIGITS].astype(np.int64) - ord('0')
    stored = digits @ (8 ** np.arange(_CHECKSUM_DIGITS - 1, -1, -1))
    return (((digits >= 0) & (digits < 8)).all(axis=1) & (field[:, _CHECKSUM_DIGITS] == 0)
            & (field[:, _CHECKSUM_DIGITS + 1] == ord(' ')) & (stored == sums))


def ranges_to_indices(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The concatenated ranges ``starts[i] .. starts[i] + counts[i] - 1``, vectorized.

    >>> ranges_to_indices(np.array([5, 0, 9]), np.array([2, 0, 3])).tolist()
    [5, 6, 9, 10, 11]
    """
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    if not total:
        return np.zeros(0, np.int64)
    ends = np.cumsum(counts)
    steps = np.ones(total, np.int64)
    firsts = ends - counts
    nonempty = counts > 0
    steps[0] = starts[nonempty][0]
    # at each range's first element, jump from the previous range's last value
    jumps = starts[nonempty][1:] - (starts[nonempty][:-1] + counts[nonempty][:-1] - 1)
    steps[firsts[nonempty][1:]] = jumps
    return np.cumsum(steps)
