"""A shard's parquet ids read in bulk: sorted by their bytes, as an Arrow array
(``sorted_ids``) and as rows of a byte matrix (``parquet_id_rows``), or None wherever the
exact per-row reading must decide."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import example, given
from hypothesis import strategies as st

from gluonbatch.shards.parquet import parquet_id_rows, sorted_ids

IDS = st.lists(st.text(alphabet='019az_\x00\u00e9\u5b57', max_size=6), max_size=12)


def _parquet(tmp_path_factory, column, row_group_size=None):
    path = str(tmp_path_factory.mktemp('ids') / 'x.parquet')
    pq.write_table(pa.table({'key': column}), path, row_group_size=row_group_size)
    return pq.ParquetFile(path)


@given(ids=IDS, kind=st.sampled_from([pa.string(), pa.large_string()]),
       row_group_size=st.sampled_from([None, 1, 3]))
@example(ids=['b', 'a', ''], kind=pa.string(), row_group_size=None)
@example(ids=['a\x00', 'b'], kind=pa.string(), row_group_size=None)
@example(ids=['b', 'a', 'b'], kind=pa.string(), row_group_size=None)
@example(ids=['\u00e9', 'z', '10', '9'], kind=pa.large_string(), row_group_size=1)
def test_ids_in_byte_order_or_none(tmp_path_factory, ids, kind, row_group_size):
    """Both string types, read whole or in several row groups (chunks)."""
    source = _parquet(tmp_path_factory, pa.array(ids, kind), row_group_size)
    encoded = sorted(value.encode('utf-8') for value in ids)
    unique = bool(ids) and len(set(ids)) == len(ids)
    arrow = sorted_ids(source, 'key')
    assert (arrow.to_pylist() if arrow is not None else None) == (
        encoded if unique else None)
    rows = parquet_id_rows(source, 'key')
    plain = unique and all(value and '\x00' not in value for value in ids)
    if not plain:
        assert rows is None
    else:
        width = max(map(len, encoded))
        assert rows.dtype == np.uint8 and rows.tolist() == [
            list(value.ljust(width, b'\x00')) for value in encoded]


def test_ids_that_are_not_utf8_are_left_to_the_exact_reading(tmp_path_factory):
    """A parquet string column can hold bytes that are not UTF-8; pandas cannot read them
    as str, so the bulk reading declines."""
    column = pa.Array.from_buffers(pa.string(), 2, [
        None, pa.py_buffer(np.array([0, 1, 2], np.int32).tobytes()), pa.py_buffer(b'\xffa')])
    source = _parquet(tmp_path_factory, column)
    assert sorted_ids(source, 'key').to_pylist() == [b'a', b'\xff']
    assert parquet_id_rows(source, 'key') is None


def test_ids_not_plainly_strings_are_left_to_the_exact_reading(tmp_path_factory):
    for column in (pa.array([1, 2]), pa.array(['a', None]), pa.array([], pa.string())):
        source = _parquet(tmp_path_factory, column)
        assert sorted_ids(source, 'key') is None and parquet_id_rows(source, 'key') is None
