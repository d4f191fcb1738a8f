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
                  'gluonbatch.examples']


@pytest.mark.parametrize('module', PUBLIC_MODULES)
def test_each_public_module_imports_first_in_a_fresh_interpreter(module):
    code = 'import %s, gluonbatch; print(gluonbatch.Stack()([[1, 2]]).shape)' % module
    result = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == '(1, 2)'


def _module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix('').parts)
    if parts[-1] == '__init__':
        parts.pop()
    return '.'.join(parts)


def _imports_at_load(path, name):
    """Package modules that ``path`` imports while it is being loaded (module level)."""
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
    return {module for module in found if module.startswith('gluonbatch')}


def _graph():
    modules = {_module_name(path): path for path in PACKAGE.rglob('*.py')}
    # a module's own packages are loaded before it, whatever it imports from them
    return {name: {m for m in _imports_at_load(path, name)
                   if m in modules and not (name + '.').startswith(m + '.')}
            for name, path in modules.items()}


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
    assert 'gluonbatch.batchify' in graph and 'gluonbatch.rcnn' in graph['gluonbatch.batchify']
    assert _find_cycle(graph) is None, ' -> '.join(_find_cycle(graph))


def test_the_cycle_finder_finds_a_cycle():
    assert _find_cycle({'a': {'b'}, 'b': {'c'}, 'c': {'a'}}) == ['a', 'b', 'c', 'a']
    assert _find_cycle({'a': {'b'}, 'b': set()}) is None
