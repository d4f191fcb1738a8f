"""Shard discovery and the split of shards into parts (ranks)."""
import logging
import os

import pytest

from gluonbatch.curation import ImageTextPairDataset

from helpers import ID, make_dataset


def open_part(path, num_parts, part_index):
    return ImageTextPairDataset.from_webdataset(path, ID, num_parts=num_parts,
                                                part_index=part_index)


@pytest.mark.parametrize('num_shards', [1, 3, 5])
def test_parts_are_disjoint_and_cover_every_shard(tmp_path, num_shards):
    path = str(tmp_path)
    make_dataset(path, sizes=[2] * num_shards)
    everything = ImageTextPairDataset.from_webdataset(path, ID)
    for num_parts in range(1, 7):
        parts = [open_part(path, num_parts, part_index)
                 for part_index in range(num_parts)]
        tars = [tar for part in parts for tar in part.tar_files]
        assert sorted(tars) == everything.tar_files and len(set(tars)) == len(tars)
        ids = [key for part in parts for key in part.metadata[ID].compute()]
        assert sorted(ids) == everything.metadata[ID].compute().tolist()
        for part_index, part in enumerate(parts):
            assert (part.num_parts, part.part_index) == (num_parts, part_index)
            assert part.tar_files == everything.tar_files[part_index::num_parts]
            assert len(part) == 2 * len(part.tar_files)
            if len(part):
                assert part[len(part) - 1][2][ID] == part.metadata[ID].compute().iloc[-1]


def test_part_without_shards_is_empty(data, caplog):
    path, _ = data
    with caplog.at_level(logging.WARNING, logger='gluonbatch'):
        ds = open_part(path, 5, 4)
    assert len(ds) == 0 and ds.tar_files == [] and list(ds.metadata.columns) == [ID]
    assert 'part 4 of 5 gets no shard' in caplog.text
    with pytest.raises(IndexError):
        ds[0]


@pytest.mark.parametrize('part_index, num_parts, error, message', [
    (2, 2, ValueError, r'part_index must be in \[0, num_parts\); got part_index 2 with '
                       r'num_parts 2'),
    (-1, 2, ValueError, r'part_index must be an integer >= 0, got -1'),
    (0, 0, ValueError, r'num_parts must be an integer >= 1, got 0'),
    (0.0, 1, TypeError, r'part_index must be an integer, got 0.0 \(float\)'),
    (True, 2, TypeError, r'part_index must be an integer, got True \(bool\)'),
    (0, '2', TypeError, r"num_parts must be an integer, got '2' \(str\)")])
def test_bad_part_arguments(data, part_index, num_parts, error, message):
    with pytest.raises(error, match=message):
        open_part(data[0], num_parts, part_index)


def test_missing_directory_or_no_shards(tmp_path):
    with pytest.raises(FileNotFoundError, match='no dataset directory'):
        ImageTextPairDataset.from_webdataset(tmp_path / 'nope', ID)
    with pytest.raises(FileNotFoundError, match='holds no shards'):
        ImageTextPairDataset.from_webdataset(tmp_path, ID)


@pytest.mark.parametrize('remove, beside', [('00001.parquet', '00001.tar'),
                                            ('00001.tar', '00001.parquet')])
def test_shard_file_without_its_partner(data, remove, beside):
    path, _ = data
    os.remove(os.path.join(path, remove))
    with pytest.raises(FileNotFoundError, match='%s has no %s beside it'
                       % (os.path.join(path, beside), remove)):
        ImageTextPairDataset.from_webdataset(path, ID)


def test_index_without_its_tar(data):
    path, _ = data
    open(os.path.join(path, '00007.idx'), 'w').write('v1.2 0\n')
    with pytest.raises(FileNotFoundError, match='00007.idx has no 00007.tar'):
        ImageTextPairDataset.from_webdataset(path, ID)
