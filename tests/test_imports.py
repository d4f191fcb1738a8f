"""Every public module imports first in a fresh interpreter, importing gluonbatch has no side
effects a program did not ask for (no heavy libraries, forked children left as Python makes
them), and the package has no import cycle (one would make the result depend on which module
a program happens to import first).

One fresh interpreter serves the checks that need one: it imports ``gluonbatch`` first and
checks it, then imports each other public module first in a child forked from it. Importing
``gluonbatch.x`` always runs ``gluonbatch/__init__.py`` to its end before ``x``, so a child
forked right after ``import gluonbatch`` is where a fresh ``import gluonbatch.x`` would be."""
import json
import pathlib
import subprocess
import sys

import pytest

import gluonbatch
from helpers import imported_names

PACKAGE = pathlib.Path(gluonbatch.__file__).resolve().parent

PUBLIC_MODULES = ['gluonbatch', 'gluonbatch.batchify', 'gluonbatch.collate',
                  'gluonbatch.dataloader', 'gluonbatch.devices', 'gluonbatch.memory',
                  'gluonbatch.shards', 'gluonbatch.curation', 'gluonbatch.detection',
                  'gluonbatch.samplers', 'gluonbatch.seeded', 'gluonbatch.cli',
                  'gluonbatch.examples']

#: Libraries ``import gluonbatch`` must not load beyond what ``import mxnet`` loads itself
#: (MXNet's image module imports OpenCV).
HEAVY = ['gluoncv', 'dask', 'pandas', 'pyarrow', 'cv2', 'matplotlib']

# Run by a fresh interpreter: ``python -c FRESH module...``; prints one JSON report.
FRESH = r"""
import gc, json, os, sys, traceback

HEAVY = %r


def in_child(check):
    # check() in a forked child: {'result': ...} or {'error': traceback}, and its exit status
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            outcome = {'result': check()}
        except BaseException:
            outcome = {'error': traceback.format_exc()}
        with os.fdopen(write, 'w') as pipe:
            json.dump(outcome, pipe)
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        outcome = json.loads(pipe.read() or '{"error": "the child sent nothing"}')
    outcome['status'] = os.waitpid(pid, 0)[1]
    return outcome


def heavy_loaded():
    return sorted(name for name in HEAVY if name in sys.modules)


def mxnet_alone():
    import mxnet
    return heavy_loaded()


def gc_state():
    return [gc.isenabled(), gc.get_freeze_count()]


def imported_first(module):
    def check():
        __import__(module)
        import gluonbatch
        return [str(gluonbatch.Stack()([[1, 2]]).shape), heavy_loaded()]
    return check


report = {'mxnet': in_child(mxnet_alone)}  # forked before anything of gluonbatch is loaded
import gluonbatch
report['gluonbatch'] = heavy_loaded()
report['forks'] = []
for enabled in (True, False):  # a program that merely imported gluonbatch forks
    (gc.enable if enabled else gc.disable)()
    report['forks'].append([gc_state(), in_child(gc_state)])
gc.enable()
report['modules'] = {module: in_child(imported_first(module)) for module in sys.argv[1:]}
# once the program holds an array another process counts, its children leave it alone
import pickle
import mxnet as mx
from multiprocessing.reduction import ForkingPickler
received = pickle.loads(ForkingPickler.dumps(mx.nd.ones((4, 4), ctx=mx.Context('cpu_shared', 0))))
report['received'] = [float(received.sum().asscalar()), gc_state(), in_child(gc_state)]
print(json.dumps(report))
""" % (HEAVY,)


@pytest.fixture(scope='module')
def fresh():
    """The report of one fresh interpreter running :data:`FRESH` for every public module."""
    result = subprocess.run([sys.executable, '-c', FRESH] + PUBLIC_MODULES,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _succeeded(outcome):
    assert 'error' not in outcome, outcome['error'][-2000:]
    assert outcome['status'] == 0
    return outcome['result']


@pytest.mark.parametrize('module', PUBLIC_MODULES)
def test_each_public_module_imports_first_in_a_fresh_interpreter(fresh, module):
    shape, _ = _succeeded(fresh['modules'][module])
    assert shape == '(1, 2)'


def test_importing_gluonbatch_loads_no_heavy_library_that_mxnet_does_not(fresh):
    by_mxnet = _succeeded(fresh['mxnet'])
    assert set(fresh['gluonbatch']) - set(by_mxnet) == set()
    assert set(by_mxnet) <= set(fresh['gluonbatch'])
    # the check sees them: curation loads its data-frame libraries
    _, by_curation = _succeeded(fresh['modules']['gluonbatch.curation'])
    assert {'dask', 'pyarrow'} <= set(by_curation)


def test_a_program_that_imported_gluonbatch_forks_children_with_their_collector_untouched(
        fresh):
    """``gc.isenabled()`` and ``gc.get_freeze_count()`` in a child forked by the program, with
    the collector on and off, are the program's own."""
    assert [parent[0] for parent, _ in fresh['forks']] == [True, False]
    for parent, child in fresh['forks']:
        assert _succeeded(child) == parent


def test_once_the_program_received_a_shared_array_its_children_leave_inherited_objects_alone(
        fresh):
    """After receiving an NDArray through gluonbatch's reducer (in that same fresh program,
    so no earlier test has done it first), the children it forks freeze what they inherit."""
    total, parent, child = fresh['received']
    assert total == 16
    enabled, frozen = _succeeded(child)
    assert enabled == parent[0] and frozen > parent[1]


def _module_name(path, package=PACKAGE):
    parts = list(path.relative_to(package.parent).with_suffix('').parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def _imports_at_load(path, name, root='gluonbatch'):
    """Modules of package ``root`` that ``path`` imports while it is being loaded (module
    level); names that are not modules (``from .m import function``) included."""
    found = imported_names(path.read_text(), name, path.name == '__init__.py', anywhere=False)
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
