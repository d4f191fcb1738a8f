"""Shard discovery and the split of shards into parts (ranks)."""
import logging
import os

import pytest

from gluonbatch.webdataset import ImageTextPairDataset

from wds_testdata import ID, data, make_dataset


@pytest.mark.parametrize('num_shards', [1, 3, 5])
def test_ranks_are_disjoint_and_cover_every_shard(tmp_path, num_shards):
    path = str(tmp_path)
    make_dataset(path, sizes=[2] * num_shards)
    everything = ImageTextPairDataset.from_webdataset(path, ID)
    for world_size in range(1, 7):
        parts = [ImageTextPairDataset.from_webdataset(path, ID, rank=rank,
                                                      world_size=world_size)
                 for rank in range(world_size)]
        tars = [tar for part in parts for tar in part.tar_files]
        assert sorted(tars) == everything.tar_files and len(set(tars)) == len(tars)
        ids = [key for part in parts for key in part.metadata[ID]]
        assert sorted(ids) == list(everything.metadata[ID])
        for rank, part in enumerate(parts):
            assert part.tar_files == everything.tar_files[rank::world_size]
            assert len(part) == 2 * len(part.tar_files)
            if len(part):
                assert part[len(part) - 1][2][ID] == part.metadata[ID].iloc[-1]


def test_rank_without_shards_is_empty(data, caplog):
    path, _ = data
    with caplog.at_level(logging.WARNING, logger='gluonbatch.webdataset'):
        ds = ImageTextPairDataset.from_webdataset(path, ID, rank=4, world_size=5)
    assert len(ds) == 0 and ds.tar_files == [] and list(ds.metadata.columns) == [ID]
    assert 'gets no shard' in caplog.text
    with pytest.raises(IndexError):
        ds[0]


@pytest.mark.parametrize('rank, world_size, error', [
    (2, 2, ValueError), (-1, 2, ValueError), (0, 0, ValueError), (0.0, 1, TypeError),
    (True, 2, TypeError)])
def test_bad_rank_arguments(data, rank, world_size, error):
    with pytest.raises(error, match='rank|world_size'):
        ImageTextPairDataset.from_webdataset(data[0], ID, rank=rank, world_size=world_size)


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
