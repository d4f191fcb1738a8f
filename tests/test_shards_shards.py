"""Shard discovery: the shard files of a directory, and their errors."""
import os

import pytest

from gluonbatch.curation import ImageTextPairDataset

from helpers import ID


def test_a_dataset_does_not_split_itself(data):
    """Every rank opens the whole dataset and takes its part with a sampler."""
    import gluonbatch.shards.files as files

    path, _ = data
    with pytest.raises(TypeError, match='num_parts'):
        ImageTextPairDataset.from_webdataset(path, ID, num_parts=2, part_index=0)
    whole = ImageTextPairDataset.from_webdataset(path, ID)
    assert not hasattr(whole, 'num_parts') and not hasattr(whole, 'part_index')
    assert 'part_index' not in repr(whole)
    assert not hasattr(files, 'select_part')


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
