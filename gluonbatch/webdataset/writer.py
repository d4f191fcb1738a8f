"""Writing: the resharding writer behind ``to_webdataset`` and the parquet writer behind
``save_metadata``; every file is written to a temporary name and renamed when complete."""
import json
import logging
import os
import tarfile
import time

import numpy as np
import pandas as pd

from .index import format_index
from .._core.checks import check_int
from .shards import SHARD_FILE, examples, remove_quietly, replacing, temporary_name
from .tar import BLOCK, member_header, padded

_LOG = logging.getLogger(__name__)


def id_digits(samples_per_shard):
    """Digits of the record part of an id: ``ceil(log10(samples_per_shard))``, exactly.

    >>> [id_digits(n) for n in (1, 9, 10, 11, 10000, 10001)]
    [0, 1, 1, 2, 4, 5]
    """
    return len(str(samples_per_shard - 1)) if samples_per_shard > 1 else 0


class ShardWriter:
    """Writes one shard: ``.NNNNN.tar.tmp`` etc., renamed into place by :meth:`finish`.

    The tar is POSIX (ustar headers by ``TarInfo.tobuf``, with pax headers only for a
    member that needs them), written directly: the headers, the data and zero padding per
    member; two zero blocks and padding to a 10240-byte record at the end.
    """

    def __init__(self, directory, stem, mtime):
        self.final = {ext: os.path.join(directory, '%s.%s' % (stem, ext))
                      for ext in ('tar', 'idx', 'parquet')}
        self.tmp = {ext: temporary_name(path) for ext, path in self.final.items()}
        self.mtime = mtime
        self.samples = []
        self.position = 0
        self.handle = open(self.tmp['tar'], 'wb')

    def add(self, key, members):
        """Append one record: ``members`` is ``[(ext, bytes), ...]``."""
        files = []
        write = self.handle.write
        for ext, data in members:
            size = len(data)
            header = member_header('%s.%s' % (key, ext), size, self.mtime)
            write(header)
            write(data)
            write(bytes(padded(size) - size))
            files.append((ext, self.position + len(header), size))
            self.position += len(header) + padded(size)
        self.samples.append((key, files))

    def finish(self, metadata):
        """Close the tar, write the index and the parquet, rename all three; the tar path."""
        end = self.position + 2 * BLOCK
        record = tarfile.RECORDSIZE
        self.handle.write(bytes(2 * BLOCK + (-end) % record))
        self.handle.close()
        with open(self.tmp['idx'], 'w', encoding='utf-8') as handle:
            handle.write(format_index(self.samples))
        metadata.to_parquet(self.tmp['parquet'], index=False)
        for ext in ('tar', 'idx', 'parquet'):
            os.replace(self.tmp[ext], self.final[ext])
        return self.final['tar']

    def abort(self):
        """Remove whatever temporary file is left (nothing after :meth:`finish`)."""
        self.handle.close()
        for tmp in self.tmp.values():
            remove_quietly(tmp)


def with_json_ids(members, ids, source):
    """``members`` with the ``.json`` member's ``ids`` (a dict: key -> id) set.

    The format's rule is that a record's JSON, its parquet row and its member names carry
    one id, so a renumbered record's JSON is rewritten; other members are kept as they are.

    >>> with_json_ids([('txt', b'a cat'), ('json', b'{"key": "07", "w": 3}')], {'key': '00'},
    ...               'record 7')
    [('txt', b'a cat'), ('json', b'{"key": "00", "w": 3}')]
    """
    out = []
    for ext, data in members:
        if ext == 'json':
            try:
                meta = json.loads(data)
            except ValueError as err:
                raise ValueError('the .json member of %s is not valid JSON: %s'
                                 % (source, err)) from None
            if not isinstance(meta, dict):
                raise ValueError('the .json member of %s holds a %s, not an object'
                                 % (source, type(meta).__name__))
            meta.update(ids)
            data = json.dumps(meta, ensure_ascii=False).encode('utf-8')
        out.append((ext, data))
    return out


def save_metadata(frame, id_col, shards, directory, columns=None):
    """Write ``frame`` as one parquet per shard; the work of
    :meth:`ImageTextPairDataset.save_metadata` (which documents the arguments).

    Each file is written to a temporary name and renamed over the old one.
    """
    if columns is not None:
        columns = [columns] if isinstance(columns, str) else list(columns)
        unknown = [c for c in columns if c not in frame.columns]
        if unknown:
            raise ValueError('save_metadata: no column(s) %s in the metadata; it has %s'
                             % (unknown, list(map(str, frame.columns))))
        if id_col not in columns:
            columns.insert(0, id_col)
        frame = frame[columns]
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)
    written = []
    for shard in shards:
        final = os.path.join(directory, shard.stem + '.parquet')
        with replacing(final) as tmp:
            frame.iloc[shard.start:shard.stop].to_parquet(tmp, index=False)
        written.append(final)
    return written


def reshard(frame, read_members, source, id_col, path, filter_column, samples_per_shard,
            max_shards, old_id_col):
    """Write the records of ``frame`` kept by ``filter_column`` as a new, renumbered dataset.

    The work of :meth:`ImageTextPairDataset.to_webdataset` (which documents the arguments):
    ``frame`` is the checked metadata, ``read_members(i)`` returns record ``i``'s members
    as ``[(ext, bytes), ...]`` and ``source`` is the source directory.
    """
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    max_shards = check_int(max_shards, 'max_shards', minimum=1)
    if filter_column is None:
        keep = np.ones(len(frame), dtype=bool)
    else:
        if filter_column not in frame.columns:
            raise ValueError('to_webdataset: no filter column %r in the metadata; it has %s'
                             % (filter_column, list(map(str, frame.columns))))
        column = frame[filter_column]
        if not pd.api.types.is_bool_dtype(column.dtype) or column.isna().any():
            raise TypeError('to_webdataset: filter column %r must be bool (True keeps a '
                            'record), got dtype %s' % (filter_column, column.dtype))
        keep = column.to_numpy(dtype=bool)
    if old_id_col is not None:
        if not isinstance(old_id_col, str):
            raise TypeError('old_id_col must be a str, got %r' % (old_id_col,))
        if old_id_col == id_col or old_id_col in frame.columns:
            raise ValueError('to_webdataset: old_id_col %r is already a column of the '
                             'metadata; choose a new name' % old_id_col)
    destination = os.path.abspath(os.fspath(path))
    if os.path.realpath(destination) == os.path.realpath(source):
        raise ValueError('to_webdataset: %s is the source directory; write the new '
                         'dataset somewhere else' % destination)
    if os.path.isdir(destination):
        existing = sorted(n for n in os.listdir(destination) if SHARD_FILE.match(n))
        if existing:
            raise ValueError('to_webdataset: %s already holds shard files (%s); write into '
                             'an empty directory' % (destination, examples(existing)))
    rows = np.flatnonzero(keep)
    num_shards = -(-len(rows) // samples_per_shard)
    if num_shards > 10 ** max_shards:
        raise ValueError('to_webdataset: %d records at %d per shard need %d shards, more '
                         'than max_shards=%d digits can number; raise max_shards or '
                         'samples_per_shard' % (len(rows), samples_per_shard, num_shards,
                                                max_shards))
    if not len(rows):
        _LOG.info('to_webdataset: no record of %s has %r True; nothing written',
                  source, filter_column)
        return []
    os.makedirs(destination, exist_ok=True)
    digits = id_digits(samples_per_shard)
    width = max_shards + digits
    mtime = int(time.time())
    written = []
    for shard_number in range(num_shards):
        chunk = rows[shard_number * samples_per_shard:(shard_number + 1) * samples_per_shard]
        new_ids = ['%0*d' % (width, sample + 10 ** digits * shard_number)
                   for sample in range(len(chunk))]
        meta = frame.iloc[chunk].reset_index(drop=True)
        old_ids = meta[id_col].tolist()
        if old_id_col is not None:
            meta[old_id_col] = meta[id_col].astype(object)
        meta[id_col] = new_ids
        writer = ShardWriter(destination, '%0*d' % (max_shards, shard_number), mtime)
        try:
            for new_id, old_id, row in zip(new_ids, old_ids, chunk.tolist()):
                ids = {id_col: new_id}
                if old_id_col is not None:
                    ids[old_id_col] = old_id
                writer.add(new_id, with_json_ids(read_members(row), ids,
                                                 'record %r of %s' % (old_id, source)))
            written.append(writer.finish(meta))
        finally:
            writer.abort()
    _LOG.info('to_webdataset: wrote %d of %d records of %s into %d shard(s) in %s',
              len(rows), len(frame), source, num_shards, destination)
    return written
