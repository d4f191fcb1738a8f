"""Writing: the resharding writer behind ``to_webdataset`` and the parquet writer behind
``save_metadata``, each one Dask task per shard on whatever scheduler is active; every file
is written to a temporary name and renamed when complete."""
import contextlib
import json
import logging
import os
import re
import shutil
import tarfile
import time
import uuid

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from .index import format_index
from .records import read_parquet
from .._core.checks import check_int
from .shards import SHARD_FILE, examples, remove_quietly, temporary_name
from .tar import BLOCK, member_header, padded

_LOG = logging.getLogger(__name__)


def write_parquet(frame, path):
    """Write ``frame`` to ``path`` without its index; a column of equal-length 1-d float
    arrays (embeddings) is stored as a fixed-size list of float32.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, 'x.parquet')
    ...     write_parquet(pd.DataFrame({'e': [np.ones(3), np.zeros(3)]}), path)
    ...     print(pq.read_schema(path).field('e').type)
    fixed_size_list<element: float>[3]
    """
    table = pa.Table.from_pandas(frame, preserve_index=False)
    for name in frame.columns:
        values = frame[name]
        if values.dtype != object or not len(values):
            continue
        if all(isinstance(v, np.ndarray) and v.ndim == 1 and v.dtype.kind == 'f'
               for v in values) and len({len(v) for v in values}) == 1:
            flat = pa.array(np.concatenate(values.tolist()).astype(np.float32))
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pa.FixedSizeListArray.from_arrays(flat, len(values.iloc[0])))
    pq.write_table(table, path)


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
        """Close the tar, write the index and the parquet, all under their temporary names
        (:func:`commit_shard` renames them)."""
        end = self.position + 2 * BLOCK
        record = tarfile.RECORDSIZE
        self.handle.write(bytes(2 * BLOCK + (-end) % record))
        self.handle.close()
        with open(self.tmp['idx'], 'w', encoding='utf-8') as handle:
            handle.write(format_index(self.samples))
        write_parquet(metadata, self.tmp['parquet'])

    def abort(self):
        """Remove whatever temporary file is left."""
        self.handle.close()
        for tmp in self.tmp.values():
            remove_quietly(tmp)


_SHARD_EXTS = ('tar', 'idx', 'parquet')  # the order they are renamed in: the tar first
_STAGING_PREFIX = '.partial-'
_TEMPORARY_SHARD_FILE = re.compile(r'^\.\d+\.(tar|idx|parquet)\.tmp$')


def commit_shard(directory, stem, destination=None):
    """Rename a finished shard's temporary files in ``directory`` into place in
    ``destination`` (default: the same directory); returns the tar's path."""
    destination = directory if destination is None else destination
    for ext in _SHARD_EXTS:
        name = '%s.%s' % (stem, ext)
        os.replace(temporary_name(os.path.join(directory, name)),
                   os.path.join(destination, name))
    return os.path.join(destination, stem + '.tar')


@contextlib.contextmanager
def staging(directory):
    """A hidden directory in ``directory`` that a run's tasks write into, removed at the end
    whatever happens; a task still running after a failure finds it gone and writes
    nothing. What a killed run left is removed first."""
    for name in os.listdir(directory):
        if name.startswith(_STAGING_PREFIX):
            shutil.rmtree(os.path.join(directory, name), ignore_errors=True)
        elif _TEMPORARY_SHARD_FILE.match(name):
            remove_quietly(os.path.join(directory, name))
    path = os.path.join(directory, _STAGING_PREFIX + uuid.uuid4().hex)
    os.mkdir(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_rows(frame, shard, id_col, ids=None):
    """Raise unless ``frame`` (a computed partition of the metadata) still has ``shard``'s
    rows: the same number, indexed by their record numbers, ids in record order (sorted),
    and equal to ``ids`` (the shard's record ids) when given."""
    problem = None
    if len(frame) != shard.stop - shard.start or not frame.index.equals(
            pd.RangeIndex(shard.start, shard.stop)):
        problem = '%d rows (index %s..); it had %d (%d..%d)' % (
            len(frame), frame.index[:1].tolist(), shard.stop - shard.start, shard.start,
            shard.stop - 1)
    elif id_col in frame.columns and not frame[id_col].is_monotonic_increasing:
        problem = 'its ids out of record order'
    elif ids is not None and not np.array_equal(frame[id_col].to_numpy(dtype=str), ids):
        problem = 'ids that are not its records\' ids'
    if problem:
        raise ValueError('the metadata of %s has %s when the dataset was opened: rows were '
                         'added, removed or reordered, or ids changed; add columns, but keep '
                         'the rows' % (shard.parquet, problem))


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


def partitions(frame):
    """The Dask DataFrame's partitions as one ``Delayed`` each (one per shard).

    With Dask's string conversion off while the graph is lowered: it would otherwise turn
    object columns that hold arrays (embeddings) into strings on this path.
    """
    with dask.config.set({'dataframe.convert-string': False}):
        return frame.to_delayed()


def _write_parquet(frame, shard, id_col, path):
    # the ids the shard's parquet holds now (one column): rewritten ids would no longer
    # name the shard's records
    ids = read_parquet(shard, id_col, columns=[id_col])[id_col].to_numpy(dtype=str)
    check_rows(frame, shard, id_col, ids)
    write_parquet(frame, path)


def save_metadata(frame, id_col, shards, directory, columns=None):
    """Write ``frame`` (the dataset's Dask metadata) as one parquet per shard, one task per
    shard; the work of :meth:`ImageTextPairDataset.save_metadata` (which documents the
    arguments). The files are written into a hidden directory and, once every shard is
    written, each renamed over the old one: a failure changes no file.
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
    names = [shard.stem + '.parquet' for shard in shards]
    with staging(directory) as stage:
        dask.compute(*[dask.delayed(_write_parquet)(part, shard, id_col,
                                                    os.path.join(stage, name))
                       for part, shard, name in zip(partitions(frame), shards, names)])
        # every shard is written: now they replace the old files, each atomically
        for name in names:
            os.replace(os.path.join(stage, name), os.path.join(directory, name))
    return [os.path.join(directory, name) for name in names]


def _kept_rows(frame, shard, filter_column):
    """The rows of one partition whose ``filter_column`` is True."""
    check_rows(frame, shard, None)
    column = frame[filter_column]
    if column.isna().any():
        raise TypeError('to_webdataset: filter column %r of %s holds missing values; it must '
                        'be True or False for every record' % (filter_column, shard.parquet))
    return np.flatnonzero(column.to_numpy(dtype=bool))


def _write_output_shard(reader, destination, stem, first_id, width, pieces, partitions,
                        id_col, old_id_col, mtime, source):
    """Write one output shard from ``pieces`` (``(input shard, rows)``, with the computed
    ``partitions`` of those shards) under temporary names; the records' new ids are
    consecutive from ``first_id``."""
    writer = ShardWriter(destination, stem, mtime)
    try:
        metas, number = [], first_id
        for (shard, rows), frame in zip(pieces, partitions):
            check_rows(frame, shard, id_col, reader.shard_ids(shard))
            meta = frame.iloc[rows]
            for row, old_id in zip(rows.tolist(), meta[id_col].tolist()):
                new_id = '%0*d' % (width, number)
                ids = {id_col: new_id}
                if old_id_col is not None:
                    ids[old_id_col] = old_id
                writer.add(new_id, with_json_ids(reader.read_members(shard.start + row), ids,
                                                 'record %r of %s' % (old_id, source)))
                number += 1
            metas.append(meta)
        meta = pd.concat(metas, ignore_index=True)
        if old_id_col is not None:
            meta[old_id_col] = meta[id_col].astype(object)
        meta[id_col] = ['%0*d' % (width, n) for n in range(first_id, number)]
        writer.finish(meta)
    except BaseException:
        writer.abort()
        raise
    return stem


def reshard(frame, shards, reader, source, id_col, path, filter_column, samples_per_shard,
            max_shards, old_id_col):
    """Write the records of ``frame`` kept by ``filter_column`` as a new, renumbered dataset.

    The work of :meth:`ImageTextPairDataset.to_webdataset` (which documents the arguments):
    ``frame`` is the dataset's Dask metadata (one partition per shard of ``shards``),
    ``reader`` the dataset's :class:`~gluonbatch.webdataset.reader.RecordReader` and
    ``source`` the source directory. Two computations on the active Dask scheduler: the
    kept rows of every input shard, then one task per output shard. The output shards are
    renamed into place only when every task has succeeded.
    """
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    max_shards = check_int(max_shards, 'max_shards', minimum=1)
    if filter_column is not None:
        if filter_column not in frame.columns:
            raise ValueError('to_webdataset: no filter column %r in the metadata; it has %s'
                             % (filter_column, list(map(str, frame.columns))))
        dtype = frame[filter_column].dtype
        if not pd.api.types.is_bool_dtype(dtype):
            raise TypeError('to_webdataset: filter column %r must be bool (True keeps a '
                            'record), got dtype %s' % (filter_column, dtype))
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
    if filter_column is None:
        kept = [np.arange(shard.stop - shard.start) for shard in shards]
    else:
        kept = list(dask.compute(*[
            dask.delayed(_kept_rows)(part, shard, filter_column)
            for part, shard in zip(partitions(frame[[filter_column]]), shards)]))
    total = sum(len(rows) for rows in kept)
    num_shards = -(-total // samples_per_shard)
    if num_shards > 10 ** max_shards:
        raise ValueError('to_webdataset: %d records at %d per shard need %d shards, more '
                         'than max_shards=%d digits can number; raise max_shards or '
                         'samples_per_shard' % (total, samples_per_shard, num_shards,
                                                max_shards))
    if not total:
        _LOG.info('to_webdataset: no record of %s has %r True; nothing written',
                  source, filter_column)
        return []
    os.makedirs(destination, exist_ok=True)
    digits = id_digits(samples_per_shard)
    with staging(destination) as stage:
        stems = dask.compute(*_output_tasks(frame, shards, kept, samples_per_shard, digits,
                                            max_shards, reader, stage, id_col, old_id_col,
                                            source))
        written = [commit_shard(stage, stem, destination) for stem in stems]
    _LOG.info('to_webdataset: wrote %d of %d records of %s into %d shard(s) in %s',
              total, shards[-1].stop, source, num_shards, destination)
    return written


def _output_tasks(frame, shards, kept, samples_per_shard, digits, max_shards, reader,
                  destination, id_col, old_id_col, source):
    """One Dask task per output shard, each given the input partitions it draws from."""
    parts_of = partitions(frame)
    # every kept record as (input shard number, row), in dataset order
    owners = np.concatenate([np.full(len(rows), n) for n, rows in enumerate(kept)])
    rows = np.concatenate(kept)
    mtime = int(time.time())
    tasks = []
    for shard_number, begin in enumerate(range(0, len(rows), samples_per_shard)):
        end = begin + samples_per_shard
        pieces, parts = [], []
        for n in np.unique(owners[begin:end]).tolist():
            pieces.append((shards[n], rows[begin:end][owners[begin:end] == n]))
            parts.append(parts_of[n])
        tasks.append(dask.delayed(_write_output_shard)(
            reader, destination, '%0*d' % (max_shards, shard_number),
            10 ** digits * shard_number, max_shards + digits, pieces, parts, id_col,
            old_id_col, mtime, source))
    return tasks
