"""The `gluonbatch wds` commands, and `python -m gluonbatch` as the `gluonbatch` command."""
import importlib.metadata
import os
import subprocess
import sys

import pytest

import gluonbatch
from gluonbatch import cli
from gluonbatch.curation import ImageTextPairDataset, make_example_dataset

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
    (['wds', 'index', '{tmp}/nope.tar'], 'gluonbatch wds index: error: no tar file'),
    (['wds', 'index', '{data}/00000.parquet'], 'is not a readable uncompressed tar'),
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


def _console_script(argv, monkeypatch, capsys):
    """Run the installed ``gluonbatch`` console script's function as its wrapper does
    (``sys.exit(main())`` with ``sys.argv``): ``(exit code, stdout, stderr)``."""
    (entry,) = [entry for entry in importlib.metadata.entry_points(group='console_scripts')
                if entry.name == 'gluonbatch']
    main = entry.load()
    assert main is cli.main
    monkeypatch.setattr(sys, 'argv', ['gluonbatch'] + argv)
    try:
        code = main()
    except SystemExit as exit:  # argparse exits for --help and usage errors
        code = exit.code
    captured = capsys.readouterr()
    return 0 if code is None else code, captured.out, captured.err


def _python_m_gluonbatch(argv, monkeypatch, capsys):
    """Run ``gluonbatch/__main__.py`` as ``python -m gluonbatch`` does (its code as
    ``__main__`` of the package, ``sys.argv[0]`` its path), in this process:
    ``(exit code, stdout, stderr)``."""
    path = os.path.join(os.path.dirname(gluonbatch.__file__), '__main__.py')
    with open(path) as source:
        code = compile(source.read(), path, 'exec')
    monkeypatch.setattr(sys, 'argv', [path] + argv)
    with pytest.raises(SystemExit) as exit:
        exec(code, {'__name__': '__main__', '__package__': 'gluonbatch', '__file__': path})
    captured = capsys.readouterr()
    return exit.value.code or 0, captured.out, captured.err


def _assert_the_gluonbatch_command(result, argv, code):
    returncode, stdout, stderr = result
    assert returncode == code
    assert '__main__' not in stdout + stderr  # the program is 'gluonbatch'
    if argv == ['--help']:
        assert stdout.startswith('usage: gluonbatch [-h] [--version] COMMAND')
    elif code == 0:
        assert '1 shard (0 with .idx), 2 records' in stdout
    else:
        assert 'gluonbatch' in stderr and ': error:' in stderr
        assert 'Traceback' not in stderr


@pytest.mark.parametrize('argv, code', [
    (['--help'], 0),
    (['wds', 'inspect', '{data}', '--records', '1'], 0),
    (['wds', 'inspect', '{tmp}/nope'], 1),  # an error: the exit code and stderr carry over
    (['nope'], 2),  # argparse's usage error
])
def test_python_m_gluonbatch_is_the_gluonbatch_command(argv, code, tmp_path, monkeypatch,
                                                       capsys):
    data = make_example_dataset(str(tmp_path / 'data'), num_shards=1, samples_per_shard=2)
    argv = [arg.format(data=data, tmp=tmp_path) for arg in argv]
    monkeypatch.setenv('COLUMNS', '80')  # argparse wraps help to the terminal's width
    monkeypatch.chdir(tmp_path)
    result = _python_m_gluonbatch(argv, monkeypatch, capsys)
    assert result == _console_script(argv, monkeypatch, capsys)
    _assert_the_gluonbatch_command(result, argv, code)


@pytest.mark.slow
def test_python_m_gluonbatch_starts_in_a_fresh_interpreter(tmp_path, monkeypatch, capsys):
    argv, code = ['wds', 'inspect', str(tmp_path / 'nope')], 1
    monkeypatch.setenv('COLUMNS', '80')
    result = subprocess.run([sys.executable, '-m', 'gluonbatch'] + argv, capture_output=True,
                            text=True, env=dict(os.environ), cwd=str(tmp_path))
    result = (result.returncode, result.stdout, result.stderr)
    assert result == _console_script(argv, monkeypatch, capsys)
    _assert_the_gluonbatch_command(result, argv, code)
