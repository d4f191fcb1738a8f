"""A shard's parquet: opened and read with the checks that name the file and the row."""
import pyarrow.parquet as pq

from .record_arrays import reads_as_str
from .shards import examples

__all__ = ['open_parquet', 'read_parquet']


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
            table = source.read(columns=columns)
            frame = table.to_pandas()
        except Exception as err:  # pyarrow's own error types
            raise ValueError('%s is not a readable parquet file: %s'
                             % (shard.parquet, err)) from None
    ids = frame[id_col].to_numpy()
    # a string column without nulls holds only str: no need to look at each row
    all_str = reads_as_str(table.schema, id_col) and not table.column(id_col).null_count
    for row, value in enumerate(() if all_str else ids):
        if not isinstance(value, str):
            raise TypeError('%s row %d: id %r in column %r is not a str (%s); ids must be '
                            'strings such as \'000420031\' (zero-padded digits)' % (
                                shard.parquet, row, value, id_col, type(value).__name__))
    duplicated = frame[id_col].duplicated()
    if duplicated.any():
        raise ValueError('%s lists record ids more than once: %s'
                         % (shard.parquet, examples(set(frame[id_col][duplicated]))))
    return frame.sort_values(id_col, kind='stable').reset_index(drop=True)
