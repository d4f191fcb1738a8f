"""Sphinx configuration of the gluonbatch documentation (``make docs``).

Besides the usual settings, this file generates, at every build, the files the pages
include from ``docs/_generated/`` (ignored by git):

* one PNG per batchify function, drawn by ``docs/figures.py`` from the real outputs of
  the functions;
* the benchmark bar chart, drawn from the committed ``docs/bench_results.json`` by
  :func:`benchmarks.plot.plot_ratios` (what ``python -m benchmarks --plot`` uses), its
  tables of times and of goals, and its machine facts (the benchmark itself is not run);
* the ``--help`` text of the ``gluonbatch`` command and its sub-commands;
* the tables of deliberate differences, taken from README.md so the two never disagree.
"""
import contextlib
import io
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GENERATED = os.path.join(HERE, '_generated')
sys.path.insert(0, ROOT)  # gluonbatch, and the benchmarks package of the source tree
sys.path.insert(0, HERE)  # figures.py
os.environ['COLUMNS'] = '88'  # argparse wraps --help text to this width

import gluonbatch  # noqa: E402

project = 'gluonbatch'
author = 'the gluonbatch authors'
copyright = '2024, the gluonbatch authors'
version = release = gluonbatch.__version__

extensions = ['sphinx.ext.autodoc', 'sphinx.ext.napoleon', 'sphinx.ext.viewcode']
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True}
# "Attributes" sections as fields, so a documented property is not described twice.
napoleon_use_ivar = True

exclude_patterns = ['_build', '_generated', 'Thumbs.db', '.DS_Store']
html_theme = 'alabaster'
html_static_path = []
html_theme_options = {'description': 'fast shared-memory batches for MXNet Gluon',
                      'fixed_sidebar': True}

# `-n` checks every cross-reference, and every reference to a module, function, method,
# attribute or constant must resolve. Types are checked when they name gluonbatch or the
# benchmarks: those of other libraries in annotations and parameter types (numpy.ndarray,
# mx.nd.NDArray, "int, optional", ...) have no inventory offline. Nor do the other
# libraries' modules and functions named here.
nitpick_ignore_regex = [(r'py:(class|obj)', r'(?!gluonbatch\b|benchmarks\b).*'),
                        (r'py:(mod|func)', r'(random|tarfile|runpy)(\..*)?')]



def constant_comment(app, what, name, obj, options, lines):
    """A constant a package re-exports is documented at the package (``.. autodata::
    gluonbatch.memory.MODES``), but autodoc reads ``#:`` comments only in the module being
    documented: the comment is taken from the module that assigns the constant."""
    from sphinx.pycode import ModuleAnalyzer

    package, _, attr = name.rpartition('.')
    if what != 'data' or not package.startswith('gluonbatch'):
        return
    for module_name in sorted(sys.modules):
        module = sys.modules[module_name]
        if (module_name.startswith('gluonbatch') and module_name != package
                and getattr(module, attr, None) is obj):
            comment = ModuleAnalyzer.for_module(module_name).find_attr_docs().get(('', attr))
            if comment:
                lines[:] = list(comment)
                return


def source_module(app, modname, fullname):
    """The module whose source viewcode links an object to: the one its ``__module__``
    names, or, for a type alias (``tuple[...]`` says ``builtins``, which has no source),
    the module it is documented in."""
    import importlib

    try:
        value = importlib.import_module(modname)
        for attr in fullname.split('.'):
            value = getattr(value, attr)
    except (ImportError, AttributeError):
        return None
    found = getattr(value, '__module__', None)
    if isinstance(found, str) and found.split('.')[0] in ('gluonbatch', 'benchmarks'):
        return found
    return modname


def setup(app):
    app.connect('autodoc-process-docstring', constant_comment)
    app.connect('viewcode-follow-imported', source_module)


# --------------------------------------------------------------------------- generated files

def _write(name, text):
    path = os.path.join(GENERATED, name)
    with open(path, 'w', encoding='utf-8') as handle:
        handle.write(text)
    return path


def _indent(text, spaces=3):
    return '\n'.join((' ' * spaces + line) if line.strip() else '' for line in
                     text.splitlines())


def _help_text(argv):
    """What ``gluonbatch ARGV --help`` prints."""
    from gluonbatch import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main(argv + ['--help'])
        except SystemExit:
            pass
    return out.getvalue().rstrip()


def cli_help():
    """``_generated/cli_help.txt``: literal blocks of every command's ``--help``."""
    commands = [[], ['demo'], ['show'], ['info'], ['wds'], ['wds', 'index'],
                ['wds', 'inspect'], ['wds', 'verify'], ['wds', 'reshard'], ['wds', 'embed'],
                ['wds', 'score'], ['wds', 'filter'], ['wds', 'from-voc'],
                ['wds', 'from-coco']]
    parts = []
    for argv in commands:
        command = ' '.join(['gluonbatch'] + argv)
        parts.append('``%s --help``\n\n.. code-block:: text\n\n%s\n'
                     % (command, _indent(_help_text(argv))))
    _write('cli_help.txt', '\n'.join(parts))


def _rst_inline(text):
    """Markdown inline code to reStructuredText literals."""
    return re.sub(r'`([^`]+)`', r'``\1``', text).replace('\\|', '|')


def markdown_table(heading, columns):
    """The first markdown table after README's ``## heading``, as rows of cells."""
    with open(os.path.join(ROOT, 'README.md'), encoding='utf-8') as handle:
        text = handle.read()
    section = text.split('\n## %s\n' % heading, 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith('|'):
            cells = [cell.strip() for cell in line.strip().strip('|').split('|')]
            if all(set(cell) <= set('-: ') for cell in cells):
                continue
            if len(cells) != columns:
                raise ValueError('README table under %r: row with %d cells: %s'
                                 % (heading, len(cells), line))
            rows.append(cells)
        elif rows:
            break
    return rows


def list_table(rows, widths):
    """An rst list-table of ``rows`` (the first is the header); cells are written as in
    README's markdown (a name in single backquotes is inline code)."""
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: %s' % ' '.join(map(str, widths)), '']
    for row in rows:
        for index, cell in enumerate(row):
            lines.append('   %s %s' % ('* -' if index == 0 else '  -',
                                       _rst_inline(cell) or '\\'))
    return '\n'.join(lines) + '\n'


def readme_tables():
    """``_generated/differences*.txt`` from README's tables of deliberate differences."""
    rows = markdown_table('Deliberate differences from gluoncv 0.10.5', 4)
    _write('differences.txt', list_table(rows, (22, 22, 26, 20)))
    rows = markdown_table('Deliberate differences from GluonNLP 0.10.0', 4)
    _write('differences_gluonnlp.txt', list_table(rows, (22, 22, 26, 20)))


def benchmark_files():
    """The chart, the tables of times and of checks, and the machine facts of
    ``docs/bench_results.json``."""
    from benchmarks.plot import plot_ratios
    from benchmarks.report import format_goal, format_value

    with open(os.path.join(HERE, 'bench_results.json'), encoding='utf-8') as handle:
        results = json.load(handle)
    plot_ratios(results, os.path.join(GENERATED, 'bench_ratios.png'))
    rows = [['case', 'what is batched', 'gluonbatch ms', 'gluoncv ms', 'floor ms',
             'gluoncv / gluonbatch', 'gluonbatch / floor', 'gluoncv / floor']]
    for case in results['cases']:
        medians, ratios = case.get('medians_ms', {}), case.get('ratios', {})
        if not ratios:
            continue
        # list_table takes README-style cells: `name` becomes an inline literal
        # the curation cases have no gluoncv contender: '-'
        rows.append(['`%s`' % case['case'], case.get('title', '')]
                    + ['%.3f' % medians[name] if name in medians else '-'
                       for name in ('gluonbatch', 'gluoncv', 'floor')]
                    + ['%.2fx' % ratios[key] if key in ratios else '-' for key in
                       ('gluoncv/gluonbatch', 'gluonbatch/floor', 'gluoncv/floor')])
    _write('bench_table.txt', list_table(rows, (12, 30, 9, 9, 9, 10, 10, 10)))
    checks = [['case', 'metric', 'measured', 'goal']]
    for case in results['cases']:
        for check in case.get('checks', []):
            goal = check['goal'] and (check['goal']['op'], check['goal']['bound'])
            checks.append(['`%s`' % case['case'], check['metric'], format_value(check),
                           format_goal(dict(check, goal=goal))])
    _write('bench_checks.txt', list_table(checks, (14, 40, 10, 10)))
    _write('bench_curation.txt', curation_table(results['cases']))
    machine = results.get('machine', {})
    facts = ['* **%s**: ``%s``' % (key, value) for key, value in machine.items()]
    facts.append('* **mode**: %s, seed %s' % ('quick (smoke) mode' if results.get('quick')
                                              else 'full run', results.get('seed')))
    _write('bench_machine.txt', '\n'.join(facts) + '\n')


def curation_table(cases):
    """Records/s of the curation cases per scheduler, and the driver's peak memory."""
    from benchmarks.report import steal_summary

    names = (('gluonbatch', '2 Dask workers'), ('dask_1_worker', '1 Dask worker'),
             ('threads', 'threads (1 process)'), ('single_process', 'synchronous (1 process)'),
             ('floor', 'floor'))
    curation = [case for case in cases if case['case'].startswith('curation')]
    if not curation:
        return 'The committed results have no curation case.\n'
    rows = [['records/s'] + ['`%s`' % case['case'] for case in curation]]
    for key, label in names:
        rows.append([label] + ['%.0f' % case['records_per_s'][key] for case in curation])
    # what a virtual machine's host took meanwhile: rounds under a large share vary
    rows.append(['host steal while timing'] + [steal_summary(case) or 'not recorded'
                                               for case in curation])
    text = list_table(rows, [20] + [20] * len(curation))
    for case in curation:
        if 'driver_peak_mb' in case:
            peak = case['driver_peak_mb']
            rows = [['driver process', 'peak MB over its imports'],
                    ['threads, all the data', '%.0f' % peak['threads']],
                    ['threads, a quarter of the data', '%.0f' % peak['threads_quarter']],
                    ['client of the 2-worker cluster', '%.0f' % peak['cluster']],
                    ['eager: one pandas DataFrame', '%.0f' % peak['eager']],
                    ['one partition (pandas, deep)', '%.1f' % case['partition_mb']]]
            text += '\n' + list_table(rows, (30, 20))
    return text


def generate():
    from figures import draw_all

    os.makedirs(GENERATED, exist_ok=True)
    draw_all(GENERATED)
    benchmark_files()
    cli_help()
    readme_tables()


generate()
