"""``gluonbatch info``: the versions gluonbatch runs with, and which of its optional parts
are installed (each missing one with the install extra that brings it and what it is for).

Nothing optional is imported: a part is found by its module, its version read from the
installed package's metadata, so the command answers in a moment and whatever is broken.
"""
import argparse
import functools
import importlib.metadata
import importlib.util
import platform

import mxnet as mx
import numpy as np

from .usage import SubParsers

__all__ = ['OPTIONAL_PARTS', 'add_parser', 'run', 'part_version', 'report']

#: The optional parts: ``(name, module, extra, what it is for)``, ``pip install
#: 'gluonbatch[extra]'`` installing the module.
OPTIONAL_PARTS: tuple[tuple[str, str, str, str], ...] = (
    ('simplejpeg', 'simplejpeg', 'jpeg',
     'fast JPEG decoding (else MXNet decodes, 2-3x slower)'),
    ('opencv-python', 'cv2', 'transforms', 'gluonbatch.transforms (pixel work in OpenCV)'),
    ('pyarrow', 'pyarrow', 'shards', "shards: the records' parquet metadata"),
    ('Pillow', 'PIL', 'shards', 'shards: WebP images'),
    ('tqdm', 'tqdm', 'shards', 'shards: progress bars'),
    ('pandas', 'pandas', 'curation', 'curation: the metadata as DataFrames'),
    ('dask', 'dask', 'curation', 'curation: lazy Dask DataFrames'),
    ('distributed', 'distributed', 'curation', 'curation: Dask clusters'),
    ('gluoncv', 'gluoncv', 'examples',
     "example loaders, gluoncv's VOC/COCO datasets, the reference"),
    ('pycocotools', 'pycocotools', 'examples', "COCO masks (Mask R-CNN's polygons)"),
)


@functools.lru_cache(maxsize=1)
def _distributions():
    """Top-level module -> the distributions providing it: read once (it scans every
    installed package)."""
    return importlib.metadata.packages_distributions()


def part_version(module: str) -> str | None:
    """The installed version of the package that provides ``module`` (a top-level module
    name), ``'version unknown'`` without package metadata, None if it is not installed.

    >>> part_version('numpy') == np.__version__, part_version('no_such_module_here')
    (True, None)
    """
    try:
        if importlib.util.find_spec(module) is None:
            return None
    except (ImportError, ValueError):  # a module made unimportable on purpose, say
        return None
    for distribution in _distributions().get(module, ()):
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return 'version unknown'


def report() -> list[str]:
    """The lines ``gluonbatch info`` prints: gluonbatch's, Python's, MXNet's and numpy's
    versions, then one line per optional part, found (its version) or missing (the
    install extra), then whether shared-memory recycling works with this MXNet build."""
    from .. import __version__
    from ..memory import recycling_unavailable

    lines = ['%-12s %s' % (name, version) for name, version in (
        ('gluonbatch', __version__), ('Python', platform.python_version()),
        ('MXNet', mx.__version__), ('numpy', np.__version__))]
    lines.append('optional parts:')
    for name, module, extra, purpose in OPTIONAL_PARTS:
        version = part_version(module)
        if version is None:
            lines.append("  %-14s %-13s %s; pip install 'gluonbatch[%s]'"
                         % (name, 'missing', purpose, extra))
        else:
            lines.append('  %-14s %-13s %s' % (name, version, purpose))
    unavailable = recycling_unavailable()
    lines.append('shared-memory recycling: %s' % (
        'available' if unavailable is None else 'unavailable (%s)' % unavailable))
    return lines


def add_parser(commands: SubParsers) -> argparse.ArgumentParser:
    """Add the ``info`` command to the ``commands`` sub-parsers.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog='gluonbatch')
    >>> add_parser(parser.add_subparsers()).parse_args([]).run is run
    True
    """
    info = commands.add_parser(
        'info', help='print the versions gluonbatch runs with and which optional parts '
                     '(simplejpeg, shards, curation, gluoncv) are installed',
        description='Print the versions of gluonbatch, Python, MXNet and numpy, and one line '
                    'per optional part: its version, or the install extra that brings it.')
    info.set_defaults(run=run)
    return info


def run(args: argparse.Namespace) -> int:
    """Print :func:`report`'s lines; returns 0."""
    print('\n'.join(report()))
    return 0
