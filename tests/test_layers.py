"""The layers point one way: ``gluonbatch._core`` (the machinery) never imports a
gluonbatch module outside ``_core``; the public modules build on it."""
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


def _packages(root=CORE.parent):
    return [path.parent for path in sorted(root.rglob('__init__.py'))]


@pytest.mark.parametrize('package', _packages(), ids=lambda path: path.name)
def test_each_package_docstring_names_each_of_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / '__init__.py').read_text())) or ''
    modules = [path.stem for path in package.glob('*.py') if path.stem != '__init__']
    modules += [path.parent.name for path in package.glob('*/__init__.py')]
    missing = sorted(name for name in modules if '``%s``' % name not in doc)
    assert not missing, '%s/__init__.py does not name %s' % (package.name, missing)
