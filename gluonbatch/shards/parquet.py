"""A shard's parquet: opened and read with the checks that name the file and the row, its
ids read in bulk (as numpy rows, or as a sorted Arrow array) where they are plain, and new
columns merged into it (:func:`merge_columns`)."""
import json
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .record_arrays import byte_matrix
from .._core.typing import PathLike
from .files import Shard, examples

__all__ = ['open_parquet', 'read_table', 'reads_as_str', 'parquet_id_rows', 'sorted_ids',
           'merge_columns']


def open_parquet(shard: Shard, id_col: str) -> pq.ParquetFile:
    """A shard's ``pyarrow.parquet.ParquetFile`` (its footer read), checked for the id column."""
    try:
        source = pq.ParquetFile(shard.parquet)
    except Exception as err:  # pyarrow raises its own error types for damaged files
        raise ValueError('%s is not a readable parquet file: %s' % (shard.parquet, err)) from None
    names = source.schema_arrow.names
    if id_col not in names:
        raise ValueError('%s has no id column %r; its columns are %s'
                         % (shard.parquet, id_col, names))
    if id_col in _pandas_index_columns(source.schema_arrow):
        raise ValueError('%s stores the ids %r as its pandas index, not as a column; write '
                         'them as a column (DataFrame.reset_index() before to_parquet)'
                         % (shard.parquet, id_col))
    return source


def _pandas_index_columns(schema):
    """The columns the pandas metadata of ``schema`` names as the index (none without it)."""
    try:
        return json.loads(schema.metadata[b'pandas'])['index_columns']
    except (KeyError, TypeError, ValueError):  # no pandas metadata, or unreadable
        return []


def read_table(shard: Shard, id_col: str, columns: Sequence[str] | None = None,
               source: pq.ParquetFile | None = None) -> pa.Table:
    """A shard's parquet as a ``pyarrow.Table`` (``columns`` only, if given, and the id
    column), rows sorted by id, with the checks that name the file and row: ``TypeError``
    for an id that is not a ``str``, ``ValueError`` for an id listed twice or a file that
    cannot be read. ``source`` is the file already opened (:func:`open_parquet`), if it is.

    >>> import os, tempfile
    >>> from gluonbatch.shards.files import Shard
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     pq.write_table(pa.table({'key': ['b', 'a'], 'n': [1, 2]}),
    ...                    os.path.join(tmp, '00000.parquet'))
    ...     read_table(Shard(tmp, '00000', False), 'key').to_pydict()
    {'key': ['a', 'b'], 'n': [2, 1]}
    """
    if source is None:
        with open_parquet(shard, id_col) as source:
            return read_table(shard, id_col, columns, source)
    if columns is not None and id_col not in columns:
        columns = [id_col] + list(columns)  # the rows are sorted by it
    try:
        table = source.read(columns=columns)
    except Exception as err:  # pyarrow's own error types
        raise ValueError('%s is not a readable parquet file: %s'
                         % (shard.parquet, err)) from None
    if not len(table):
        return table
    column = table.column(id_col)
    # a string column without nulls holds only str: no need to look at each row
    if reads_as_str(table.schema, id_col) and not column.null_count:
        if _increasing(column.combine_chunks()):
            return table  # unique and in order, as writers usually write them
        ids = column.to_pylist()
    else:  # as numpy gives them, so an error names numpy's type (int64, not int)
        ids = column.to_numpy(zero_copy_only=False)
        for row, value in enumerate(ids):
            if not isinstance(value, str):
                raise TypeError('%s row %d: id %r in column %r is not a str (%s); ids must be '
                                'strings such as \'000420031\' (zero-padded digits)' % (
                                    shard.parquet, row, value, id_col, type(value).__name__))
    seen: set[str] = set()
    twice: set[str] = set()
    for value in ids:
        (twice if value in seen else seen).add(value)
    if twice:
        raise ValueError('%s lists record ids more than once: %s'
                         % (shard.parquet, examples(twice)))
    return table.take(sorted(range(len(ids)), key=ids.__getitem__))


def reads_as_str(schema: pa.Schema, id_col: str) -> bool:
    """Whether pandas reads column ``id_col`` of ``schema`` as ``str`` values (None where
    null): a single column of that name, string typed, a column (not the index) to the
    pandas metadata, if any."""
    if len(schema.get_all_field_indices(id_col)) != 1:
        return False
    kind = schema.field(id_col).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        return False
    stored = (schema.metadata or {}).get(b'pandas')
    if stored is None:
        return True
    try:
        pandas = json.loads(stored)
        entries = [entry for entry in pandas['columns'] if entry['field_name'] == id_col]
        return (id_col not in pandas['index_columns'] and len(entries) == 1
                and entries[0]['pandas_type'] == 'unicode')
    except (ValueError, KeyError, TypeError):
        return False


def parquet_id_rows(source: pq.ParquetFile, id_col: str) -> np.ndarray | None:
    """The ids of a shard's parquet (``source``, a ``pyarrow.parquet.ParquetFile``) as
    sorted rows of UTF-8 bytes (:func:`~gluonbatch.shards.record_arrays.byte_matrix`), or
    None unless they are :func:`sorted_ids` and none is empty or holds a NUL (numpy's byte
    strings drop trailing NULs, and no tar member has an empty id).

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, 'x.parquet')
    ...     pq.write_table(pa.table({'key': ['b', 'a1']}), path)
    ...     parquet_id_rows(pq.ParquetFile(path), 'key').tolist()
    [[97, 49], [98, 0]]
    """
    ids = sorted_ids(source, id_col)
    if ids is None:
        return None
    _, offsets, data = ids.buffers()
    offsets = np.frombuffer(offsets, np.int64)[ids.offset:ids.offset + len(ids) + 1]
    if data is None or (np.diff(offsets) == 0).any():
        return None
    buf = np.frombuffer(data, np.uint8)[:offsets[-1]]
    text = buf[offsets[0]:]
    if not text.all():
        return None
    if text.max() >= 0x80:
        try:  # a parquet may hold bytes that are not UTF-8 in a string column
            text.tobytes().decode('utf-8')
        except UnicodeDecodeError:
            return None
    return byte_matrix(buf, offsets[:-1], offsets[1:])


def _plain_id_column(source, id_col):
    """The id column of ``source`` as one Arrow string array, or None unless pandas reads
    it as strings, it has rows and none is null."""
    if not reads_as_str(source.schema_arrow, id_col):
        return None
    try:
        column = source.read(columns=[id_col]).column(id_col)
    except Exception:  # pyarrow's own error types: read_table says what they are
        return None
    if not len(column) or column.null_count:
        return None
    return column.combine_chunks()


def sorted_ids(source: pq.ParquetFile, id_col: str) -> pa.Array | None:
    """The ids of a shard's parquet (``source``, a ``pyarrow.parquet.ParquetFile``) as a
    ``pyarrow`` binary array in byte order (the order of the strings), or None unless its
    id column is plainly strings, unique and not empty.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, 'x.parquet')
    ...     pq.write_table(pa.table({'key': ['b', 'é', 'a']}), path)
    ...     sorted_ids(pq.ParquetFile(path), 'key').to_pylist()
    [b'a', b'b', b'\xc3\xa9']
    """
    array = _plain_id_column(source, id_col)
    if array is None:
        return None
    ids = array.cast(pa.large_binary())
    if not _increasing(ids):
        ids = ids.take(pc.sort_indices(ids))
        if not _increasing(ids):
            return None  # an id twice
    return ids


def _increasing(values):
    return len(values) < 2 or pc.all(pc.greater(values.slice(1),
                                               values.slice(0, len(values) - 1))).as_py()


def merge_columns(path: PathLike, new: pa.Table, id_col: str) -> pa.Table:
    """The parquet at ``path`` as a ``pyarrow.Table``, with the columns of ``new`` put in.

    Parameters
    ----------
    path : str
        A shard's parquet file.
    new : pyarrow.Table
        The same records, rows sorted by id: ``id_col`` and the columns to put in. A column
        the file has is replaced where it stands; the others are appended, in ``new``'s
        order.

    Returns
    -------
    pyarrow.Table
        The file's rows in the file's order; its other columns (values, Arrow types) and
        its pandas metadata as read, the entries of the new columns taken from ``new``.

    Raises
    ------
    ValueError
        The file cannot be read, or its ids are not ``new``'s.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, 'x.parquet')
    ...     pq.write_table(pa.table({'key': ['b', 'a'], 'n': pa.array([1, 2], pa.int8())}),
    ...                    path)
    ...     merged = merge_columns(path, pa.table({'key': ['a', 'b'], 's': [0.5, 0.25]}),
    ...                            'key')
    >>> merged.to_pydict()
    {'key': ['b', 'a'], 'n': [1, 2], 's': [0.25, 0.5]}
    >>> str(merged.schema.field('n').type)
    'int8'
    """
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow's own error types
        raise ValueError('%s is not a readable parquet file: %s' % (path, err)) from None
    if id_col not in table.column_names:
        raise ValueError('%s has no id column %r; its columns are %s'
                         % (path, id_col, table.column_names))
    ids = table.column(id_col).combine_chunks()
    by_id = pc.sort_indices(ids)  # the file row of each id, in id order
    if not ids.take(by_id).cast(pa.large_string()).equals(
            new.column(id_col).combine_chunks().cast(pa.large_string())):
        raise ValueError('%s holds other ids than the metadata being saved into it: it '
                         'changed after the dataset was opened; open the dataset again'
                         % path)
    in_file_order = pc.sort_indices(by_id)  # the inverse permutation
    for name in new.column_names:
        if name == id_col:
            continue
        column = new.column(name).take(in_file_order)
        if name in table.column_names:
            table = table.set_column(table.column_names.index(name), name, column)
        else:
            table = table.append_column(name, column)
    return table.replace_schema_metadata(_merged_pandas(table, new))


def _merged_pandas(table, new):
    """``table``'s schema metadata with the pandas entries of ``new``'s columns in it (in
    ``table``'s column order): pandas reads each column as the frame that wrote it had it."""
    metadata = dict(table.schema.metadata or {})
    if b'pandas' not in metadata:
        return metadata or None  # a file pandas did not write: Arrow's types alone
    try:
        pandas = json.loads(metadata[b'pandas'])
        entries = {entry['field_name']: entry for entry in pandas['columns']}
        entries.update((entry['field_name'], entry)
                       for entry in json.loads(new.schema.metadata[b'pandas'])['columns'])
    except (ValueError, KeyError, TypeError):
        del metadata[b'pandas']  # unreadable: pandas reads the Arrow types
        return metadata or None
    pandas['columns'] = [entries[name] for name in table.column_names if name in entries]
    metadata[b'pandas'] = json.dumps(pandas).encode('utf-8')
    return metadata
