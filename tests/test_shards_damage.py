"""A shard whose tar and index disagree: the error says which file is damaged (the tar cut
short or overwritten, or the index stale) and what to do, through the dataset and
``gluonbatch wds inspect``."""
import os
import re
import shutil
import tarfile

import pytest

from gluonbatch.cli import main
from gluonbatch.curation import ImageTextPairDataset, make_example_dataset

RECORDS = 4  # per shard


@pytest.fixture
def dataset(tmp_path):
    return make_example_dataset(str(tmp_path / 'data'), num_shards=2,
                                samples_per_shard=RECORDS, index=True)


def tar_members(tar_path):
    with tarfile.open(tar_path) as tar:
        return tar.getmembers()


def errors_of_every_record(path):
    """The message of each record of the second shard that fails to read, through a
    freshly opened dataset."""
    messages = []
    for i in range(RECORDS, 2 * RECORDS):
        ds = ImageTextPairDataset.from_webdataset(path, 'key')
        with pytest.raises(ValueError) as raised:
            ds[i]
        messages.append(str(raised.value))
    return messages


def inspect_errors(path, capsys):
    assert main(['wds', 'inspect', path, '--records', str(2 * RECORDS)]) == 1
    out = capsys.readouterr().out
    return [line for line in out.splitlines() if 'error:' in line]


def truncate(path):
    tar = os.path.join(path, '00001.tar')
    size = os.path.getsize(tar)
    os.truncate(tar, size // 2 // 512 * 512)
    return tar, size // 2 // 512 * 512


def test_a_truncated_tar_is_named_with_its_sizes(dataset, capsys):
    tar, size = truncate(dataset)
    expected = (r'^%s is truncated: it has %d bytes but its index %s lists members up to '
                r'byte \d+; restore or re-copy it \(its index .* is not at fault\)$'
                % (re.escape(tar), size, re.escape(tar[:-4] + '.idx')))
    for message in errors_of_every_record(dataset):
        assert re.match(expected, message), message
        assert 'does not match' not in message
    lines = inspect_errors(dataset, capsys)
    assert len(lines) == RECORDS
    assert all(re.search(expected[1:], line) for line in lines), lines


def test_an_overwritten_member_header_names_the_member_and_offset(dataset, capsys):
    tar = os.path.join(dataset, '00001.tar')
    member = tar_members(tar)[4]  # the second record's caption
    with open(tar, 'r+b') as handle:
        handle.seek(member.offset)
        handle.write(b'\xff' * 512)
    ds = ImageTextPairDataset.from_webdataset(dataset, 'key')
    ds[RECORDS]  # the first record of the shard still reads
    with pytest.raises(ValueError) as raised:
        ds[RECORDS + 1]
    expected = (r'^%s is corrupt: no tar header at byte %d, where its index .*00001\.idx '
                r'puts the headers of member %r \(data at byte %d\); the tar was overwritten '
                r'or damaged; restore or re-copy it' % (re.escape(tar), member.offset,
                                                        member.name, member.offset_data))
    assert re.match(expected, str(raised.value)), str(raised.value)
    lines = inspect_errors(dataset, capsys)
    assert len(lines) == 1 and re.search(expected[1:], lines[0]), lines


def test_an_index_of_another_shard_is_stale_and_says_how_to_rebuild(dataset, capsys):
    shutil.copy(os.path.join(dataset, '00000.idx'), os.path.join(dataset, '00001.idx'))
    tar = os.path.join(dataset, '00001.tar')
    expected = (r'%s reads to its end as a tar on its own \(%d members\) and they are not what '
                r'the index lists: the index .*00001\.idx is stale, rebuild it with '
                r'`gluonbatch wds index %s` \(or gluonbatch\.shards\.write_index\)$'
                % (re.escape(tar), 3 * RECORDS, re.escape(tar)))
    for message in errors_of_every_record(dataset):
        assert re.search(expected, message), message
    lines = inspect_errors(dataset, capsys)
    assert len(lines) == RECORDS and all(re.search(expected, line) for line in lines), lines
    # and the advice works
    assert main(['wds', 'index', tar]) == 0
    ImageTextPairDataset.from_webdataset(dataset, 'key')[RECORDS]


def test_a_parquet_of_another_shard_is_named_when_tar_and_index_agree(dataset):
    shutil.copy(os.path.join(dataset, '00000.parquet'), os.path.join(dataset, '00001.parquet'))
    with pytest.raises(ValueError, match=r'00001\.tar and its index agree, so the parquet is '
                                         r'not the one written with them: restore it$'):
        ImageTextPairDataset.from_webdataset(dataset, 'key')[RECORDS]
