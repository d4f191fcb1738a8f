"""Writing metadata: save_metadata replaces a dataset's parquets atomically, keeps the rows
it was opened with, and leaves nothing half-written when it fails, is killed, or runs in
several ranks at once."""
import os
import pathlib
import subprocess
import sys
import threading

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gluonbatch.curation import ImageTextPairDataset

from helpers import ID, add_column, check_record, files, make_dataset, visible


def test_save_metadata_replaces_own_parquets_atomically(data, monkeypatch):
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['long'] = ds.metadata['caption'].str.len() > 33
    before = ds.metadata.compute()
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, 'replace',
                        lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    written = ds.save_metadata()
    assert written == [os.path.join(path, '%05d.parquet' % k) for k in range(3)]
    # the commit's journal is renamed into place first, then the shards' parquets
    assert os.path.basename(replaced[0][1]).startswith('.commit-')
    replaced = replaced[1:]
    assert sorted(dst for _, dst in replaced) == written  # one task per shard, in any order
    # written into a hidden directory of the dataset, then each renamed over the old file
    assert all(os.path.basename(os.path.dirname(src)).startswith('.partial-')
               and os.path.dirname(os.path.dirname(src)) == path
               and os.path.basename(src) == os.path.basename(dst) for src, dst in replaced)
    assert not [name for name in files(path) if name.startswith('.')]
    again = ImageTextPairDataset.from_webdataset(path, ID)
    pd.testing.assert_frame_equal(again.metadata.compute(), before)
    pd.testing.assert_frame_equal(ds.metadata.compute(), before)
    check_record(again, 3, expected[3])


def test_save_metadata_subset_and_other_path(data, tmp_path):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    out = tmp_path / 'meta'
    written = ds.save_metadata(out, columns=['score', 'width'])
    assert files(out) == ['00000.parquet', '00001.parquet', '00002.parquet']
    assert written == [str(out / name) for name in files(out)]
    second = pd.read_parquet(out / '00001.parquet')
    assert list(second.columns) == [ID, 'score', 'width']  # the id is always saved
    pd.testing.assert_frame_equal(second, ds.metadata[[ID, 'score', 'width']].compute()
                                  .iloc[3:5].reset_index(drop=True))
    ds.save_metadata(out, columns=[ID, 'caption'])
    assert list(pd.read_parquet(out / '00000.parquet').columns) == [ID, 'caption']
    with pytest.raises(ValueError, match=r"no column \['nope'\]"):
        ds.save_metadata(out, columns=['nope'])


def _tables(path):
    return {name: pq.read_table(os.path.join(path, name)) for name in files(path)
            if name.endswith('.parquet')}


def _add_embeddings(ds):
    ds.metadata['image_embedding'] = ds.metadata.map_partitions(
        lambda frame: pd.Series([np.full(4, float(i), np.float32) for i in frame.index],
                                index=frame.index, dtype=object),
        meta=('image_embedding', object))


def test_a_subset_saved_into_its_own_directory_keeps_the_other_columns(tmp_path):
    """Saving a few columns into the dataset's own files updates those and keeps every other
    column (values, Arrow types and the files' row order) and an earlier saved column."""
    path = str(tmp_path / 'data')
    make_dataset(path, shuffle_seed=3)  # parquet rows not in id order
    before = _tables(path)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    _add_embeddings(ds)
    ds.save_metadata(columns=['image_embedding'])
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['aesthetic_score'] = ds.metadata['width'] * 0.5
    ds.metadata['score'] = ds.metadata['score'] + 1  # a column the files have: in place
    ds.save_metadata(columns=['aesthetic_score', 'score'])
    after = _tables(path)
    for name, table in after.items():
        old = before[name]
        assert table.column_names == [ID, 'caption', 'width', 'height', 'score', 'shard',
                                      'image_embedding', 'aesthetic_score']
        for column in (ID, 'caption', 'width', 'height', 'shard'):
            assert table.column(column).equals(old.column(column)), (name, column)
            assert table.schema.field(column) == old.schema.field(column)
        assert table.column('score').to_pylist() == [
            v + 1 for v in old.column('score').to_pylist()]
        kind = table.schema.field('image_embedding').type  # the earlier save's column
        assert pa.types.is_fixed_size_list(kind) and kind.list_size == 4
        assert kind.value_type == pa.float32()
    frame = ImageTextPairDataset.from_webdataset(path, ID).metadata.compute()
    assert frame['width'].tolist() == ds.metadata['width'].compute().tolist()
    np.testing.assert_array_equal(frame['aesthetic_score'], frame['width'] * 0.5)
    np.testing.assert_array_equal(np.stack(frame['image_embedding']),
                                  np.repeat(np.arange(9, dtype=np.float32)[:, None], 4, 1))
    assert list(ds.metadata.columns) == list(frame.columns)  # reads the files it wrote


def test_drop_other_columns_writes_only_the_subset(data):
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    _add_embeddings(ds)
    ds.save_metadata(columns=['image_embedding'])
    ds.metadata['aesthetic_score'] = ds.metadata['width'] * 0.5
    ds.save_metadata(columns=['aesthetic_score'], drop_other_columns=True)
    for table in _tables(path).values():
        assert table.column_names == [ID, 'aesthetic_score']
    assert list(ds.metadata.columns) == [ID, 'aesthetic_score']
    with pytest.raises(TypeError, match='drop_other_columns must be a bool, got str'):
        ds.save_metadata(columns=[ID], drop_other_columns='yes')


def test_a_subset_saved_elsewhere_is_only_the_subset(data, tmp_path):
    """Another directory gets only the columns listed (NeMo Curator's meaning); the
    dataset's own files are left as they were."""
    path, _ = data
    own = {name: (pathlib.Path(path) / name).read_bytes() for name in files(path)}
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['aesthetic_score'] = ds.metadata['width'] * 0.5
    out = tmp_path / 'scores'
    ds.save_metadata(out, columns=['aesthetic_score'])
    for table in _tables(out).values():
        assert table.column_names == [ID, 'aesthetic_score']
    assert {name: (pathlib.Path(path) / name).read_bytes() for name in files(path)} == own
    assert 'aesthetic_score' in ds.metadata.columns  # not reopened: its files did not change


def test_metadata_rows_must_stay(data):
    """Columns may be added, rows not: the writers check each shard's rows when they compute
    them, the partitions (one per shard) and the metadata's type at the call."""
    path, expected = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    lazy = ds.metadata
    parquets = {name: open(os.path.join(path, name), 'rb').read()
                for name in files(path) if name.endswith('.parquet')}
    out = os.path.join(path, 'out')
    ds.metadata = lazy.map_partitions(lambda frame: frame.iloc[::-1])
    with pytest.raises(ValueError, match=r'metadata of .*\.parquet has .*rows were added, '
                                         r'removed or reordered, or ids changed; add columns, '
                                         r'but keep the rows'):
        ds.save_metadata()
    ds.metadata = lazy[lazy[ID] != expected[0]['key']]  # record 0 filtered out
    with pytest.raises(ValueError, match=r'metadata of .*00000\.parquet has 2 rows .*it had 3 '
                                         r'.*rows were added, removed or reordered, or ids '
                                         r'changed; add columns, but keep the rows'):
        ds.to_webdataset(out, None)
    assert not os.path.exists(out) or visible(out) == []
    ds.metadata = lazy.repartition(npartitions=1)
    with pytest.raises(ValueError, match='keep one partition per shard'):
        ds.save_metadata()
    ds.metadata = lazy.compute()
    for write in (ds.save_metadata, lambda: ds.to_webdataset(out, None)):
        with pytest.raises(TypeError, match='metadata must be a Dask DataFrame'):
            write()
    assert {name: open(os.path.join(path, name), 'rb').read() for name in parquets} == parquets
    ds.metadata = lazy
    add_column(ds, 'number', range(9))
    assert len(ds.to_webdataset(out, None)) == 1  # unchanged rows and a column: written


@pytest.mark.parametrize('columns', [None, ['wide']])
def test_a_failed_save_changes_no_parquet(data, columns):
    """Rows are checked per shard while the shards are written; one bad shard must leave
    every file as it was, whether whole files or columns merged into them are written."""
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    before = {name: (pathlib.Path(path) / name).read_bytes() for name in files(path)
              if name.endswith('.parquet')}
    ds.metadata['wide'] = ds.metadata['width'] > 10
    ds.metadata = ds.metadata.map_partitions(lambda frame: frame[frame.index != 1])  # a row
    with pytest.raises(ValueError, match=r'00000\.parquet has 2 rows'):
        ds.save_metadata(columns=columns)
    assert {name: (pathlib.Path(path) / name).read_bytes() for name in before} == before
    # a task still running when the error arrived may leave a hidden file: the next run
    # into the directory removes it
    ImageTextPairDataset.from_webdataset(path, ID).save_metadata()
    assert visible(path) == files(path)


def test_reordered_or_changed_ids_are_refused(data, tmp_path):
    """Rows moved within a shard (index kept) or ids rewritten would give one record's
    image another's metadata."""
    path, _ = data
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    lazy = ds.metadata
    ds.metadata = lazy.map_partitions(lambda frame: frame.iloc[::-1].set_axis(frame.index))
    with pytest.raises(ValueError, match='ids out of record order'):
        ds.save_metadata(tmp_path / 'saved')
    with pytest.raises(ValueError, match='ids out of record order'):
        ds.to_webdataset(tmp_path / 'reordered', None)
    ds.metadata = lazy.assign(**{ID: lazy[ID] + 'x'})  # in order, but not the records'
    with pytest.raises(ValueError, match="ids that are not its records' ids"):
        ds.to_webdataset(tmp_path / 'renamed', None)
    parquets = sorted(p for p in os.listdir(path) if p.endswith('.parquet'))
    saved = {name: open(os.path.join(path, name), 'rb').read() for name in parquets}
    for target in (None, tmp_path / 'renamed-meta'):  # its own files, and elsewhere
        with pytest.raises(ValueError, match=r"\.parquet has ids that are not its records'"):
            ds.save_metadata(target)
    assert {name: open(os.path.join(path, name), 'rb').read() for name in parquets} == saved
    assert not (tmp_path / 'reordered').exists() or visible(tmp_path / 'reordered') == []


COMPUTING = threading.Event()  # set once the slow rank is inside its run
OTHER_SAVED = threading.Event()  # set once the other rank's save has returned


def _double(frame):
    return frame['score'] * 2


def _slow_double(frame):
    COMPUTING.set()  # this rank's run has made its hidden directory
    # the run stays open until the other rank has saved (the timeout only bounds a hang)
    assert OTHER_SAVED.wait(60), 'the other rank did not save while this one computed'
    return _double(frame)


def test_ranks_saving_at_once_do_not_remove_each_others_work(tmp_path):
    """Two ranks save the metadata of one directory at once (one adds a column, the other
    saves it as it is, so neither changes what the other reads): one rank's run must not
    take the other's hidden directory for a killed run's leftovers."""
    make_dataset(str(tmp_path), sizes=(2, 3, 2, 1))
    COMPUTING.clear()
    OTHER_SAVED.clear()
    errors = []

    def save(part, copy):
        try:
            ds = ImageTextPairDataset.from_webdataset(tmp_path, ID)
            if copy is not None:
                ds.metadata['double'] = ds.metadata.map_partitions(copy,
                                                                   meta=('double', 'f8'))
            with dask.config.set(scheduler='synchronous'):
                ds.save_metadata()
        except Exception as err:  # reported below, with its rank
            errors.append((part, err))

    first = threading.Thread(target=save, args=(0, _slow_double))
    first.start()
    assert COMPUTING.wait(60), errors
    try:
        save(1, None)  # while rank 0 is still computing
    finally:
        OTHER_SAVED.set()
    first.join()
    assert errors == []
    frame = ImageTextPairDataset.from_webdataset(tmp_path, ID).metadata.compute()
    np.testing.assert_array_equal(frame['double'], frame['score'] * 2)
    assert visible(tmp_path) == files(tmp_path)  # nothing hidden left


KILLED_SAVE = '''
import os, sys
from gluonbatch.curation import ImageTextPairDataset

def die(frame):
    if frame.index[0] > 0:
        os._exit(3)  # killed mid-run: no cleanup
    return frame['score']

ds = ImageTextPairDataset.from_webdataset(sys.argv[1], 'key')
ds.metadata['copy'] = ds.metadata.map_partitions(die, meta=('copy', 'f8'))
ds.save_metadata()
'''


def test_the_next_run_removes_what_a_killed_run_left(tmp_path):
    make_dataset(str(tmp_path), sizes=(2, 3))
    before = {name: (tmp_path / name).read_bytes() for name in files(tmp_path)}
    killed = subprocess.run([sys.executable, '-c', KILLED_SAVE, str(tmp_path)],
                            capture_output=True, text=True, timeout=600)
    assert killed.returncode == 3, killed.stderr
    assert {name: (tmp_path / name).read_bytes() for name in visible(tmp_path)} == before
    assert visible(tmp_path) != files(tmp_path)  # its hidden directory is still there
    ImageTextPairDataset.from_webdataset(tmp_path, ID).save_metadata()
    assert visible(tmp_path) == files(tmp_path)
