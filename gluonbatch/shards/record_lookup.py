"""One record of a shard found through its ``.idx``, without the shard's whole table:
:class:`IndexLookup`, what first reads use.

A shard's :class:`~.records.ShardRecords` parses every line of its ``.idx`` and checks the
whole shard, some milliseconds per 10,000 records; a reader that touches a few records of
many shards (a shuffled epoch's first batches, a look at one record) would pay that per
shard. Here the parquet's ids and the ``.idx`` bytes are read once per shard, and record
``j``'s line (its id is the ``j``-th smallest) is found by bisection on the lines' ids,
which needs the lines in id order, as the shards gluonbatch writes have them.

A lookup is optimistic: it returns None wherever it is not certain (lines out of order, an
id not found, a line the exact parser refuses, a record without its image, caption or
metadata member, an odd layout), and the caller reads the whole table, which gives the
exact result or error.
"""
import os

import numpy as np

from .index import INDEX_VERSION, parse_index_line
from .parquet import open_parquet, sorted_ids
from .files import Shard
from .records import ShardRecords, record_slots
from .tar import BLOCK, padded

__all__ = ['IndexLookup']

#: A record is read from where the line before's members end: only if its data starts this
#: near (its headers, pax records included, take a few blocks); else the members between
#: are another line's, and the table knows where its headers begin.
_HEADERS_LIMIT = 64 << 10
#: Line breaks other than ``'\n'`` that ``str.splitlines`` (the table's reading) splits on:
#: ASCII ones, then the three beyond ASCII.
_OTHER_LINE_BREAKS = '\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029'


class IndexLookup:
    """The records of one shard with an ``.idx``, found one at a time.

    Parameters
    ----------
    shard : Shard
        With an ``.idx``.
    id_col : str
        The parquet's id column.

    Attributes
    ----------
    usable : bool
        False where lookups cannot work at all (the ids are not plain unique strings, the
        ``.idx``'s first line does not give the parquet's row count): every lookup is None.
    reads : int
        Lookups its user counted (the reader reads the table after some).

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.curation import make_example_dataset
    >>> from gluonbatch.shards.files import Shard
    >>> tmp = tempfile.TemporaryDirectory()
    >>> shard = Shard(make_example_dataset(tmp.name, num_shards=1, index=True), '00000', True)
    >>> records = IndexLookup(shard, 'key').record(2)
    >>> records.ids.tolist(), records.exts
    (['000002'], ['jpg', 'txt', 'json'])
    >>> table = ShardRecords(shard, 'key')  # the same members, headers and spans
    >>> (np.array_equal(records.members, table.members[6:9]),
    ...  np.array_equal(records.spans, table.spans[2:3]))
    (True, True)
    >>> tmp.cleanup()
    """

    def __init__(self, shard: Shard, id_col: str) -> None:
        if shard.idx is None:
            raise ValueError('IndexLookup needs a shard with an .idx file; %s has none'
                             % shard.tar)
        self.shard = shard
        with open_parquet(shard, id_col) as source:
            self.ids = sorted_ids(source, id_col)
        with open(shard.idx, 'rb') as handle:
            self.text = handle.read()
        self.tar_size = os.path.getsize(shard.tar)
        first_line = self.text.find(b'\n') + 1
        head = self.text[:first_line].split()
        self.usable = (self.ids is not None and first_line > 0 and head == [
            INDEX_VERSION.encode(), str(len(self.ids)).encode()]
            and _one_line_per_record(self.text, len(self.ids)))
        self.body, self.reads = first_line, 0

    def record(self, row: int) -> ShardRecords | None:
        """Record ``row`` (``0 <= row <`` the shard's record count) as a one-record
        :class:`~.records.ShardRecords`, or None where the whole table must be read."""
        if not self.usable or self.ids is None:  # usable: the ids are known
            return None
        key = self.ids[row].as_py()
        found = self._line_of(key)
        if found is None:
            return None
        start, end = found
        try:
            files = self._members(start, end, key)
            previous_end = self._end_of_line_before(start)
        except ValueError:  # UnicodeDecodeError too
            return None  # the whole table says what is wrong, or reads it otherwise
        if files is None or previous_end is None:
            return None
        return _one_record(key.decode('utf-8'), files, previous_end)

    def _line_of(self, key):
        """``(start, end)`` of the line whose first member's id is ``key`` (bytes), found
        by bisection on the lines' ids, or None."""
        text, low, high = self.text, self.body, len(self.text)
        while low < high:
            middle = (low + high) // 2
            start = text.rfind(b'\n', low, middle) + 1 or low
            end = text.find(b'\n', start)
            end = len(text) if end < 0 else end
            line_key = _first_id(text, start, end)
            if line_key is None:
                return None
            if line_key == key:
                return start, end
            if line_key < key:
                low = end + 1
            else:
                high = start
        return None

    def _members(self, start, end, key):
        """The line's ``[(ext, offset, size), ...]`` as the exact parser reads them, or
        None unless it reads it as one line of record ``key``. (A usable index has no
        line breaks but ``'\\n'``: the line is one line to the exact reader too.)"""
        line = self.text[start:end].decode('utf-8')
        if not line.strip():
            return None  # a blank line, which the exact reader skips
        where = '%s byte %d' % (self.shard.idx, start)
        found, files = parse_index_line(line, where, self.shard.idx, self.shard.tar,
                                        self.tar_size)
        return files if found.encode('utf-8') == key else None

    def _end_of_line_before(self, start):
        """Where the tar bytes of the members on the line before the one at ``start`` end
        (0 for the first line), or None if that line does not list plain offsets and sizes."""
        if start == self.body:
            return 0
        before = self.text.rfind(b'\n', self.body, start - 1) + 1 or self.body
        tokens = self.text[before:start - 1].split(b' ')
        if len(tokens) % 4 or not all(token.isdigit() for token in tokens[1::4] + tokens[2::4]):
            return None
        return max(int(offset) + padded(int(size))
                   for offset, size in zip(tokens[1::4], tokens[2::4]))


def _one_record(key, files, previous_end):
    """The :class:`~.records.ShardRecords` of record ``key`` of members ``files``
    (``[(ext, data offset, size), ...]``) after the members that end at ``previous_end``,
    or None where it is not a record the table would read the same way."""
    exts = [ext for ext, _, _ in files]
    slots = record_slots([ext.lower() for ext in exts])
    if slots is None:
        return None
    by_offset = sorted(range(len(files)), key=lambda member: files[member][1])
    if files[by_offset[0]][1] - previous_end > _HEADERS_LIMIT:
        return None  # other members between: the table knows where its headers begin
    heads, end = [0] * len(files), previous_end
    for member in by_offset:
        _, offset, size = files[member]
        if end > offset - BLOCK:
            return None  # overlapping members: a stale index, or not the line before's
        heads[member], end = end, offset + padded(size)
    last = max(offset + size for _, offset, size in files)
    members = np.array([(offset, size, code, head) for code, ((_, offset, size), head)
                        in enumerate(zip(files, heads))], np.int64)
    return ShardRecords.of_fields(
        (np.array([key], dtype=str), members, np.array([0, len(files)], np.int64),
         np.array([slots], np.int16), exts),
        spans=np.array([[previous_end, last - previous_end]], np.int64))


def _one_line_per_record(text, count):
    """Whether the index ``text`` (bytes) is UTF-8 of its first line and ``count`` lines
    after it, split only at ``'\\n'``: so an index with more lines than its first line says
    (which the table refuses) is never served by lookup. (A blank line, which the table
    skips, can stand in for a missing one: that record's lookup finds no line, and the
    table says what is wrong.)

    >>> _one_line_per_record(b'v1.2 2\\na\\nb\\n', 2), _one_line_per_record(b'v1.2 2\\na\\rb', 2)
    (True, False)
    """
    if not text.isascii():
        try:
            decoded = text.decode('utf-8')
        except UnicodeDecodeError:
            return False
        if any(other in decoded for other in _OTHER_LINE_BREAKS[-3:]):
            return False
    # each looked for on its own: a search for one character runs at memory speed
    if any(other.encode() in text for other in _OTHER_LINE_BREAKS[:-3]):
        return False
    # numpy counts faster than bytes.count
    newlines = np.count_nonzero(np.frombuffer(text, np.uint8) == ord('\n'))
    return newlines + (not text.endswith(b'\n')) == count + 1


def _first_id(text, start, end):
    """The id of the first member named on the line ``text[start:end]``, or None."""
    tokens = text[start:end].split(b' ', 4)
    if len(tokens) < 4:
        return None
    return tokens[3].split(b'.', 1)[0]
