"""The `gluonbatch wds` commands."""
import os

import pytest

from gluonbatch import cli
from gluonbatch.webdataset import ImageTextPairDataset

from helpers import ID, record, write_shard


def test_cli_index_inspect_reshard(data, tmp_path, capsys):
    path, expected = data
    tars = [os.path.join(path, '%05d.tar' % k) for k in range(3)]
    assert cli.main(['wds', 'index'] + tars) == 0
    out = capsys.readouterr().out
    assert '00000.idx: 3 samples' in out and '00002.idx: 4 samples' in out
    assert cli.main(['wds', 'index', tars[0], '--output', str(tmp_path / 'x.idx')]) == 0
    assert open(tmp_path / 'x.idx').read() == open(tars[0][:-4] + '.idx').read()

    assert cli.main(['wds', 'inspect', path, '--records', '2']) == 0
    out = capsys.readouterr().out
    assert '3 shards (3 with .idx), 9 records' in out
    assert 'key (object), caption (object)' in out
    assert expected[1]['key'] in out and expected[2]['key'] not in out.split('records:')[1]

    ds = ImageTextPairDataset.from_webdataset(path, ID)
    ds.metadata['wide'] = ds.metadata['width'] > 10
    ds.save_metadata()
    dst = tmp_path / 'dst'
    assert cli.main(['wds', 'reshard', path, str(dst), '--filter-column', 'wide',
                     '--samples-per-shard', '2', '--max-shards', '3',
                     '--old-id-col', 'old']) == 0
    meta = ds.metadata.compute()
    kept = int(meta['wide'].sum())
    assert '%d of 9 records in %d shards' % (kept, -(-kept // 2)) in capsys.readouterr().out
    new = ImageTextPairDataset.from_webdataset(dst, ID).metadata.compute()
    assert new['old'].tolist() == meta[ID][meta['wide']].tolist()
    assert new[ID].iloc[0] == '0000'


@pytest.mark.parametrize('argv, message', [
    (['wds', 'inspect', '{tmp}/nope'], 'gluonbatch wds inspect: error: no dataset directory'),
    (['wds', 'reshard', '{data}', '{data}'], 'is the source directory'),
    (['wds', 'reshard', '{data}', '{tmp}/o', '--filter-column', 'x'], "no filter column 'x'"),
    (['wds', 'index', '{tmp}/nope.tar'], 'gluonbatch wds index: error: no tar file'),
    (['wds', 'index', '{data}/00000.parquet'], 'is not a readable uncompressed tar'),
    (['wds', 'index', '{data}/00000.tar', '{data}/00001.tar', '-o', '{tmp}/x.idx'],
     '--output names one index file'),
])
def test_cli_errors_exit_non_zero_without_traceback(data, tmp_path, capsys, argv, message):
    argv = [arg.format(tmp=tmp_path, data=data[0]) for arg in argv]
    assert cli.main(argv) == 1
    captured = capsys.readouterr()
    assert message in captured.err and 'Traceback' not in captured.err


def test_cli_inspect_reports_undecodable_records(tmp_path, capsys):
    records = [record(0, k) for k in range(2)]
    records[1] = dict(records[1], jpg=b'broken')
    write_shard(str(tmp_path), '00000', records)
    assert cli.main(['wds', 'inspect', str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "000000001  error: cannot decode the image" in out and '000000000  image' in out
