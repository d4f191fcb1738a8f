"""Shard discovery: ``NNNNN.tar`` with ``NNNNN.parquet`` and optionally ``NNNNN.idx``
beside it.

A *shard* is one tar file with its parquet (and index). Every rank opens all of a dataset's
shards; a sampler gives each its part of the records (:mod:`gluonbatch.samplers.ranks`).
"""
import contextlib
import os
import re
from collections.abc import Iterable, Iterator

from .._core.typing import PathLike
from .._core.wording import plural

__all__ = ['SHARD_FILE', 'Shard', 'find_shards', 'shard_files', 'stem_order', 'examples',
           'temporary_name', 'replacing', 'remove_quietly']

#: A shard file's name: group 1 its stem (digits), group 2 its kind.
SHARD_FILE = re.compile(r'^(\d+)\.(tar|parquet|idx)$')
_EXAMPLES = 5                       # ids listed in an error message


def examples(values: Iterable[str]) -> str:
    """The first few of ``values`` (sorted) for an error message, with how many more.

    >>> examples(['b', 'a'])
    "'a', 'b'"
    """
    values = sorted(values)
    more = ' and %d more' % (len(values) - _EXAMPLES) if len(values) > _EXAMPLES else ''
    return ', '.join(map(repr, values[:_EXAMPLES])) + more


def remove_quietly(path: PathLike) -> None:
    """Remove the file ``path`` if it exists."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def temporary_name(path: PathLike) -> str:
    """The hidden name beside ``path`` that a file is written to before it is renamed.

    >>> temporary_name('/data/00001.tar')
    '/data/.00001.tar.tmp'
    """
    directory, name = os.path.split(os.path.abspath(path))
    return os.path.join(directory, '.%s.tmp' % name)


@contextlib.contextmanager
def replacing(path: PathLike) -> Iterator[str]:
    """Yield a temporary name beside ``path`` to write; rename it to ``path`` on success.

    The temporary file (``.<name>.tmp``) is removed whatever happens, so a failed write
    leaves neither a partial file nor the temporary one.
    """
    tmp = temporary_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        remove_quietly(tmp)


# --------------------------------------------------------------------------- shards

class Shard:
    """One shard: its files, and where its records are in the dataset's record arrays."""

    __slots__ = ('stem', 'tar', 'parquet', 'idx', 'tar_size', 'start', 'stop')

    def __init__(self, directory: PathLike, stem: str, has_idx: bool) -> None:
        self.stem = stem
        self.tar = os.path.join(directory, stem + '.tar')
        self.parquet = os.path.join(directory, stem + '.parquet')
        self.idx: str | None = os.path.join(directory, stem + '.idx') if has_idx else None
        self.tar_size = 0
        self.start = self.stop = 0


def shard_files(directory: PathLike) -> dict[str, set[str]]:
    """``{'tar': stems, 'parquet': stems, 'idx': stems}``: the shard files of ``directory``
    by kind (sets of stems); FileNotFoundError if it is not a directory."""
    if not os.path.isdir(directory):
        raise FileNotFoundError('no dataset directory %s' % directory)
    found: dict[str, set[str]] = {'tar': set(), 'parquet': set(), 'idx': set()}
    for name in os.listdir(directory):
        match = SHARD_FILE.match(name)
        if match and os.path.isfile(os.path.join(directory, name)):
            found[match.group(2)].add(match.group(1))
    return found


def stem_order(stem: str) -> tuple[int, str]:
    """The sort key of shard stems: numeric order."""
    return int(stem), stem


def find_shards(directory: PathLike) -> tuple[list[str], set[str]]:
    """The shard stems of ``directory`` in numeric order; FileNotFoundError for lone files."""
    found = shard_files(directory)
    tars, parquets = found['tar'], found['parquet']
    if not tars and not parquets:
        raise FileNotFoundError('%s holds no shards (NNNNN.tar with NNNNN.parquet)'
                                % directory)
    for stems, ext, other in ((tars - parquets, 'tar', 'parquet'),
                              (parquets - tars, 'parquet', 'tar'),
                              (found['idx'] - tars, 'idx', 'tar')):
        if stems:
            stem = min(stems, key=stem_order)
            raise FileNotFoundError('%s has no %s beside it (%s: %s without a .%s)'
                                    % (os.path.join(directory, stem + '.' + ext),
                                       stem + '.' + other, os.path.join(directory, '*.' + ext),
                                       plural(len(stems), 'shard file'), other))
    return sorted(tars, key=stem_order), found['idx']
