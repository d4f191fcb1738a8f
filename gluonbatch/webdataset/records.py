"""The record table: per record its members' offsets, sizes and extensions, in one shard;
and the parquet metadata, read and checked against each shard's tar or index."""
import os

import numpy as np
import pyarrow.parquet as pq

from .index import group_members, read_index
from .shards import examples
from .tar import BLOCK, padded, scan_tar


#: Member extensions taken as the record's image (exactly one per record), matched
#: case-insensitively like every extension. Each one decodes: WebP by Pillow (MXNet 1.9.1's
#: ``mx.image.imdecode`` cannot), the others by ``mx.image.imdecode``.
IMAGE_EXTENSIONS = ('jpg', 'jpeg', 'png', 'webp')


def open_parquet(shard, id_col):
    """A shard's ``pyarrow.parquet.ParquetFile`` (its footer read), checked for the id column."""
    try:
        source = pq.ParquetFile(shard.parquet)
    except Exception as err:  # pyarrow raises its own error types for damaged files
        raise ValueError('%s is not a readable parquet file: %s' % (shard.parquet, err)) from None
    names = source.schema_arrow.names
    if id_col not in names:
        raise ValueError('%s has no id column %r; its columns are %s'
                         % (shard.parquet, id_col, names))
    return source


def read_parquet(shard, id_col, columns=None, expect_columns=None):
    """A shard's metadata (``columns`` only, if given, and the id column), rows sorted by
    id, with the checks that name the file and row; ``expect_columns`` are the columns the
    file must have (all of them, in order)."""
    with open_parquet(shard, id_col) as source:
        if expect_columns is not None:
            # the columns as pandas reads them (a stored index is not a column)
            names = list(source.schema_arrow.empty_table().to_pandas().columns)
            if names != list(expect_columns):
                raise ValueError('%s has columns %s; the dataset\'s first shard has %s'
                                 % (shard.parquet, names, list(expect_columns)))
        if columns is not None and id_col not in columns:
            columns = [id_col] + list(columns)  # the rows are sorted by it
        try:
            frame = source.read(columns=columns).to_pandas()
        except Exception as err:  # pyarrow's own error types
            raise ValueError('%s is not a readable parquet file: %s'
                             % (shard.parquet, err)) from None
    ids = frame[id_col].to_numpy()
    for row, value in enumerate(ids):
        if not isinstance(value, str):
            raise TypeError('%s row %d: id %r in column %r is not a str (%s); ids must be '
                            'strings such as \'000420031\' (zero-padded digits)' % (
                                shard.parquet, row, value, id_col, type(value).__name__))
    duplicated = frame[id_col].duplicated()
    if duplicated.any():
        raise ValueError('%s lists record ids more than once: %s'
                         % (shard.parquet, examples(set(frame[id_col][duplicated]))))
    return frame.sort_values(id_col, kind='stable').reset_index(drop=True)


class RecordTable:
    """The record arrays under construction: numpy arrays, no per-record Python objects.

    Worker processes forked from the DataLoader share these pages; Python objects per
    record would be copied into every worker as their reference counts change.
    """

    def __init__(self):
        self.exts, self.codes = [], {}
        self.members, self.starts, self.slots = [], [0], []
        self.heads = []

    def code(self, ext):
        if ext not in self.codes:
            self.codes[ext] = len(self.exts)
            self.exts.append(ext)
        return self.codes[ext]

    def add_shard(self, shard, samples, ids):
        """Add a shard's records in the order of ``ids``, checking them against its tar."""
        where = shard.idx or shard.tar
        by_key = dict(samples)
        missing = [key for key in ids if key not in by_key]
        if missing:
            raise ValueError('%s lists ids that %s does not hold: %s'
                             % (shard.parquet, where, examples(missing)))
        if len(by_key) != len(ids):
            extra = set(by_key) - set(ids)
            raise ValueError('%s holds records missing from %s: %s'
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

    def arrays(self):
        members = np.array(self.members, dtype=np.int64).reshape(-1, 3)
        return (np.column_stack([members, np.array(self.heads, dtype=np.int64)]),
                np.array(self.starts, dtype=np.int64),
                np.array(self.slots, dtype=np.int16).reshape(-1, 3))


class ShardRecords:
    """One shard's records, read on first use: ids, member offsets, spans and slots.

    The ids come from the parquet's id column (sorted: record ``j`` of the shard is its
    ``j``-th smallest id), the members from the ``.idx`` or a scan of the tar, and both
    are checked against each other here, naming the files.

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

    def __init__(self, shard, id_col):
        ids = read_parquet(shard, id_col, columns=[id_col])[id_col].tolist()
        shard.tar_size = os.path.getsize(shard.tar)
        if shard.idx:
            samples = read_index(shard.idx, shard.tar, shard.tar_size)
            if len(samples) != len(ids):
                raise ValueError('%s does not match %s: it lists %d samples, the parquet '
                                 '%d rows (rebuild it with `gluonbatch wds index %s`)'
                                 % (shard.idx, shard.tar, len(samples), len(ids), shard.tar))
        else:
            samples = group_members(scan_tar(shard.tar), shard.tar)
        table = RecordTable()
        table.add_shard(shard, samples, ids)
        self.members, self.starts, self.slots = table.arrays()
        self.spans = record_spans(self.members, self.starts)
        self.ids = np.array(ids, dtype=str)
        self.exts = table.exts
        # the keys records are returned with: lower case, like the webdataset library's
        self.keys = [ext.lower() for ext in table.exts]
        self.verified = np.zeros(len(ids), dtype=bool)


def header_starts(offsets, sizes):
    """Per member, the byte where its tar headers begin: the end of the member before it.

    The headers of a member are its ustar header, after any pax or GNU long-name headers
    and directory entries that precede it; all of them lie between the end of the previous
    member's data (in byte order) and its own data. A member whose data overlaps the
    previous one (a stale index) gets the one block before its data; reading it fails.

    >>> header_starts(np.array([2048, 512, 4096]), np.array([3, 700, 0])).tolist()
    [1536, 0, 2560]
    """
    order = np.argsort(offsets, kind='stable')
    ends = offsets[order] + padded(sizes[order])
    starts = np.empty_like(offsets)
    starts[order] = np.concatenate([[0], ends])[:-1].astype(offsets.dtype)
    return np.minimum(starts, offsets - BLOCK)


def record_spans(members, starts):
    """Per record ``(first byte, length)`` covering its headers and data in one read.

    ``members`` has a row ``(data offset, size, extension code, header start)`` per member.
    The length is -1 for records whose members are not adjacent in the tar (other members
    lie between them): those are read member by member.
    """
    spans = np.full((len(starts) - 1, 2), -1, dtype=np.int64)
    if len(spans):
        offsets, sizes, heads = members[:, 0], members[:, 1], members[:, 3]
        begin = starts[:-1]
        ends = offsets + padded(sizes)
        low = np.minimum.reduceat(heads, begin)
        adjacent = np.maximum.reduceat(ends, begin) - low == np.add.reduceat(ends - heads, begin)
        spans[:, 0] = low
        spans[:, 1] = np.where(adjacent, np.maximum.reduceat(offsets + sizes, begin) - low, -1)
    return spans
