"""Bad data through the commands and the example loaders: one line on stderr naming the
file, exit code 1, no traceback; a wrong command line: argparse's usage, exit code 2;
progress on stderr, results alone on stdout."""
import os
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from gluonbatch import cli
from gluonbatch.cli.usage import parse
from gluonbatch.detection import from_voc, make_voc_example
from gluonbatch.examples import ssd

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: the splits the example loaders read from --voc-root (train, then val)
LOADER_SPLITS = [(2007, 'trainval'), (2012, 'trainval'), (2007, 'test')]
LOADER = ['--batches', '2', '--batch-size', '2', '--data-shape', '128', '--no-progress']


def run(args, timeout=600):
    """A fresh interpreter in the repository: ``(exit code, stdout, stderr)``."""
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                            timeout=timeout, cwd=ROOT)
    return result.returncode, result.stdout, result.stderr


def _run(argv):
    """``cli.main(argv)``'s exit code, also when argparse exits."""
    try:
        return cli.main(argv)
    except SystemExit as exit:
        return exit.code


def assert_one_line(err, prog, *named):
    """``err`` is one ``PROG: error: ...`` line that names each of ``named``."""
    assert err.count('\n') == 1 and err.startswith('%s: error: ' % prog), err
    assert 'Traceback' not in err
    for name in named:
        assert str(name) in err


@pytest.fixture(scope='module')
def voc(tmp_path_factory):
    """A VOC root with the splits the loaders read: 4 images each."""
    return make_voc_example(str(tmp_path_factory.mktemp('voc') / 'voc'), num_images=4,
                            splits=LOADER_SPLITS, size=(64, 48))


def _copy(voc, tmp_path):
    root = tmp_path / 'voc'
    shutil.copytree(voc, root)
    return root


@pytest.fixture
def broken_xml(voc, tmp_path):
    """A copy of ``voc`` whose second VOC2007 annotation is cut short; its path."""
    root = _copy(voc, tmp_path)
    xml = sorted((root / 'VOC2007' / 'Annotations').glob('*.xml'))[1]
    xml.write_bytes(xml.read_bytes()[:120])
    return root, xml


@pytest.fixture
def empty_jpeg(voc, tmp_path):
    """A copy of ``voc`` whose first VOC2007 image is an empty file; its path."""
    root = _copy(voc, tmp_path)
    jpeg = sorted((root / 'VOC2007' / 'JPEGImages').glob('*.jpg'))[0]
    jpeg.write_bytes(b'')
    return root, jpeg


def test_a_broken_xml_is_one_line_naming_it(broken_xml, capsys):
    root, xml = broken_xml
    assert ssd.main(['--voc-root', str(root)] + LOADER) == 1
    out, err = capsys.readouterr()
    assert_one_line(err, 'ssd_loader', xml)
    assert out == ''  # it failed before loading anything


@pytest.mark.parametrize('num_workers', [0, 2])
def test_an_empty_jpeg_is_one_line_naming_it(empty_jpeg, num_workers, capsys):
    root, jpeg = empty_jpeg
    assert ssd.main(['--voc-root', str(root), '--num-workers', str(num_workers)]
                    + LOADER) == 1
    assert_one_line(capsys.readouterr().err, 'ssd_loader', jpeg, 'empty')


@pytest.fixture(scope='module')
def truncated_shards(voc, tmp_path_factory):
    """Shards of ``voc``'s 2007 trainval (2 records each), the last tar cut short."""
    path = from_voc(voc, str(tmp_path_factory.mktemp('shards') / 'shards'),
                    splits=['2007:trainval'], samples_per_shard=2, progress=False)
    tar = os.path.join(path, '00001.tar')
    with open(tar, 'r+b') as handle:
        handle.truncate(1536)
    return path, tar


@pytest.mark.parametrize('num_workers', [0, 2])
def test_a_truncated_tar_is_one_line_naming_it(truncated_shards, num_workers, capsys):
    path, tar = truncated_shards
    assert ssd.main(['--shards', path, '--num-workers', str(num_workers)] + LOADER) == 1
    err = capsys.readouterr().err
    # a worker's error keeps its type; its traceback is no part of the line
    assert_one_line(err, 'ssd_loader', tar, 'truncated')
    assert ('in DataLoader worker process' in err) is (num_workers > 0)


def test_the_distributed_training_script_prints_a_truncated_tar_on_one_line(
        truncated_shards):
    path, tar = truncated_shards
    code, out, err = run([sys.executable, ROOT / 'scripts' / 'dist_train.py', '--shards', path,
                          '--kvstore', 'local', '--batch-size', '4', '--steps', '2'])
    assert code == 1
    assert_one_line(err, 'dist_train.py', tar, 'truncated')


@pytest.mark.slow
def test_a_loader_script_prints_a_broken_xml_on_one_line(broken_xml):
    root, xml = broken_xml
    code, out, err = run([sys.executable, ROOT / 'scripts' / 'ssd_loader.py', '--voc-root',
                          root] + LOADER)
    assert code == 1
    assert_one_line(err, 'ssd_loader', xml)


@pytest.mark.parametrize('command', [['show', '--loader', 'ssd'], ['demo', '--batches', '1']])
def test_show_and_demo_print_bad_data_on_one_line(command, tmp_path, monkeypatch, capsys):
    from gluonbatch.examples import rcnn, show

    def broken(*args):
        error = ET.ParseError('no element found: line 5, column 0')
        error.add_note('while reading /data/000001.xml')
        raise error

    monkeypatch.setattr(show, 'show_batch', broken)
    monkeypatch.setattr(rcnn, 'main_faster', lambda argv: 0)
    monkeypatch.setattr(ssd, 'main', lambda argv: 0)
    assert cli.main(command + ['-o', str(tmp_path / 'batch.png')]) == 1
    assert capsys.readouterr().err == (
        'gluonbatch %s: error: no element found: line 5, column 0; while reading '
        '/data/000001.xml\n' % command[0])


def test_an_error_of_the_code_keeps_its_traceback(tmp_path, monkeypatch):
    from gluonbatch.examples import show

    def broken(*args):
        raise KeyError('a bug')

    monkeypatch.setattr(show, 'show_batch', broken)
    with pytest.raises(KeyError, match='a bug'):
        cli.main(['show', '--loader', 'ssd', '-o', str(tmp_path / 'batch.png')])


@pytest.mark.parametrize('value', ['2007', '2007:', ':trainval'])
def test_a_malformed_split_is_a_usage_error(voc, tmp_path, capsys, value):
    assert _run(['wds', 'from-voc', voc, str(tmp_path / 'o'), '--splits', value]) == 2
    err = capsys.readouterr().err
    assert err.startswith('usage: gluonbatch wds from-voc [-h]')
    assert err.endswith("gluonbatch wds from-voc: error: argument --splits: expected "
                        "YEAR:NAME (the folder VOC<YEAR>) or FOLDER:NAME, got %r\n" % value)
    assert not (tmp_path / 'o').exists()


@pytest.mark.parametrize('value, seen', [('-1', '-1'), ('65', '65'), ('two', "'two'")])
def test_demo_num_workers_out_of_range_is_one_short_message(capsys, value, seen):
    assert _run(['demo', '--num-workers', value]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 2  # the usage line and the error
    assert err.endswith('gluonbatch demo: error: argument --num-workers: expected an int '
                        'from 0 to 64, got %s\n' % seen)


def test_a_bad_box_names_the_flag_that_drops_it(voc, tmp_path, capsys):
    root = _copy(voc, tmp_path)
    xml = sorted((root / 'VOC2007' / 'Annotations').glob('*.xml'))[0]
    tree = ET.parse(xml)
    tree.find('object/bndbox/xmax').text = '999'
    tree.write(xml)
    argv = ['wds', 'from-voc', str(root), str(tmp_path / 'o'), '--splits', '2007:trainval',
            '--no-progress']
    assert _run(argv) == 1
    err = capsys.readouterr().err
    assert_one_line(err, 'gluonbatch wds from-voc', xml, 'has a box outside its 64x48 image')
    assert err.endswith('gluoncv drops such a box, and so does --invalid-boxes drop\n')
    assert _run(argv + ['--invalid-boxes', 'drop']) == 0


@pytest.fixture(scope='module')
def voc2007(tmp_path_factory):
    """A VOC root with VOC2007 only."""
    return make_voc_example(str(tmp_path_factory.mktemp('voc2007') / 'voc'), num_images=3,
                            splits=[(2007, 'trainval')], size=(64, 48))


def test_a_2007_only_root_hints_at_its_splits(voc2007, tmp_path, capsys):
    assert _run(['wds', 'from-voc', voc2007, str(tmp_path / 'o')]) == 1
    err = capsys.readouterr().err
    assert_one_line(err, 'gluonbatch wds from-voc', "split '2012:trainval': no image list ")
    assert err.endswith('; to convert the splits it has, pass --splits 2007:trainval\n')
    # the function says it in its own words
    with pytest.raises(FileNotFoundError, match=r"pass splits=\['2007:trainval'\]$"):
        from_voc(voc2007, str(tmp_path / 'o'))


def test_progress_goes_to_stderr_and_the_result_alone_to_stdout(voc2007, tmp_path, capsys):
    dst = tmp_path / 'o'
    assert _run(['wds', 'from-voc', voc2007, str(dst), '--splits', '2007:trainval']) == 0
    out, err = capsys.readouterr()
    assert out == '%s: 3 records in 1 shard, 20 classes\n' % dst
    assert [line.split(':')[0] for line in err.splitlines()] == [
        'from_voc (reading annotations)', 'from_voc (writing shards)']


@pytest.mark.slow
def test_a_captured_conversion_is_its_result_line(voc2007, tmp_path):
    dst = tmp_path / 'o'
    code, out, err = run([sys.executable, '-m', 'gluonbatch', 'wds', 'from-voc', voc2007, dst,
                          '--splits', '2007:trainval'])
    assert code == 0, err
    assert out == '%s: 3 records in 1 shard, 20 classes\n' % dst  # what DST=$(...) gets
    assert len(err.splitlines()) == 2 and 'images done in' in err


@pytest.mark.slow
def test_demo_prints_no_warning_of_mxnet(tmp_path):
    code, out, err = run([sys.executable, '-m', 'gluonbatch', 'demo', '--batches', '1',
                          '--num-workers', '0', '-o', tmp_path / 'demo.png'])
    assert code == 0, err
    assert 'Cannot decide type' not in err and 'Warning' not in err


def test_the_ssd_network_is_built_without_mxnets_type_warning(recwarn):
    from gluonbatch.examples.runner import loader_parser

    parser = loader_parser('ssd_loader', 'SSD', 2, 'data-shape', 'ssd_300_mobilenet0.25_voc')
    ssd.build(parser.parse_args(['--data-shape', '128', '--samples', '4']))
    assert not [w for w in recwarn if 'Cannot decide type' in str(w.message)]


def test_a_stopped_stage_is_told_before_the_error(voc, tmp_path, capsys):
    root = _copy(voc, tmp_path)
    xml = sorted((root / 'VOC2007' / 'Annotations').glob('*.xml'))[1]
    xml.write_bytes(b'<annotation>')
    assert _run(['wds', 'from-voc', str(root), str(tmp_path / 'o'), '--splits',
                 '2007:trainval']) == 1
    stage, error = capsys.readouterr().err.splitlines()
    assert stage.endswith('(stopped by an error)')
    assert error.startswith('gluonbatch wds from-voc: error: ') and str(xml) in error


@pytest.mark.parametrize('notes, one_line', [
    (['while reading /data/1.jpg'], True),
    ([], False),  # a computation's error, not a file's: its traceback is kept
])
def test_an_mxnet_error_is_bad_data_when_it_names_its_file(tmp_path, monkeypatch, capsys,
                                                           notes, one_line):
    import mxnet as mx

    from gluonbatch.examples import show

    def broken(*args):
        error = mx.base.MXNetError('Traceback (most recent call last):\n  File "x.cc", '
                                   'line 1\nMXNetError: Check failed: len > 0')
        for note in notes:
            error.add_note(note)
        raise error

    monkeypatch.setattr(show, 'show_batch', broken)
    argv = ['show', '--loader', 'ssd', '-o', str(tmp_path / 'batch.png')]
    if not one_line:
        with pytest.raises(mx.base.MXNetError):
            cli.main(argv)
        return
    assert cli.main(argv) == 1
    assert capsys.readouterr().err == ('gluonbatch show: error: Check failed: len > 0; while '
                                       'reading /data/1.jpg\n')


@pytest.mark.parametrize('text, spelled', [
    ("so does invalid_boxes='drop'", 'so does --invalid-boxes drop'),
    ("pass splits=['2007:trainval', 'VOC 2012:val']",
     "pass --splits 2007:trainval 'VOC 2012:val'"),
    ('samples_per_shard=4, or fewer', '--samples-per-shard 4, or fewer'),
    ("my_splits=['a'] and box.invalid_boxes=1", "my_splits=['a'] and box.invalid_boxes=1"),
    ('root=/data', 'root=/data'),  # a positional argument has no flag
])
def test_messages_name_the_options_as_they_are_typed(text, spelled):
    from gluonbatch._core.failures import in_flag_spelling

    from_voc = parse(cli.build_parser(), ['wds', 'from-voc', 'root', 'dst']).chosen
    assert in_flag_spelling(text, from_voc) == spelled
