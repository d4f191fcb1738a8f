"""Reading back what the VOC and COCO converters wrote, through the shard reader, and the
files of a directory tree (to show that a failed conversion wrote nothing)."""
import json
import os

import numpy as np

from gluonbatch.curation import ImageTextPairDataset

from helpers import ID


def read_back(path):
    """``(manifest, records, rows)`` of a converted dataset: per record its members
    (``{ext: bytes}``, the json decoded, and its ``key``) and its parquet row (lists as
    lists)."""
    with open(os.path.join(path, 'detection.json'), encoding='utf-8') as handle:
        manifest = json.load(handle)
    ds = ImageTextPairDataset.from_webdataset(path, ID)
    records = []
    for i in range(len(ds)):
        members = ds.read_raw(i)
        members['json'] = json.loads(members['json'])
        members['key'] = ds.record_id(i)
        records.append(members)
    rows = [{name: value.tolist() if isinstance(value, np.ndarray) else value
             for name, value in row.items()}  # a list column reads as arrays
            for row in ds.metadata.compute().to_dict('records')]
    return manifest, records, rows


def label_of(annotations):
    """The record's label array, by its dtype (None where gluoncv's is None)."""
    if annotations['label'] is None:
        return None
    return np.array(annotations['label'], dtype=annotations['label_dtype'])


def assert_same_label(ours, theirs, where):
    theirs = None if theirs is None else np.asarray(theirs)
    if theirs is None:
        assert ours is None, where
        return
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape, (where, ours, theirs)
    np.testing.assert_array_equal(ours, theirs, err_msg=str(where))


def tree(root):
    """Every path under ``root`` (files and directories, hidden ones too) with the bytes of
    the files."""
    found = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            found[os.path.relpath(os.path.join(folder, name), root)] = None
        for name in names:
            path = os.path.join(folder, name)
            with open(path, 'rb') as handle:
                found[os.path.relpath(path, root)] = handle.read()
    return found


def keys(manifest, samples_per_shard):
    """The record keys a converted dataset of ``manifest``'s shards has."""
    digits = len(str(samples_per_shard - 1)) if samples_per_shard > 1 else 0
    return ['%0*d' % (5 + digits, position + 10 ** digits * number)
            for number, (_, count) in enumerate(manifest['shards'])
            for position in range(count)]
