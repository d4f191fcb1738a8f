"""The package's type contracts: mypy finds no error in it, and its public API is annotated
throughout.

The rule: every function and class that a public module (one whose dotted path has no part
starting with ``_``) lists in ``__all__`` has its parameters and its return annotated: a
function itself; a class, its ``__init__`` (returning ``None``) and the public methods and
properties its own body defines, the dunders a caller uses (``__call__``, ``__getitem__``,
``__iter__``, ...) included. ``self`` and ``cls`` need no annotation; ``*args`` and
``**kwargs`` do. The annotations must resolve (``typing.get_type_hints``): Sphinx and
runtime checkers read them.
"""
import functools
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import typing

import pytest

import gluonbatch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: Dunders a caller uses (through syntax or a protocol): checked like public methods.
CALLER_DUNDERS = frozenset({'__init__', '__call__', '__getitem__', '__len__', '__iter__',
                            '__next__', '__contains__', '__enter__', '__exit__'})


def public_modules():
    """Every public module of gluonbatch, the package itself first."""
    names = ['gluonbatch']
    for info in pkgutil.walk_packages(gluonbatch.__path__, 'gluonbatch.'):
        if not any(part.startswith('_') for part in info.name.split('.')):
            names.append(info.name)
    return names


def missing_annotations(function, where, method=False):
    """What ``function`` leaves unannotated (or unresolvable), one line each."""
    signature = inspect.signature(function)
    parameters = list(signature.parameters.values())
    if method and parameters and parameters[0].name in ('self', 'cls'):
        parameters = parameters[1:]
    problems = ['%s: parameter %r has no annotation' % (where, parameter.name)
                for parameter in parameters
                if parameter.annotation is inspect.Parameter.empty]
    if signature.return_annotation is inspect.Signature.empty:
        problems.append('%s: no return annotation' % where)
    elif function.__name__ == '__init__' and signature.return_annotation is not None:
        problems.append('%s: __init__ must return None, says %r'
                        % (where, signature.return_annotation))
    try:
        typing.get_type_hints(function)
    except Exception as err:  # a NameError for a name the module does not define, say
        problems.append('%s: annotations do not resolve: %r' % (where, err))
    return problems


def class_functions(cls):
    """``(name, function)`` of the public methods, property accessors and caller dunders
    defined in ``cls``'s own body (not the ones Python generates, a NamedTuple's say)."""
    for name, member in vars(cls).items():
        if name.startswith('_') and name not in CALLER_DUNDERS:
            continue
        if isinstance(member, (staticmethod, classmethod)):
            member = member.__func__
        elif isinstance(member, functools.cached_property):
            member = member.func
        if isinstance(member, property):
            yield from ((name, accessor) for accessor in (member.fget, member.fset, member.fdel)
                        if accessor is not None)
        elif inspect.isfunction(member) and member.__module__ == cls.__module__:
            yield name, member


def module_problems(module_name):
    module = importlib.import_module(module_name)
    problems = []
    for name in getattr(module, '__all__', ()):
        obj = getattr(module, name)
        if not getattr(obj, '__module__', '').startswith('gluonbatch'):
            continue  # a constant, a module, another library's class
        where = '%s.%s' % (module_name, name)
        if inspect.isclass(obj):
            for member_name, function in class_functions(obj):
                problems += missing_annotations(function, '%s.%s' % (where, member_name),
                                                method=True)
        elif inspect.isroutine(obj):
            problems += missing_annotations(obj, where)
    return problems


def test_mypy_finds_no_errors():
    """``mypy`` over the package (mypy.ini at the root says how) exits 0."""
    run = subprocess.run([sys.executable, '-m', 'mypy', '--config-file',
                          os.path.join(ROOT, 'mypy.ini')],
                         cwd=ROOT, capture_output=True, text=True)
    print(run.stdout, run.stderr)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith('Success: no issues found'), run.stdout


def test_every_package_is_walked():
    """The walk reaches the modules of every subpackage, and no private one."""
    public = public_modules()
    assert {'gluonbatch', 'gluonbatch.batchify.arrays', 'gluonbatch.devices',
            'gluonbatch.transforms.presets.ssd', 'gluonbatch.shards.reader'} <= set(public)
    assert not [name for name in public if '._' in name]


@pytest.mark.parametrize('module_name', public_modules())
def test_public_api_is_annotated(module_name):
    problems = module_problems(module_name)
    assert not problems, '\n'.join(problems)


def test_the_check_sees_what_is_missing():
    """The rule's check itself: an unannotated parameter, return, ``**kwargs`` and a
    property are found; ``self`` is not asked for."""
    class Example:
        def __init__(self, size: int) -> None:
            self.size = size

        def grow(self, by, **options: int):
            return self.size + by

        @property
        def area(self):
            return self.size ** 2

    found = [problem for name, function in class_functions(Example)
             for problem in missing_annotations(function, name, method=True)]
    assert found == ["grow: parameter 'by' has no annotation", 'grow: no return annotation',
                     'area: no return annotation']

    def spread(*values: float, **weights) -> float:
        return sum(values)

    assert missing_annotations(spread, 'spread') == [
        "spread: parameter 'weights' has no annotation"]
