"""The documentation builds with warnings as errors, its internal links resolve, and the
benchmark's bar chart is a PNG.

The build is what ``make docs`` runs (``-W --keep-going -n``), into a temporary directory.
"""
import html.parser
import os
import posixpath
import urllib.parse

import pytest

from benchmarks import plot, runner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')
PNG = b'\x89PNG\r\n\x1a\n'

sphinx_build = pytest.importorskip('sphinx.cmd.build')


# the whole Sphinx build, as `make docs` runs it: the tests that read it are in the slow tier
@pytest.fixture(scope='module')
def html_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp('docs_html')
    doctrees = tmp_path_factory.mktemp('doctrees')
    status = sphinx_build.build_main(['-W', '--keep-going', '-n', '-q', '-E', '-b', 'html',
                                      '-d', str(doctrees), DOCS, str(out)])
    assert status == 0, 'sphinx reported warnings or errors (see the captured output)'
    return out


def _read(path):
    with open(path, encoding='utf-8') as handle:
        return handle.read()


@pytest.mark.slow
def test_docs_build_without_warnings(html_dir):
    index = _read(html_dir / 'index.html')
    assert 'gluonbatch' in index
    api = _read(html_dir / 'api.html')
    for name in ('Pad', 'Stack', 'FasterRCNNTrainBatchify', 'ImageTextPairDataset',
                 'SplitSampler', 'default_collate', 'SharedMemoryError'):
        assert name in api, name
    for page in ('migration', 'choosing', 'detection', 'scaling', 'reproducible', 'memory',
                 'curation', 'shards', 'performance', 'cli', 'glossary'):
        assert (html_dir / ('%s.html' % page)).is_file(), page
    assert 'usage: gluonbatch' in _read(html_dir / 'cli.html')


@pytest.mark.slow
def test_detection_page_names_every_field(html_dir):
    from gluonbatch.examples import center_net, rcnn, ssd, yolo

    fields = set(ssd.TRAIN_FIELDS + ssd.VAL_FIELDS + yolo.TRAIN_FIELDS + yolo.VAL_FIELDS
                 + center_net.TRAIN_FIELDS + center_net.VAL_FIELDS)
    for kind in ('faster', 'mask'):
        fields.update(rcnn.TRAIN_FIELDS[kind] + rcnn.VAL_FIELDS[kind])
    page = _read(html_dir / 'detection.html')
    missing = sorted(name for name in fields if '>%s<' % name not in page)
    assert not missing, 'fields not described on the detection page: %s' % missing


#: The packages whose exported names (``__all__``) are documented at the package, the import
#: path users write; a name ``gluonbatch`` itself exports may be documented there instead.
DOCUMENTED_PACKAGES = ('gluonbatch.batchify', 'gluonbatch.dataloader', 'gluonbatch.collate',
                       'gluonbatch.devices', 'gluonbatch.samplers', 'gluonbatch.seeded',
                       'gluonbatch.shards', 'gluonbatch.curation', 'gluonbatch.detection',
                       'gluonbatch.transforms.presets', 'gluonbatch.memory')
_OBJECT_TYPES = ('py:class', 'py:exception', 'py:function')


def _inventory(html_dir):
    from sphinx.util.inventory import InventoryFile

    with open(html_dir / 'objects.inv', 'rb') as handle:
        return InventoryFile.load(handle, '', posixpath.join)


@pytest.mark.slow
def test_every_exported_name_is_documented_at_its_package(html_dir):
    import importlib
    import inspect

    import gluonbatch

    inventory = _inventory(html_dir)
    documented = {name for kind in _OBJECT_TYPES + ('py:data',)
                  for name in inventory.get(kind, {})}
    missing = []
    for package_name in DOCUMENTED_PACKAGES:
        package = importlib.import_module(package_name)
        for name in package.__all__:
            obj = getattr(package, name)
            if inspect.ismodule(obj):
                continue
            top = getattr(gluonbatch, name, None)
            if ('%s.%s' % (package_name, name) not in documented
                    and not (top is obj and 'gluonbatch.%s' % name in documented)):
                missing.append('%s.%s' % (package_name, name))
    assert not missing, 'not documented at their package: %s' % missing


@pytest.mark.slow
def test_no_object_is_documented_under_two_names(html_dir):
    """A class or function has one entry; its other import paths (the module that defines
    it) are only aliases of that entry, pointing at the same place."""
    import pydoc

    places = {}
    for kind in _OBJECT_TYPES:
        for name, (_, _, location, _) in _inventory(html_dir).get(kind, {}).items():
            if name.startswith('gluonbatch.'):
                obj = pydoc.locate(name)
                if obj is not None:
                    places.setdefault(id(obj), set()).add((location, name))
    twice = sorted(sorted(names) for names in places.values()
                   if len({location for location, _ in names}) > 1)
    assert not twice, 'documented under two names: %s' % twice


class _Links(html.parser.HTMLParser):
    """Collects every href and src attribute of a page."""

    def __init__(self):
        super().__init__()
        self.links = []

    def handle_starttag(self, tag, attrs):
        self.links.extend(value for name, value in attrs if name in ('href', 'src') and value)


@pytest.mark.slow
def test_internal_links_resolve(html_dir):
    broken, checked = [], 0
    for folder, _, files in os.walk(html_dir):
        for name in files:
            if not name.endswith('.html'):
                continue
            page = os.path.join(folder, name)
            parser = _Links()
            parser.feed(_read(page))
            for link in parser.links:
                parts = urllib.parse.urlsplit(link)
                if parts.scheme or parts.netloc or not parts.path:
                    continue  # http(s), mailto, javascript, or a '#fragment' on this page
                target = os.path.normpath(os.path.join(
                    folder, urllib.parse.unquote(posixpath.normpath(parts.path))))
                checked += 1
                if not os.path.exists(target):
                    broken.append('%s: %s' % (os.path.relpath(page, html_dir), link))
    assert checked > 50
    assert not broken, 'broken links:\n' + '\n'.join(broken)


@pytest.mark.slow
def test_every_picture_is_in_the_build(html_dir):
    images = os.listdir(html_dir / '_images')
    import sys
    sys.path.insert(0, DOCS)
    from figures import FIGURES

    for name in list(FIGURES) + ['bench_ratios', 'demo_batch']:
        assert name + '.png' in images, name


@pytest.mark.slow
def test_benchmark_table_shows_case_names_as_code(html_dir):
    page = _read(html_dir / 'performance.html')
    for name in ('pad_labels', 'rcnn_fpn', 'webdataset'):
        assert '<span class="pre">%s</span></code>' % name in page, name
    assert '`' not in page.split('<table', 1)[1].split('</table>', 1)[0]


def test_plot_ratios_writes_a_png(tmp_path):
    def case(name, ours, theirs):
        return {'case': name, 'ratios': {'gluonbatch/floor': ours, 'gluoncv/floor': theirs,
                                         'gluoncv/gluonbatch': theirs / ours}}

    results = {'machine': {'cpus_usable': 2, 'python': '3.11'}, 'quick': False,
               'cases': [case('pad_labels', 1.1, 43.0), case('stack_numpy', 0.5, 1.2),
                         case('webdataset', 400.0, 730.0),  # a panel of its own
                         {'case': 'memory', 'medians_ms': {}}]}  # no ratios: left out
    out = tmp_path / 'ratios.png'
    assert plot.plot_ratios(results, str(out)) == str(out)
    data = out.read_bytes()
    assert data[:8] == PNG and len(data) > 1000
    with pytest.raises(ValueError):
        plot.plot_ratios({'cases': [{'case': 'memory'}]}, str(tmp_path / 'none.png'))


def test_bench_plot_option(tmp_path):
    out = tmp_path / 'bench.png'
    assert runner.main(['--quick', '--only', 'pad_labels', '--plot', str(out)]) == 0
    assert out.read_bytes()[:8] == PNG
