"""Every public module imports first in a fresh interpreter, and the package has no import
cycle (one would make the result depend on which module a program happens to import
first)."""
import ast
import pathlib
import subprocess
import sys

import pytest

import gluonbatch

PACKAGE = pathlib.Path(gluonbatch.__file__).resolve().parent

PUBLIC_MODULES = ['gluonbatch', 'gluonbatch.batchify', 'gluonbatch.rcnn', 'gluonbatch.collate',
                  'gluonbatch.dataloader', 'gluonbatch.sharding', 'gluonbatch.memory',
                  'gluonbatch.webdataset', 'gluonbatch.cli', 'gluonbatch.benchmark',
                  'gluonbatch.examples', 'gluonbatch.sampler', 'gluonbatch.bench']


@pytest.mark.parametrize('module', PUBLIC_MODULES)
def test_each_public_module_imports_first_in_a_fresh_interpreter(module):
    code = 'import %s, gluonbatch; print(gluonbatch.Stack()([[1, 2]]).shape)' % module
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == '(1, 2)'


def _module_name(path, package=PACKAGE):
    parts = list(path.relative_to(package.parent).with_suffix('').parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def _imports_at_load(path, name, root='gluonbatch'):
    """Modules of package ``root`` that ``path`` imports while it is being loaded (module
    level); names that are not modules (``from .m import function``) included."""
    is_package = path.name == '__init__.py'
    base = name.split('.') if is_package else name.split('.')[:-1]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            anchor = base[:len(base) - node.level + 1]
            target = '.'.join(anchor + ([node.module] if node.module else []))
            found.update(target + '.' + alias.name for alias in node.names)
            if node.module:
                found.add(target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if (module + '.').startswith(root + '.')}


def _load_graph(imports):
    """``{module: modules it makes Python load first}`` from ``{module: names it imports}``.

    Importing ``a.b.c`` loads the packages on its way (``a``, ``a.b``) before ``a.b.c``, so
    their ``__init__`` files are edges too -- except the importer's own packages (and the
    importer itself), which are loaded before it whatever it imports from them.
    """
    graph = {}
    for name, imported in imports.items():
        parts = name.split('.')
        own = {'.'.join(parts[:k]) for k in range(1, len(parts) + 1)}
        edges = set()
        for target in imported:
            path = target.split('.')
            edges.update('.'.join(path[:k]) for k in range(1, len(path) + 1))
        graph[name] = {module for module in edges if module in imports and module not in own}
    return graph


def _graph(package=PACKAGE):
    modules = {_module_name(path, package): path for path in package.rglob('*.py')}
    return _load_graph({name: _imports_at_load(path, name, package.name)
                        for name, path in modules.items()})


def _find_cycle(graph):
    state, stack = {}, []

    def visit(node):
        state[node] = 'open'
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 'open':
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        state[node] = 'done'
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = _graph()
    assert 'gluonbatch.batchify.rcnn' in graph['gluonbatch.batchify']
    assert _find_cycle(graph) is None, ' -> '.join(_find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert _find_cycle({'a': {'b'}, 'b': set()}) is None


def test_importing_a_module_loads_the_packages_on_its_way():
    graph = _load_graph({'app': {'pkg.sub.leaf'}, 'pkg': set(), 'pkg.sub': {'app'},
                         'pkg.sub.leaf': set()})
    assert graph['app'] == {'pkg', 'pkg.sub', 'pkg.sub.leaf'}
    # app -> pkg.sub.leaf never returns to app, but loading pkg.sub/__init__ on the way does
    assert _find_cycle(graph) == ['app', 'pkg.sub', 'app']
    # a module's own packages are no edges (pkg.sub.leaf does not wait for pkg.sub), but
    # another module's import of pkg.sub.other passes through pkg.sub
    graph = _load_graph({'pkg': {'pkg.sub'}, 'pkg.sub': {'pkg.sub.leaf'},
                         'pkg.sub.leaf': {'pkg.sub.other', 'pkg.x'}, 'pkg.sub.other': set(),
                         'pkg.x': {'pkg.sub.other'}})
    assert graph['pkg.sub.leaf'] == {'pkg.sub.other', 'pkg.x'}
    assert graph['pkg.x'] == {'pkg.sub', 'pkg.sub.other'}
    assert _find_cycle(graph) == ['pkg.sub', 'pkg.sub.leaf', 'pkg.x', 'pkg.sub']


def _write_package(root, files):
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / 'pkg'


def test_a_cycle_through_a_package_init_is_found_in_source(tmp_path):
    """pkg.app imports pkg.sub.leaf; pkg/sub/__init__.py imports pkg.app."""
    files = {'pkg/__init__.py': '', 'pkg/app.py': 'import pkg.sub.leaf\n',
             'pkg/sub/__init__.py': 'from . import leaf\n', 'pkg/sub/leaf.py': '',
             'pkg/sub/other.py': 'from . import leaf\nfrom ..sub import leaf\n'}
    package = _write_package(tmp_path / 'clean', files)
    graph = _graph(package)
    assert graph['pkg.app'] == {'pkg.sub', 'pkg.sub.leaf'}
    assert graph['pkg.sub.other'] == {'pkg.sub.leaf'}
    assert _find_cycle(graph) is None
    files['pkg/sub/__init__.py'] = 'from . import leaf\nfrom .. import app\n'
    graph = _graph(_write_package(tmp_path / 'cycle', files))
    assert _find_cycle(graph) == ['pkg.app', 'pkg.sub', 'pkg.app']
