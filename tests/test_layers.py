"""The layers point one way: ``gluonbatch._core`` (the machinery) never imports a
gluonbatch module outside ``_core``; the public modules build on it; on the data side the
format (``shards``) imports nothing above it, and curation and detection build on it."""
import ast
import pathlib

import pytest

import gluonbatch
from helpers import imported_names

CORE = pathlib.Path(gluonbatch.__file__).resolve().parent / '_core'


def outside_imports(source, package='gluonbatch._core'):
    """The gluonbatch modules (and names in them) outside ``package`` that ``source`` (a
    module of ``package``) imports, anywhere in it (at load time or in a function)."""
    return sorted(name for name in imported_names(source, package + '.module')
                  if (name + '.').startswith('gluonbatch.')
                  and not (name + '.').startswith(package + '.'))


@pytest.mark.parametrize('path', sorted(CORE.glob('*.py')), ids=lambda path: path.name)
def test_core_imports_nothing_outside_core(path):
    assert outside_imports(path.read_text()) == []


def test_the_check_sees_every_kind_of_import():
    assert outside_imports('from .. import memory\n') == ['gluonbatch.memory']
    assert outside_imports('from ..memory import get_memory\n') == [
        'gluonbatch.memory', 'gluonbatch.memory.get_memory']
    assert outside_imports('def f():\n    import gluonbatch.batchify\n') == [
        'gluonbatch.batchify']
    assert outside_imports('from gluonbatch.dataloader import pool\n') == [
        'gluonbatch.dataloader', 'gluonbatch.dataloader.pool']
    assert outside_imports('from . import recycle\nfrom .checks import describe\n'
                           'from gluonbatch._core import native\nimport numpy\n') == []


#: The data side, one way: what each package may import of gluonbatch besides itself and
#: ``_core``. ``detection`` imports ``curation`` only for its Dask metadata, on demand.
DATA_SIDE = {
    'shards': set(),
    'seeded': set(),
    'samplers': {'seeded'},
    'curation': {'shards', 'batchify'},
    'detection': {'shards', 'curation'},
}


@pytest.mark.parametrize('package', sorted(DATA_SIDE))
def test_the_data_side_imports_one_way(package):
    root = CORE.parent / package
    allowed = {'gluonbatch.' + name for name in DATA_SIDE[package] | {package, '_core'}}
    found = {}
    for path in sorted(root.glob('*.py')):
        beyond = [name for name in outside_imports(path.read_text(), 'gluonbatch.' + package)
                  if not any((name + '.').startswith(ok + '.') for ok in allowed)]
        if beyond:
            found[path.name] = beyond
    assert found == {}, '%s imports beyond %s' % (package, sorted(allowed))
