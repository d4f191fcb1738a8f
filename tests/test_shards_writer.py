"""Writing shards: the resharding writer (to_webdataset)."""
import errno
import json
import logging
import math
import os
import shutil
import tarfile
import time
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gluonbatch.shards.copier import BATCH_BYTES
from gluonbatch.curation import ImageTextPairDataset

from helpers import (ID, add_column, cut, examples, files, make_dataset, members_of, record,
                     tar_infos, visible, write_shard, write_tar)


def check_resharded(out, source_records, mask, samples_per_shard, max_shards, old_id_col,
                    written):
    """The new dataset: shard sizes, ids by the rule, member bytes and metadata kept."""
    kept = [rec for rec, keep in zip(source_records, mask) if keep]
    digits = math.ceil(math.log10(samples_per_shard)) if samples_per_shard > 1 else 0
    num_shards = -(-len(kept) // samples_per_shard)
    stems = ['%0*d' % (max_shards, k) for k in range(num_shards)]
    assert written == [os.path.join(out, stem + '.tar') for stem in stems]
    assert files(out) == sorted(stem + ext for stem in stems
                                for ext in ('.tar', '.parquet', '.idx'))
    new = ImageTextPairDataset.from_webdataset(out, ID)
    scanned = ImageTextPairDataset.from_webdataset(out, ID, use_index=False)
    assert new.metadata.npartitions == num_shards
    meta = new.metadata.compute()
    pd.testing.assert_frame_equal(meta, scanned.metadata.compute())
    expected_ids = ['%0*d' % (max_shards + digits, sample + 10 ** digits * shard)
                    for shard in range(num_shards)
                    for sample in range(min(samples_per_shard,
                                            len(kept) - shard * samples_per_shard))]
    assert meta[ID].tolist() == expected_ids
    for i, (rec, new_id) in enumerate(zip(kept, expected_ids)):
        raw = new.read_raw(i)
        assert {ext: raw[ext] for ext in ('jpg', 'txt')} == {ext: rec[ext]
                                                            for ext in ('jpg', 'txt')}
        # the JSON carries the new id, like the parquet and the member names
        want_json = dict(json.loads(rec['json']), **{ID: new_id})
        if old_id_col:
            want_json[old_id_col] = rec['key']
        assert json.loads(raw['json']) == want_json and new[i][2][ID] == new_id
        assert meta['score'][i] == rec['row']['score']
        if old_id_col:
            assert meta[old_id_col][i] == rec['key']
    with tarfile.open(written[0]) as tar:
        assert tar.getnames()[:3] == ['%s.%s' % (expected_ids[0], ext)
                                      for ext in ('jpg', 'txt', 'json')]
    return new


@pytest.fixture(scope='module')
def source(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('source'))
    return path, make_dataset(path, sizes=(4, 3, 5))


@settings(max_examples=examples(25), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mask=st.lists(st.booleans(), min_size=12, max_size=12).filter(any),
       samples_per_shard=st.integers(1, 13), max_shards=st.integers(2, 3),
       old_id_col=st.sampled_from([None, 'old_key']))
def test_reshard_keeps_filtered_records_renumbered(source, tmp_path_factory, mask,
                                                   samples_per_shard, max_shards, old_id_col):
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    add_column(ds, 'keep', mask)  # a column added in memory
    out = str(tmp_path_factory.mktemp('out'))
    written = ds.to_webdataset(out, 'keep', samples_per_shard=samples_per_shard,
                               max_shards=max_shards, old_id_col=old_id_col)
    new = check_resharded(out, records, mask, samples_per_shard, max_shards, old_id_col,
                          written)
    assert new.metadata['keep'].compute().all()


@pytest.mark.parametrize('samples_per_shard', [1, 5, 10, 10000])
def test_reshard_default_layout(source, tmp_path, samples_per_shard):
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    written = ds.to_webdataset(tmp_path / 'out', None, samples_per_shard=samples_per_shard)
    check_resharded(str(tmp_path / 'out'), records, [True] * 12, samples_per_shard, 5, None,
                    written)
    if samples_per_shard == 10000:  # DESIGN's example: shard 0, 4-digit record numbers
        assert ImageTextPairDataset.from_webdataset(tmp_path / 'out', ID).record_id(11) \
            == '000000011'


def test_reshard_with_nothing_kept_writes_nothing(source, tmp_path, caplog):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['keep'] = False
    with caplog.at_level(logging.INFO, logger='gluonbatch'):
        assert ds.to_webdataset(tmp_path / 'new', 'keep') == []
    assert not (tmp_path / 'new').exists()
    assert 'nothing written' in caplog.text
    (tmp_path / 'empty').mkdir()
    assert ds.to_webdataset(tmp_path / 'empty', 'keep', samples_per_shard=1) == []
    assert files(tmp_path / 'empty') == []


def test_reshard_refuses_the_source_directory(source, tmp_path):
    path, _ = source
    before = files(path)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    os.symlink(path, tmp_path / 'link')
    for target in (path, path + '/', os.path.relpath(path), str(tmp_path / 'link')):
        with pytest.raises(ValueError, match='is the source directory'):
            ds.to_webdataset(target, None)
    assert files(path) == before


def test_reshard_refuses_bad_arguments_before_writing(source, tmp_path):
    path, _ = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    out = tmp_path / 'out'
    with pytest.raises(ValueError, match="no filter column 'nope'"):
        ds.to_webdataset(out, 'nope')
    ds.metadata['score_kept'] = ds.metadata['score']
    with pytest.raises(TypeError, match="filter column 'score_kept' must be bool"):
        ds.to_webdataset(out, 'score_kept')
    with pytest.raises(ValueError, match="old_id_col 'caption' is already a column"):
        ds.to_webdataset(out, None, old_id_col='caption')
    with pytest.raises(ValueError, match='need 12 shards, more than max_shards=1'):
        ds.to_webdataset(out, None, samples_per_shard=1, max_shards=1)
    with pytest.raises(ValueError, match='samples_per_shard must be an integer >= 1, got 0'):
        ds.to_webdataset(out, None, samples_per_shard=0)
    with pytest.raises(TypeError, match=r'max_shards must be an integer, got 2.0 \(float\)'):
        ds.to_webdataset(out, None, max_shards=2.0)
    assert not out.exists()
    out.mkdir()
    (out / '00003.parquet').write_bytes(b'')
    with pytest.raises(ValueError, match='already holds a dataset'):
        ds.to_webdataset(out, None)
    assert files(out) == ['00003.parquet']
    # exactly 10**max_shards shards fit
    written = ds.to_webdataset(tmp_path / 'ten', None, samples_per_shard=2, max_shards=1)
    assert len(written) == 6


def test_reshard_failure_leaves_no_shard_and_a_rerun_completes(source, tmp_path):
    """A record that cannot be read (its tar cut short after its shard was first used) stops
    the writer; shards are renamed into place only when all were written, so no shard file
    is left, nor any temporary file. Once the tar is restored, a run into the same
    directory writes everything."""
    path, records = source
    copy = str(tmp_path / 'source')
    shutil.copytree(path, copy)
    ds = ImageTextPairDataset.from_webdataset(copy, ID)
    assert ds.record_id(4) == records[4]['key']  # the first use of shard 1
    tar = os.path.join(copy, '00001.tar')
    cut(tar, tar_infos(tar)[6].offset)  # record 6 (the third of shard 1) and after
    out = tmp_path / 'out'
    with pytest.raises(ValueError, match='truncated after the dataset was opened'):
        ds.to_webdataset(out, None, samples_per_shard=4)
    assert not out.exists() or visible(out) == []
    shutil.copyfile(os.path.join(path, '00001.tar'), tar)
    written = ds.to_webdataset(out, None, samples_per_shard=4)
    check_resharded(str(out), records, [True] * 12, 4, 5, None, written)


@pytest.mark.parametrize('fails', ['at once', 'later'])
def test_a_failed_write_raises_its_error_and_leaves_no_shard(source, tmp_path, monkeypatch,
                                                             fails):
    """The batches are written on the writer's own thread: a write that fails (a full disk)
    raises its own error from to_webdataset, and no shard is left."""
    path, records = source
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    real_writev, calls = os.writev, []

    def full_disk(fd, buffers):
        calls.append(fd)
        if fails == 'at once' or len(calls) > 1:
            raise OSError(errno.ENOSPC, 'No space left on device')
        return real_writev(fd, buffers)
    monkeypatch.setattr(os, 'writev', full_disk)
    out = tmp_path / 'out'
    with pytest.raises(OSError) as raised:
        ds.to_webdataset(out, None, samples_per_shard=4)
    assert raised.value.errno == errno.ENOSPC and calls
    assert not out.exists() or visible(out) == []
    monkeypatch.setattr(os, 'writev', real_writev)
    assert len(ds.to_webdataset(out, None, samples_per_shard=4)) == -(-len(records) // 4)


def test_reshard_streams_records_in_bounded_batches(tmp_path, monkeypatch):
    """Records are copied in batches of at most BATCH_BYTES of source bytes: peak memory
    stays a few batches while shards of 50 records of 1 MiB each are written, every byte
    arrives, and each file is renamed into place."""
    path = str(tmp_path / 'big')
    records = [record(0, k) for k in range(80)]
    rng = np.random.default_rng(0)
    os.makedirs(path)
    write_tar(os.path.join(path, '00000.tar'),
              [member for rec in records for member in members_of([rec]) + [
                  (rec['key'] + '.bin', rng.bytes(1 << 20))]])
    pd.DataFrame([rec['row'] for rec in records]).to_parquet(os.path.join(path, '00000.parquet'))
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    replaced = []
    real_replace = os.replace
    monkeypatch.setattr(os, 'replace',
                        lambda src, dst: (replaced.append((src, dst)), real_replace(src, dst)))
    real_writev = os.writev

    def slow_writev(fd, buffers):  # a slow disk: a batch's bytes leave late
        time.sleep(0.05)
        return real_writev(fd, buffers)
    monkeypatch.setattr(os, 'writev', slow_writev)
    out = str(tmp_path / 'out')
    tracemalloc.start()
    try:
        ds.to_webdataset(out, None, samples_per_shard=50)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # three batches' buffers (the next one being read, this one, the one before being
    # written; each up to a batch and a record), and a few MiB more: far below the 80 MiB
    # of records
    assert peak < 4 * BATCH_BYTES + (4 << 20), \
        'peak %.1f MiB: more than three batches held in memory' % (peak / 2 ** 20)
    # each batch arrives whole: no buffer was reused while it was still being read or
    # written
    copied = ImageTextPairDataset.from_webdataset(out, ID)
    assert [copied.read_raw(i)['bin'] for i in range(len(copied))] == \
        [ds.read_raw(i)['bin'] for i in range(len(ds))]
    # the commit's journal first, then each shard's files renamed out of the run's hidden
    # directory, the tar first
    assert os.path.dirname(replaced[0][1]) == out and \
        os.path.basename(replaced[0][1]).startswith('.commit-')
    replaced = replaced[1:]
    stage = os.path.dirname(replaced[0][0])
    assert os.path.dirname(stage) == str(out) and \
        os.path.basename(stage).startswith('.partial-')
    assert replaced == [(os.path.join(stage, '.%s.tmp' % name), os.path.join(out, name))
                        for stem in ('00000', '00001')
                        for name in (stem + '.tar', stem + '.idx', stem + '.parquet')]


def test_reshard_refuses_a_record_whose_json_is_not_an_object(tmp_path):
    records = [record(0, k) for k in range(3)]
    records[2]['json'] = b'[1, 2]'
    os.makedirs(tmp_path / 'src')
    write_shard(str(tmp_path / 'src'), '00000', records)
    ds = ImageTextPairDataset.from_webdataset(tmp_path / 'src', ID)
    out = tmp_path / 'out'
    with pytest.raises(ValueError, match=r"the .json member of record '00000000?2' of "
                                         r".*src/00000\.tar holds a list, not an object"):
        ds.to_webdataset(out, None, samples_per_shard=2)
    assert not out.exists() or visible(out) == []  # no shard, not even the complete first one


