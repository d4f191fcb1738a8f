"""``gluonbatch.shards.verify`` and ``gluonbatch wds verify``: a healthy dataset has no
problems, and each kind of damage is one problem naming the shard, the member and what
is wrong."""
import importlib
import os
import re
import shutil
import tarfile

import pandas as pd
import pytest

from gluonbatch.cli import main
from gluonbatch.shards import Problem, verify
from gluonbatch.curation import make_example_dataset

RECORDS = 4  # per shard


@pytest.fixture(params=[True, False], ids=['idx', 'scanned'])
def index(request):
    return request.param


@pytest.fixture
def dataset(tmp_path, index):
    return make_example_dataset(str(tmp_path / 'data'), num_shards=2,
                                samples_per_shard=RECORDS, index=index)


def member(path, stem, number):
    """Member ``number`` (in tar order) of shard ``stem``."""
    with tarfile.open(os.path.join(path, stem + '.tar')) as tar:
        return tar.getmembers()[number]


def overwrite(path, stem, at, data):
    with open(os.path.join(path, stem + '.tar'), 'r+b') as handle:
        handle.seek(at)
        handle.write(data)


def only_problem(path, **kwargs):
    problems = verify(path, **kwargs)
    assert len(problems) == 1, problems
    assert isinstance(problems[0], Problem)
    return problems[0]


def cli(capsys, *args):
    """``(exit code, stdout lines)`` of ``gluonbatch wds verify``."""
    code = main(['wds', 'verify'] + list(args))
    return code, capsys.readouterr().out.splitlines()


def test_a_healthy_dataset_has_no_problems(dataset, capsys):
    report = verify(dataset)
    assert report == [] and (report.shards, report.records) == (2, 2 * RECORDS)
    assert verify(dataset, decode=True) == []
    code, lines = cli(capsys, dataset, '--decode')
    assert code == 0
    assert len(lines) == 1 and re.match(r'.*data: 2 shards, %d records, [\d.]+ MB of tar: no '
                                        r'problems \(images decoded\)$' % (2 * RECORDS),
                                        lines[0]), lines


def test_the_progress_bar_counts_shards(dataset, capsys):
    assert verify(dataset, progress=True) == []
    assert re.search(r'verify: 100%.* 2/2', capsys.readouterr().err)


def test_a_truncated_tar(dataset, index, capsys):
    tar = os.path.join(dataset, '00001.tar')
    size = os.path.getsize(tar) // 2 // 512 * 512
    os.truncate(tar, size)
    problem = only_problem(dataset)
    assert (problem.shard, problem.member) == ('00001', None)
    if index:
        assert re.match(r'%s is truncated: it has %d bytes but its index .*00001\.idx lists '
                        r'members up to byte \d+; restore or re-copy it \(its index .* is not '
                        r'at fault\)$' % (re.escape(tar), size), problem.message), problem
    else:
        assert re.match(r'%s is (truncated|not a readable uncompressed tar)' % re.escape(tar),
                        problem.message), problem
    code, lines = cli(capsys, dataset)
    assert code == 1 and lines[0] == problem.message
    assert re.match(r'.*data: 1 problem in 2 shards', lines[1]), lines


def test_a_tar_without_its_end_blocks_is_truncated(dataset, index, capsys):
    """Every member is there but the end-of-archive blocks are cut off: with an index, the
    dataset reads every record (inspect is happy)."""
    tar = os.path.join(dataset, '00000.tar')
    last = member(dataset, '00000', 3 * RECORDS - 1)
    os.truncate(tar, last.offset_data + -(-last.size // 512) * 512)
    assert main(['wds', 'inspect', dataset, '--records', str(2 * RECORDS)]) == (0 if index else 1)
    capsys.readouterr()
    problem = only_problem(dataset)
    assert (problem.shard, problem.member) == ('00000', None)
    innocent = r' \(its index .*00000\.idx is not at fault\)' if index else ''
    assert re.match(r'%s is truncated: it ends at byte \d+ without the end-of-archive blocks; '
                    r'restore or re-copy it%s$' % (re.escape(tar), innocent),
                    problem.message), problem


def test_an_overwritten_member_header(dataset, index):
    caption = member(dataset, '00001', 4)  # the second record's caption
    overwrite(dataset, '00001', caption.offset, b'\xff' * 512)
    problem = only_problem(dataset)
    assert problem.shard == '00001'
    tar = re.escape(os.path.join(dataset, '00001.tar'))
    if index:
        assert problem.member == caption.name
        assert re.match(r"%s is corrupt: no tar header at byte %d, where its index .*00001\.idx "
                        r"puts the headers of member '%s' \(data at byte %d\); the tar was "
                        r"overwritten or damaged; restore or re-copy it"
                        % (tar, caption.offset, caption.name, caption.offset_data),
                        problem.message), problem
    else:  # the tar's own headers: it stops reading there
        assert problem.member is None
        assert re.match(r'%s is corrupt: unreadable tar header at byte %d'
                        % (tar, caption.offset), problem.message), problem


def test_a_stale_index(tmp_path, capsys):
    path = make_example_dataset(str(tmp_path), num_shards=2, samples_per_shard=RECORDS,
                                index=True)
    shutil.copy(os.path.join(path, '00000.idx'), os.path.join(path, '00001.idx'))
    problem = only_problem(path)
    assert (problem.shard, problem.member) == ('00001', None)
    tar = re.escape(os.path.join(path, '00001.tar'))
    assert re.search(r'%s reads to its end as a tar on its own \(%d members\) and they are not '
                     r'what the index lists: the index .*00001\.idx is stale, rebuild it with '
                     r'`gluonbatch wds index %s`' % (tar, 3 * RECORDS, tar), problem.message)
    assert cli(capsys, path)[0] == 1
    assert main(['wds', 'index', os.path.join(path, '00001.tar')]) == 0
    assert verify(path) == []


def test_a_member_appended_after_the_index_was_written(tmp_path):
    path = make_example_dataset(str(tmp_path), num_shards=1, samples_per_shard=RECORDS,
                                index=True)
    with tarfile.open(os.path.join(path, '00000.tar'), 'a') as tar:
        tar.addfile(tarfile.TarInfo('000000.extra'))
    problem = only_problem(path)
    assert problem.shard == '00000'
    assert re.search(r'unreadable tar header at byte \d+ .*: the index .*00000\.idx is stale, '
                     r'rebuild it', problem.message), problem


@pytest.mark.parametrize('missing', ['parquet', 'tar'])
def test_a_file_missing_beside_its_partner(dataset, index, missing, capsys):
    os.remove(os.path.join(dataset, '00001.' + missing))
    problems = verify(dataset)
    if missing == 'parquet':
        expected = [r".*00001\.tar has no parquet beside it \(.*00001\.parquet\): restore the "
                    r"shard's metadata"]
    else:
        expected = [r'.*00001\.parquet has no tar beside it \(.*00001\.tar\): restore the tar '
                    r'or remove the parquet']
        if index:
            expected.append(r'.*00001\.idx has no tar beside it \(.*00001\.tar\): remove the '
                            r'index')
    assert [(problem.shard, problem.member) for problem in problems] == \
        [('00001', None)] * len(expected)
    assert all(re.match(pattern + '$', problem.message)
               for pattern, problem in zip(expected, problems)), problems
    assert cli(capsys, dataset)[0] == 1


def test_parquet_ids_that_do_not_match(dataset, index):
    parquet = os.path.join(dataset, '00001.parquet')
    frame = pd.read_parquet(parquet)
    frame.loc[2, 'key'] = '999999'
    frame.to_parquet(parquet)
    problem = only_problem(dataset)
    assert (problem.shard, problem.member) == ('00001', None)
    where = r'.*00001\.idx' if index else r'.*00001\.tar'
    assert re.match(r".*00001\.parquet lists ids that %s does not hold: '999999'" % where,
                    problem.message), problem
    if index:
        assert problem.message.endswith('and its index agree, so the parquet is not the one '
                                        'written with them: restore it')


def test_a_member_that_is_not_json(dataset, capsys):
    metadata = member(dataset, '00001', 5)
    assert metadata.name.endswith('.json')
    overwrite(dataset, '00001', metadata.offset_data, b'{' * metadata.size)
    problem = only_problem(dataset)
    assert (problem.shard, problem.member) == ('00001', metadata.name)
    assert re.match(r'%s in .*00001\.tar is not valid JSON: ' % metadata.name, problem.message)
    code, lines = cli(capsys, dataset)
    assert code == 1 and lines[0] == problem.message


def test_json_that_is_not_an_object_and_captions_that_are_not_utf8(dataset):
    metadata, caption = member(dataset, '00000', 2), member(dataset, '00000', 7)
    overwrite(dataset, '00000', metadata.offset_data,
              b'[' + b' ' * (metadata.size - 2) + b']')
    overwrite(dataset, '00000', caption.offset_data, b'\xff')
    problems = verify(dataset)
    assert [(problem.shard, problem.member) for problem in problems] == [
        ('00000', caption.name), ('00000', metadata.name)]  # captions are checked first
    assert re.match(r'%s in .*00000\.tar is not UTF-8 text: ' % caption.name,
                    problems[0].message), problems
    assert re.match(r'%s in .*00000\.tar holds a list, not an object$' % metadata.name,
                    problems[1].message), problems


def test_a_record_id_in_two_shards(dataset, capsys):
    for ext in ('tar', 'parquet', 'idx'):
        if os.path.exists(os.path.join(dataset, '00000.' + ext)):
            shutil.copy(os.path.join(dataset, '00000.' + ext),
                        os.path.join(dataset, '00002.' + ext))
    problem = only_problem(dataset)
    assert (problem.shard, problem.member) == ('00002', None)
    assert re.match(r".*00002\.tar holds record ids that .*00000\.tar holds too: '000000', "
                    r"'000001', '000002', '000003'; ids must be unique", problem.message)
    assert cli(capsys, dataset)[0] == 1


def test_a_corrupt_image_is_found_only_when_decoding(dataset, capsys):
    image = member(dataset, '00001', 9)
    assert image.name.endswith('.jpg')
    overwrite(dataset, '00001', image.offset_data, b'\0' * image.size)
    assert verify(dataset) == []
    assert cli(capsys, dataset)[0] == 0
    problem = only_problem(dataset, decode=True)
    assert (problem.shard, problem.member) == ('00001', image.name)
    assert re.match(r'cannot decode the image %s in .*00001\.tar: ' % image.name,
                    problem.message)
    code, lines = cli(capsys, dataset, '--decode')
    assert code == 1 and lines[0] == problem.message


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(TypeError, match='path must be a str or os.PathLike'):
        verify(3)
    with pytest.raises(TypeError, match='id_col must be a str'):
        verify(str(tmp_path), id_col=1)
    with pytest.raises(FileNotFoundError, match='holds no shards'):
        verify(str(tmp_path))
    with pytest.raises(FileNotFoundError, match='no dataset directory'):
        verify(str(tmp_path / 'nothing'))
    assert main(['wds', 'verify', str(tmp_path / 'nothing')]) == 1
    assert 'gluonbatch wds verify: error: no dataset directory' in capsys.readouterr().err


@pytest.mark.parametrize('chunk,keep', [(1536, 512), (4096, 2048), (65536, 1024)])
def test_small_chunks_find_the_same(tmp_path, monkeypatch, chunk, keep):
    """Read in chunks smaller than a member (joined with what was kept), or holding a few:
    a healthy dataset stays healthy, and damage in a later chunk is found alike."""
    module = importlib.import_module('gluonbatch.shards.verify')
    path = make_example_dataset(str(tmp_path / 'data'), num_shards=2, samples_per_shard=12,
                                min_size=48, max_size=96, index=True)
    monkeypatch.setattr(module, 'CHUNK', chunk)
    monkeypatch.setattr(module, 'KEEP', keep)
    assert verify(path, decode=True) == []
    metadata, caption = member(path, '00001', 3 * 9 + 2), member(path, '00001', 3 * 10 + 1)
    assert metadata.name.endswith('.json') and caption.name.endswith('.txt')
    overwrite(path, '00001', metadata.offset_data, b'{' * metadata.size)
    overwrite(path, '00001', caption.offset, b'\xff' * 512)
    problems = verify(path)
    assert [(problem.shard, problem.member) for problem in problems] == [
        ('00001', metadata.name), ('00001', caption.name)], problems
    assert 'is not valid JSON' in problems[0].message
    assert re.search(r"is corrupt: no tar header at byte %d, where its index .* puts the headers "
                     r"of member '%s'" % (caption.offset, caption.name), problems[1].message)


def test_record_rules_are_checked_and_ask_more_of_each_record(tmp_path):
    from gluonbatch.shards import RecordRules

    path = make_example_dataset(str(tmp_path / 'data'), num_shards=1, samples_per_shard=3)
    with pytest.raises(TypeError, match='RecordRules or None, not dict'):
        verify(path, rules={'members': ('json',)})
    with pytest.raises(ValueError, match=r"among \['image', 'json', 'txt'\], got \['png'\]"):
        verify(path, rules=RecordRules(('png',)))
    assert verify(path, rules=RecordRules(('image', 'txt', 'json'))) == []

    def no_url(metadata):
        if 'url' in metadata:
            raise ValueError('has a url')
    report = verify(path, rules=RecordRules(check_json=no_url))
    assert len(report) == 3 and all(p.member.endswith('.json') and 'has a url' in p.message
                                    for p in report)
