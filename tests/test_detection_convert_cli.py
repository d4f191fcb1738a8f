"""`gluonbatch wds from-voc` and `from-coco`: the same shards as the functions, a line on
what was written, and errors on one line."""
import pytest

from gluonbatch import cli
from gluonbatch.detection import from_coco, from_voc, make_coco_example, make_voc_example

from converted import read_back, tree


@pytest.fixture(scope='module')
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp('sources')
    voc = make_voc_example(str(base / 'voc'), num_images=3,
                           splits=[(2007, 'trainval'), (2012, 'val')], size=(64, 48))
    coco = make_coco_example(str(base / 'coco'), split='val2017', num_images=5,
                             sizes=[(64, 48)])
    return voc, coco


def _same(one, two):
    (m1, r1, p1), (m2, r2, p2) = read_back(one), read_back(two)
    assert m1 == m2 and r1 == r2 and p1 == p2


def test_from_voc_writes_what_the_function_writes(roots, tmp_path, capsys):
    voc, _ = roots
    out = str(tmp_path / 'cli')
    assert cli.main(['wds', 'from-voc', voc, out, '--splits', '2012:val', '2007:trainval',
                     '--samples-per-shard', '2', '--invalid-boxes', 'drop']) == 0
    printed = capsys.readouterr()
    assert printed.out == '%s: 6 records in 3 shards, 20 classes\n' % out
    # no terminal: a line per stage, on stderr
    assert printed.err.startswith('from_voc (reading annotations): 6/6 images done in ')
    from_voc(voc, str(tmp_path / 'api'), splits=[(2012, 'val'), (2007, 'trainval')],
             samples_per_shard=2, invalid_boxes='drop')
    _same(out, str(tmp_path / 'api'))


def test_from_coco_writes_what_the_function_writes(roots, tmp_path, capsys):
    _, coco = roots
    out = str(tmp_path / 'cli')
    assert cli.main(['wds', 'from-coco', coco, out, '--split', 'instances_val2017',
                     '--segmentation', '--keep-empty', '--min-object-area', '2',
                     '--no-progress']) == 0
    assert capsys.readouterr().out == '%s: 5 records in 1 shard, 80 classes with polygons\n' \
        % out
    from_coco(coco, str(tmp_path / 'api'), split='val2017', segmentation=True,
              skip_empty=False, min_object_area=2.0)
    _same(out, str(tmp_path / 'api'))
    assert cli.main(['wds', 'from-coco', coco, str(tmp_path / 'crowdless'), '--split',
                     'val2017', '--no-crowd', '--no-progress']) == 0
    from_coco(coco, str(tmp_path / 'crowdless-api'), split='val2017', use_crowd=False)
    _same(str(tmp_path / 'crowdless'), str(tmp_path / 'crowdless-api'))


@pytest.mark.parametrize('argv, message', [
    (['from-voc', '{voc}', '{tmp}/o', '--splits', '2007:test'],
     'gluonbatch wds from-voc: error: split \'2007:test\': no image list '),
    (['from-coco', '{coco}', '{tmp}/o', '--split', 'train2017'],
     'gluonbatch wds from-coco: error: no annotation file '),
    (['from-coco', '{tmp}/nowhere', '{tmp}/o'],
     'gluonbatch wds from-coco: error: no dataset root directory '),
])
def test_errors_exit_1_on_one_line_and_write_nothing(roots, tmp_path, capsys, argv,
                                                      message):
    voc, coco = roots
    argv = ['wds'] + [arg.format(voc=voc, coco=coco, tmp=tmp_path) for arg in argv]
    before = tree(str(tmp_path))
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and 'Traceback' not in err and err.count('\n') == 1
    assert tree(str(tmp_path)) == before


def test_a_destination_holding_a_dataset_exits_1(roots, tmp_path, capsys):
    voc, _ = roots
    out = from_voc(voc, str(tmp_path / 'out'), splits=['2012:val'])
    before = tree(out)
    assert cli.main(['wds', 'from-voc', voc, out, '--splits', '2012:val']) == 1
    assert 'already holds a dataset' in capsys.readouterr().err
    assert tree(out) == before


def test_bad_option_values_are_usage_errors(roots, tmp_path, capsys):
    voc, _ = roots
    with pytest.raises(SystemExit) as stop:
        cli.main(['wds', 'from-voc', voc, str(tmp_path / 'o'), '--samples-per-shard', '0'])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(['wds', 'from-voc', voc, str(tmp_path / 'o'), '--invalid-boxes', 'keep'])
    assert 'invalid choice' in capsys.readouterr().err
