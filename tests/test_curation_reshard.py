"""Resharding details beyond the writer's tests: input shards whose staged rows have
column types of their own."""
import os

import pandas as pd

from gluonbatch.curation import ImageTextPairDataset, make_example_dataset


def test_shards_whose_columns_read_as_different_types_reshard_into_one(tmp_path):
    """A column all nulls in one shard and strings in another, integers in one and floats
    (with a null) in another: pandas gives each shard's rows their own types, and the
    output shard holds both, as a pandas concatenation would."""
    source = make_example_dataset(tmp_path / 'src', num_shards=2, samples_per_shard=3)
    columns = {'00000': {'note': [None, None, None], 'count': [1, None, 3]},
               '00001': {'note': ['a', None, 'c'], 'count': [4, 5, 6]}}
    for stem, added in columns.items():
        path = os.path.join(source, stem + '.parquet')
        pd.read_parquet(path).assign(**added).to_parquet(path)
    ds = ImageTextPairDataset.from_webdataset(source, 'key')
    [tar] = ds.to_webdataset(tmp_path / 'out', None, samples_per_shard=6)
    frame = pd.read_parquet(tar[:-len('.tar')] + '.parquet')
    assert frame['note'].tolist() == [None, None, None, 'a', None, 'c']
    assert frame['count'].tolist()[:1] + frame['count'].tolist()[2:] == [1, 3, 4, 5, 6]
    assert pd.isna(frame['count'][1])
    resharded = ImageTextPairDataset.from_webdataset(tmp_path / 'out', 'key')
    assert resharded.metadata.compute()['note'].tolist() == frame['note'].tolist()
