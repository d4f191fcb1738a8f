"""The ``gluonbatch`` command's messages: counts in words, errors on one line with exit code
2 for a wrong command line, each command's usage and ``--help``, and progress that suits a
log file."""
import argparse
import io
import os
import re
import subprocess
import sys

import mxnet as mx
import pytest

from gluonbatch import cli
from gluonbatch.cli.usage import parsers
from gluonbatch.examples import ssd
from gluonbatch.examples.runner import loader_parser, time_loader
from gluonbatch.curation import make_example_dataset


def test_counts_of_one_are_singular(tmp_path, capsys):
    data = make_example_dataset(str(tmp_path / 'data'), num_shards=1, samples_per_shard=1)
    assert cli.main(['wds', 'index', os.path.join(data, '00000.tar')]) == 0
    assert capsys.readouterr().out.endswith('00000.idx: 1 sample\n')
    assert cli.main(['wds', 'inspect', data]) == 0
    out = capsys.readouterr().out
    assert '1 shard (1 with .idx), 1 record,' in out and '\nfirst 1 record:\n' in out


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
    """A dataset of 2 shards, 3 records each (columns key, caption, width, height, url)."""
    return make_example_dataset(str(tmp_path_factory.mktemp('cli') / 'data'), num_shards=2,
                                samples_per_shard=3)


def _run(argv):
    """``cli.main(argv)``'s exit code, also when argparse exits."""
    try:
        return cli.main(argv)
    except SystemExit as exit:
        return exit.code


@pytest.mark.parametrize('argv, message', [
    (['wds', 'filter', '{data}', '{tmp}/out', '--where', 'width'],
     "gluonbatch wds filter: error: --where 'width' is not a condition: it gives int64 "
     "values, not True or False; write a condition such as 'width >= 256'"),
    (['wds', 'filter', '{data}', '{tmp}/out', '--where', 'caption'],
     "--where 'caption' is not a condition: it gives object values, not True or False; "
     "write a condition such as 'width >= 256'"),
    (['wds', 'filter', '{data}', '{tmp}/out', '--where', 'nope > 1'],
     "gluonbatch wds filter: error: --where 'nope > 1' is not an expression of the columns"),
    (['wds', 'index', '{data}/00000.tar', '{data}/00001.tar', '-o', '{tmp}/x.idx'],
     'gluonbatch wds index: error: --output names one index file; 2 tar files were given'),
])
def test_a_wrong_command_line_found_by_the_action_is_one_line_and_exit_code_2(
        dataset, tmp_path, capsys, argv, message):
    argv = [arg.format(data=dataset, tmp=tmp_path) for arg in argv]
    assert _run(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count('\n') == 1 and message in captured.err
    assert 'keep' not in captured.err  # the column the command makes is no business of the user
    assert not os.path.exists(tmp_path / 'out')


@pytest.mark.parametrize('argv, prog, extras', [
    (['wds', 'inspect', 'data', '--bogus'], 'gluonbatch wds inspect', '--bogus'),
    (['wds', 'inspect', '--bogus', 'data'], 'gluonbatch wds inspect', '--bogus'),
    (['show', '--loader', 'ssd', '--nope'], 'gluonbatch show', '--nope'),
    (['wds', 'filter', 'a', 'b', '--where', 'x', '--nope', '1'], 'gluonbatch wds filter',
     '--nope 1'),
])
def test_an_unknown_option_shows_the_usage_of_its_subcommand(capsys, argv, prog, extras):
    assert _run(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith('usage: %s [-h]' % prog)
    assert err.endswith('\n%s: error: unrecognized arguments: %s\n' % (prog, extras))


@pytest.mark.parametrize('command', [['show', '--loader', 'ssd'], ['demo']])
@pytest.mark.parametrize('output, problem', [
    ('{tmp}/batch.txt', 'does not end in .png; the picture is a PNG file'),
    ('{tmp}', 'is a directory; name a file in it, e.g. {tmp}/batch.png'),
    ('{tmp}/nope/batch.png', 'is in {tmp}/nope, which is not an existing directory'),
    ('{tmp}/file/batch.png', 'is in {tmp}/file, which is not an existing directory'),
])
def test_a_bad_output_path_stops_the_picture_commands_before_any_work(
        tmp_path, capsys, command, output, problem):
    (tmp_path / 'file').write_text('')
    output = output.format(tmp=tmp_path)
    assert _run(command + ['-o', output]) == 2
    captured = capsys.readouterr()
    assert captured.out == ''  # no loader ran
    assert captured.err.endswith("gluonbatch %s: error: argument -o/--output: %r %s\n"
                                 % (command[0], output, problem.format(tmp=tmp_path)))


@pytest.mark.skipif(not os.path.isdir('/proc/self'), reason='needs /proc')
def test_an_output_path_that_cannot_be_written_is_named(capsys):
    # /proc takes no new file, even from a superuser, whom permissions never stop
    assert _run(['demo', '-o', '/proc/batch.png']) == 2
    err = capsys.readouterr().err
    assert err.count('\n') <= 2 and err.endswith(  # a usage line, then the error
        "gluonbatch demo: error: argument -o/--output: '/proc/batch.png' cannot be written "
        '(No such file or directory); choose another path\n')


def test_checking_an_output_path_changes_no_file(tmp_path):
    from gluonbatch._core.argtypes import png_path

    existing, new = tmp_path / 'old.png', tmp_path / 'new.png'
    existing.write_bytes(b'a picture')
    assert png_path(str(existing)) == str(existing) and png_path(str(new)) == str(new)
    assert existing.read_bytes() == b'a picture' and not new.exists()


@pytest.mark.parametrize('script, line', [
    ('dist_train.py', '--steps STEPS training steps (batches) (default: 4)'),
    ('launch_local.py', '--num-workers NUM_WORKERS worker processes, each running the command '
                        '(default: 2)'),
])
def test_the_scripts_help_is_plain_text_with_defaults(script, line):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, os.path.join(root, 'scripts', script), '--help'],
                            capture_output=True, text=True, check=True,
                            env=dict(os.environ, PYTHONPATH=root, COLUMNS='100'))
    assert line in ' '.join(result.stdout.split())
    assert '``' not in result.stdout


class _Terminal(io.StringIO):
    """Output that says it is a terminal."""

    def isatty(self):
        return True


_STAGE = r'^reshard \(([a-z ]+)\): (\d+)/\2 tasks? done in \d+\.\d s$'


def test_progress_where_the_output_is_no_terminal_is_a_line_per_stage(dataset, tmp_path,
                                                                      capsys):
    dst = tmp_path / 'out'
    assert cli.main(['wds', 'reshard', dataset, str(dst), '--samples-per-shard', '2']) == 0
    out, err = capsys.readouterr()
    assert '\r' not in err
    # on stderr, a pass over the source shards, then one task per new shard; the summary,
    # the result, alone on stdout
    lines = err.splitlines()
    assert len(lines) == 2
    assert [re.match(_STAGE, line).group(1) for line in lines] == [
        'selecting records', 'writing shards']  # each stage named
    assert lines[1].startswith('reshard (writing shards): 3/3 tasks')
    assert out == '%s: 6 of 6 records in 3 shards\n' % dst


def test_progress_on_a_terminal_is_a_bar(dataset, tmp_path, monkeypatch, capsys):
    terminal = _Terminal()
    monkeypatch.setattr(sys, 'stderr', terminal)
    assert cli.main(['wds', 'reshard', dataset, str(tmp_path / 'out')]) == 0
    bars = terminal.getvalue()
    assert bars.count('100% Completed') == 2 and not re.search(_STAGE, bars, re.M)
    assert capsys.readouterr().out == '%s: 6 of 6 records in 1 shard\n' % (tmp_path / 'out')


def test_no_progress_prints_only_the_summary(dataset, tmp_path, capsys):
    assert cli.main(['wds', 'reshard', dataset, str(tmp_path / 'out'), '--no-progress']) == 0
    out, err = capsys.readouterr()
    assert out.count('\n') == 1 and err == ''


@pytest.mark.parametrize('stderr, bar', [(None, False), (_Terminal(), True)])
def test_the_example_loaders_draw_their_bar_only_on_a_terminal(monkeypatch, capsys, stderr,
                                                                bar):
    if stderr is not None:
        monkeypatch.setattr(sys, 'stderr', stderr)
    batches = [mx.nd.zeros((2, 3))] * 3
    assert time_loader(batches, 3, 'SSD train')[:2] == (3, 6)
    err = capsys.readouterr().err if stderr is None else stderr.getvalue()
    assert ('SSD train' in err and '\r' in err) is bar
    if not bar:
        assert err == ''
