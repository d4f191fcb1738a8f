"""The record table: per record its members' offsets, sizes and extensions, in one shard,
its parquet's ids checked against its tar or index.

A shard's table is read in bulk with numpy, and again by the exact per-record code where
the bulk reading finds anything unusual: that code gives the precise error, or the same
table for valid input."""
import os
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np

from .index import Sample, group_members, index_disagreement, read_index
from .parquet import open_parquet, parquet_id_rows, read_table
from .record_arrays import as_strings, index_members, scanned_members, unicode_rows
from .files import Shard, examples
from .tar import BLOCK, padded, scan_tar

__all__ = ['IMAGE_EXTENSIONS', 'Fields', 'RecordTable', 'ShardRecords', 'exact_fields',
           'vectorized_fields', 'record_slots', 'header_starts', 'record_spans']

#: Member extensions taken as the record's image (exactly one per record), matched
#: case-insensitively like every extension. Each one decodes: WebP by Pillow (MXNet 1.9.1's
#: ``mx.image.imdecode`` cannot), the others by ``mx.image.imdecode``.
IMAGE_EXTENSIONS = ('jpg', 'jpeg', 'png', 'webp')

#: A shard's records as :class:`ShardRecords` holds them: ``(ids, members, starts, slots,
#: exts)``.
Fields: TypeAlias = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]]


def _ids_disagree(shard, problem):
    """The ValueError for a shard whose parquet and tar (or index) list other records:
    with an index, which of the three files is at fault."""
    if not shard.idx:
        return ValueError(problem)
    return index_disagreement(shard.idx, shard.tar, problem, otherwise=(
        '%s; %s and its index agree, so the parquet is not the one written with them: '
        'restore it' % (problem, shard.tar)))


class RecordTable:
    """The record arrays under construction: numpy arrays, no per-record Python objects.

    Worker processes forked from the DataLoader share these pages; Python objects per
    record would be copied into every worker as their reference counts change.
    """

    def __init__(self) -> None:
        self.exts: list[str] = []
        self.codes: dict[str, int] = {}
        self.members: list[tuple[int, int, int]] = []
        self.starts: list[int] = [0]
        self.slots: list[list[int]] = []
        self.heads: list[int] = []

    def code(self, ext: str) -> int:
        """The number of extension ``ext``, a new one if it is new."""
        if ext not in self.codes:
            self.codes[ext] = len(self.exts)
            self.exts.append(ext)
        return self.codes[ext]

    def add_shard(self, shard: Shard, samples: Iterable[Sample], ids: Sequence[str]) -> None:
        """Add a shard's records in the order of ``ids``, checking them against its tar."""
        where = shard.idx or shard.tar
        by_key = dict(samples)
        missing = [key for key in ids if key not in by_key]
        if missing:
            raise _ids_disagree(shard, '%s lists ids that %s does not hold: %s'
                                % (shard.parquet, where, examples(missing)))
        if len(by_key) != len(ids):
            extra = set(by_key) - set(ids)
            raise _ids_disagree(shard, '%s holds records missing from %s: %s'
                                % (where, shard.parquet, examples(extra)))
        for key in ids:
            files = by_key[key]
            exts = [ext for ext, _, _ in files]
            lowered = [ext.lower() for ext in exts]
            images = [pos for pos, ext in enumerate(lowered) if ext in IMAGE_EXTENSIONS]
            if len(images) != 1:
                raise ValueError('record %r in %s has %s image members (%s); a record needs '
                                 'exactly one of .%s' % (
                                     key, where, len(images) or 'no',
                                     ', '.join('.' + ext for ext in exts),
                                     ', .'.join(IMAGE_EXTENSIONS)))
            slots = [images[0]]
            for wanted, what in (('txt', 'caption'), ('json', 'metadata')):
                if wanted not in lowered:
                    raise ValueError('record %r in %s has no %s member (.%s); it has %s'
                                     % (key, where, what, wanted,
                                        ', '.join('.' + ext for ext in exts)))
                slots.append(lowered.index(wanted))
            self.members.extend((offset, size, self.code(ext)) for ext, offset, size in files)
            self.starts.append(len(self.members))
            self.slots.append(slots)
        added = np.array(self.members[len(self.heads):], dtype=np.int64).reshape(-1, 3)
        self.heads.extend(header_starts(added[:, 0], added[:, 1]).tolist())

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(members, starts, slots)`` as :class:`ShardRecords` holds them."""
        members = np.array(self.members, dtype=np.int64).reshape(-1, 3)
        return (np.column_stack([members, np.array(self.heads, dtype=np.int64)]),
                np.array(self.starts, dtype=np.int64),
                np.array(self.slots, dtype=np.int16).reshape(-1, 3))


class ShardRecords:
    """One shard's records, read on first use: ids, member offsets, spans and slots.

    The ids come from the parquet's id column (sorted: record ``j`` of the shard is its
    ``j``-th smallest id), the members from the ``.idx`` or a scan of the tar, and both
    are checked against each other here, naming the files.

    Parameters
    ----------
    shard : Shard
    id_col : str
    vectorized : bool, default True
        False reads record by record only.

    Attributes
    ----------
    ids : numpy.ndarray of str
    members : numpy.ndarray
        A row ``(data offset, size, extension code, header start)`` per member.
    starts : numpy.ndarray
        Record ``j``'s members are rows ``starts[j]:starts[j + 1]``.
    spans : numpy.ndarray
        Per record ``(first byte, length)``, see :func:`record_spans`.
    slots : numpy.ndarray
        Per record, the positions of its image, ``.txt`` and ``.json`` members.
    exts, keys : list of str
        The extension of each code as in the tar, and lower case.
    verified : numpy.ndarray of bool
        Records whose tar headers this process has checked.
    """

    def __init__(self, shard: Shard, id_col: str, vectorized: bool = True) -> None:
        fields, scanned = vectorized_fields(shard, id_col) if vectorized else (None, None)
        self._set(exact_fields(shard, id_col, scanned) if fields is None else fields)

    @classmethod
    def of_fields(cls, fields: Fields, spans: np.ndarray | None = None) -> 'ShardRecords':
        """The records of ``fields``, ``(ids, members, starts, slots, exts)`` as
        :func:`exact_fields` returns them (a part of a shard, say), nothing read;
        ``spans`` as :func:`record_spans` gives them, if known."""
        records = cls.__new__(cls)
        records._set(fields, spans)
        return records

    def _set(self, fields, spans=None):
        self.ids, self.members, self.starts, self.slots, self.exts = fields
        self.spans = record_spans(self.members, self.starts) if spans is None else spans
        # the keys records are returned with: lower case, like the webdataset library's
        self.keys = [ext.lower() for ext in self.exts]
        self.verified = np.zeros(len(self.ids), dtype=bool)


def exact_fields(shard: Shard, id_col: str,
                 scanned: Sequence[tuple[str, int, int]] | None = None) -> Fields:
    """``(ids, members, starts, slots, exts)`` of a shard, read record by record: the
    reading that raises the precise error for anything wrong. ``scanned`` is the tar's
    :func:`~gluonbatch.shards.tar.scan_tar`, if it was scanned already."""
    ids = read_table(shard, id_col, columns=[id_col]).column(id_col).to_pylist()
    shard.tar_size = os.path.getsize(shard.tar)
    if shard.idx:
        samples = read_index(shard.idx, shard.tar, shard.tar_size)  # ids checked below
    else:
        samples = group_members(scan_tar(shard.tar) if scanned is None else scanned,
                                shard.tar)
    table = RecordTable()
    table.add_shard(shard, samples, ids)
    members, starts, slots = table.arrays()
    return np.array(ids, dtype=str), members, starts, slots, table.exts


def vectorized_fields(shard: Shard, id_col: str
                      ) -> tuple[Fields | None, list[tuple[str, int, int]] | None]:
    """``(fields, scanned)``: :func:`exact_fields`' fields read in bulk with numpy, or None
    where the exact reading is needed; ``scanned`` is the tar's member list if the tar was
    scanned (no ``.idx``), for that reading to reuse. Errors that the exact reading raises
    at the same step (an unreadable parquet footer, a missing id column, a corrupt tar)
    are raised here too; nothing it would refuse is accepted.

    Examples
    --------
    >>> import tempfile
    >>> from gluonbatch.curation import make_example_dataset
    >>> from gluonbatch.shards.files import Shard
    >>> tmp = tempfile.TemporaryDirectory()
    >>> shard = Shard(make_example_dataset(tmp.name, num_shards=1, index=True), '00000', True)
    >>> fields, scanned = vectorized_fields(shard, 'key')
    >>> fields[2].tolist(), fields[4], scanned is None  # record starts, extensions
    ([0, 3, 6, 9], ['jpg', 'txt', 'json'], True)
    >>> all(np.array_equal(ours, exact) for ours, exact in zip(fields, exact_fields(shard, 'key')))
    True
    >>> tmp.cleanup()
    """
    with open_parquet(shard, id_col) as source:
        ids = parquet_id_rows(source, id_col)
    if ids is None:
        return None, None
    shard.tar_size = os.path.getsize(shard.tar)
    scanned = None
    if shard.idx:
        with open(shard.idx, 'rb') as handle:
            members = index_members(handle.read(), shard.tar_size)
    else:
        scanned = scan_tar(shard.tar)
        members = scanned_members(scanned)
    table = None if members is None else _vectorized_table(ids, members)
    if table is None:
        return None, scanned
    return (unicode_rows(ids),) + table, scanned


def _vectorized_table(ids, members):
    """:meth:`RecordTable.arrays` and exts for ``ids`` (sorted rows, as
    :func:`~.parquet.parquet_id_rows`) and ``members``
    (:class:`~.record_arrays.MemberArrays`), or None where :meth:`RecordTable.add_shard`
    is needed: ids that differ, a record listed twice, extensions differing in case only,
    a record without one image, a caption or metadata member."""
    count, record_starts, exts = len(ids), members.record_starts, members.exts
    keys = as_strings(members.keys)[record_starts[:-1]]
    if len(keys) != count:
        return None
    sizes = np.diff(record_starts)
    by_id = None
    if not (keys[1:] > keys[:-1]).all():
        by_id = np.argsort(keys, kind='stable')
        keys = keys[by_id]
        if not (keys[1:] > keys[:-1]).all():
            return None  # an id on two lines
    if not (keys == as_strings(ids)).all() or sizes.max() > np.iinfo(np.int16).max:
        return None
    # the usual shard: every record has the same extensions in the same order
    rows = exts.view(np.uint64) if exts.shape[1] == 8 else exts  # a word a row: faster
    uniform = (sizes == sizes[0]).all() and (
        rows.reshape(count, -1) == rows[:sizes[0]].reshape(-1)).all()
    offsets, lengths, starts = members.offsets, members.sizes, record_starts
    if by_id is not None:  # each record's members, in the order of its id
        sizes = sizes[by_id]
        starts = np.concatenate([[0], np.cumsum(sizes)])
        order = np.arange(starts[-1]) + np.repeat(record_starts[:-1][by_id] - starts[:-1],
                                                  sizes)
        offsets, lengths = offsets[order], lengths[order]
        exts = exts if uniform else exts[order]
    if uniform:
        names = _decode_rows(exts[:sizes[0]])
        distinct = list(dict.fromkeys(names))
        slots = record_slots([name.lower() for name in names])
        if slots is None:
            return None
        codes = np.tile([distinct.index(name) for name in names], count)
        slots = np.tile(np.array(slots, np.int16), (count, 1))
    else:
        found = _table_codes_and_slots(exts, sizes, starts)
        if found is None:
            return None
        codes, slots, distinct = found
    heads = header_starts(offsets, lengths)
    return (np.column_stack([offsets, lengths, codes, heads]), starts.astype(np.int64),
            slots, distinct)


def _decode_rows(rows):  # byte_matrix rows: the strings
    return [row.tobytes().rstrip(b'\0').decode('utf-8') for row in rows]


def record_slots(lowered: Sequence[str]) -> list[int] | None:
    """:meth:`RecordTable.add_shard`'s slots of a record of lower-case extensions
    ``lowered`` (where its image, caption and metadata are), or None where it (or the
    reading of its members) raises.

    >>> record_slots(['txt', 'json', 'png']), record_slots(['jpg', 'txt'])
    ([2, 0, 1], None)
    """
    if len(set(lowered)) != len(lowered):
        return None  # extensions differing only in case
    images = [place for place, ext in enumerate(lowered) if ext in IMAGE_EXTENSIONS]
    if len(images) != 1 or 'txt' not in lowered or 'json' not in lowered:
        return None
    return [images[0], lowered.index('txt'), lowered.index('json')]


def _table_codes_and_slots(exts, sizes, starts):
    """``(codes, slots, exts)`` of records of differing extensions (rows ``exts``, record
    ``j`` rows ``starts[j]:starts[j + 1]``), or None as :func:`record_slots`."""
    count = len(sizes)
    codes, firsts = _first_seen_codes(exts)
    names = _decode_rows(exts[firsts])
    lowered = [name.lower() for name in names]
    kinds = sorted(set(lowered))
    member_kinds = np.array([kinds.index(name) for name in lowered])[codes]
    record_of = np.repeat(np.arange(count), sizes)
    if _repeats(record_of * len(kinds) + member_kinds, count * len(kinds)):
        return None  # extensions differing only in case, as in group_members/read_index
    place = np.arange(len(codes)) - np.repeat(starts[:-1], sizes)
    image = np.isin(member_kinds, [kinds.index(kind) for kind in kinds
                                   if kind in IMAGE_EXTENSIONS])
    if not (np.bincount(record_of[image], minlength=count) == 1).all():
        return None
    slots = [place[image]]
    for wanted in ('txt', 'json'):
        member = member_kinds == (kinds.index(wanted) if wanted in kinds else -1)
        if np.count_nonzero(member) != count:  # each record has one at most
            return None
        slots.append(place[member])
    return codes, np.column_stack(slots).astype(np.int16), names


def _first_seen_codes(exts):
    """Per member (a row of ``exts``), the number of its extension in order of first
    appearance, and each number's first member: :meth:`RecordTable.code`'s numbering."""
    distinct, firsts, inverse = np.unique(as_strings(exts), return_index=True,
                                          return_inverse=True)
    rank = np.argsort(firsts)
    numbers = np.empty(len(distinct), np.int64)
    numbers[rank] = np.arange(len(distinct))
    return numbers[inverse], firsts[rank]


def _repeats(values, bound):
    """Whether non-negative ints below ``bound`` hold a value twice."""
    if bound <= 8 * len(values) + 4096:
        return bool(len(values)) and np.bincount(values, minlength=bound).max() > 1
    ordered = np.sort(values)
    return bool((ordered[1:] == ordered[:-1]).any())


def header_starts(offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per member, the byte where its tar headers begin: the end of the member before it.

    The headers of a member are its ustar header, after any pax or GNU long-name headers
    and directory entries that precede it; all of them lie between the end of the previous
    member's data (in byte order) and its own data. A member whose data overlaps the
    previous one (a stale index) gets the one block before its data; reading it fails.

    >>> header_starts(np.array([2048, 512, 4096]), np.array([3, 700, 0])).tolist()
    [1536, 0, 2560]
    """
    in_order = (offsets[1:] >= offsets[:-1]).all()  # the usual case: nothing to sort
    order = slice(None) if in_order else np.argsort(offsets, kind='stable')
    ends = offsets[order] + padded(sizes[order])
    starts = np.empty_like(offsets)
    starts[order] = np.concatenate([[0], ends])[:-1].astype(offsets.dtype)
    return np.minimum(starts, offsets - BLOCK)


def record_spans(members: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per record ``(first byte, length)`` covering its headers and data in one read.

    ``members`` has a row ``(data offset, size, extension code, header start)`` per member.
    The length is -1 for records whose members are not adjacent in the tar (other members
    lie between them): those are read member by member.
    """
    spans = np.full((len(starts) - 1, 2), -1, dtype=np.int64)
    if len(spans):
        offsets, sizes, heads = members[:, 0], members[:, 1], members[:, 3]
        per_record = _per_record(starts)
        ends = offsets + padded(sizes)
        low = per_record(np.minimum, heads)
        adjacent = per_record(np.maximum, ends) - low == per_record(np.add, ends - heads)
        spans[:, 0] = low
        spans[:, 1] = np.where(adjacent, per_record(np.maximum, offsets + sizes) - low, -1)
    return spans


def _per_record(starts):
    """``reduce(ufunc, values)``: per-member ``values`` reduced per record (record ``j``'s
    members are ``starts[j]:starts[j + 1]``, at least one) by ``ufunc``'s ``reduceat``, or,
    where every record has the same few members, by as many elementwise steps (faster)."""
    counts = np.diff(starts)
    width = int(counts[0])
    if width <= 8 and (counts == width).all():
        def reduce(ufunc, values):
            reduced = values[0::width].copy()
            for column in range(1, width):
                ufunc(reduced, values[column::width], out=reduced)
            return reduced
        return reduce
    return lambda ufunc, values: ufunc.reduceat(values, starts[:-1])
