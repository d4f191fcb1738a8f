"""A dataset's manifest: a JSON file beside the shards that lists them, for datasets whose
records mean more than the format says.

Detection datasets carry one, ``detection.json``
(:mod:`gluonbatch.detection.annotations` says what its other fields mean). Its ``shards``
field lists each shard's stem and number of records, in dataset order, so that opening
the dataset reads this one file and nothing per shard. This module knows only that list:
a resharding writes the new one and keeps the other fields
(:mod:`gluonbatch.curation.reshard`), and :func:`~gluonbatch.shards.verify` checks it
against the files. It is written in the same commit as the shards and moved last, so a
reader finds it only beside every shard it lists.
"""
import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._core.typing import PathLike
from .._core.wording import plural

__all__ = ['MANIFEST', 'MANIFEST_TMP', 'VERIFY_HINT', 'hinted', 'load_manifest',
           'write_manifest', 'with_shards', 'listed_shards', 'manifest_problems']

#: The manifest's file name in a dataset directory.
MANIFEST = 'detection.json'
#: Its name in a commit's staging directory, until the commit moves it.
MANIFEST_TMP = '.' + MANIFEST + '.tmp'
#: What an error met while reading a dataset tells the user to run: ``VERIFY_HINT % dir``.
VERIFY_HINT = 'check the whole dataset with `gluonbatch wds verify %s`'


def hinted(err: ValueError, directory: PathLike) -> ValueError:
    """``err``, met reading the dataset in ``directory``, with :data:`VERIFY_HINT` added to
    its message.

    >>> print(hinted(ValueError('data/00000.tar is truncated'), 'data'))
    data/00000.tar is truncated; check the whole dataset with `gluonbatch wds verify data`
    """
    return type(err)('%s; %s' % (err, VERIFY_HINT % os.fspath(directory)))


def load_manifest(directory: PathLike) -> dict[str, Any] | None:
    """The manifest of the dataset in ``directory`` as a dict, None if it has none. Its
    fields are not checked here: :func:`listed_shards` checks the shard list, and the
    package that owns the manifest the rest.

    Raises
    ------
    ValueError
        It is not JSON, or not a JSON object; the message names the file.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     print(load_manifest(tmp))
    ...     write_manifest(os.path.join(tmp, MANIFEST), {'shards': [['00000', 4]]})
    ...     print(load_manifest(tmp))
    None
    {'shards': [['00000', 4]]}
    """
    directory = os.fspath(directory)
    path = os.path.join(directory, MANIFEST)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding='utf-8') as handle:
            manifest = json.load(handle)
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError('%s is not valid JSON: %s' % (path, err)) from None
    if not isinstance(manifest, dict):
        raise ValueError('%s: expected a JSON object, found %s'
                         % (path, type(manifest).__name__))
    return manifest


def write_manifest(path: PathLike, manifest: Mapping[str, Any]) -> None:
    """Write ``manifest`` (a dict with a ``shards`` list) to ``path`` as indented JSON."""
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(manifest, handle, indent=1)
        handle.write('\n')


def with_shards(manifest: Mapping[str, Any],
                shards: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """A copy of ``manifest`` listing ``shards`` (``(stem, records)`` per shard) instead.

    >>> with_shards({'classes': ['cat'], 'shards': [['00000', 9]]}, [('00000', 4)])
    {'classes': ['cat'], 'shards': [['00000', 4]]}
    """
    return dict(manifest, shards=[[stem, int(count)] for stem, count in shards])


def listed_shards(manifest: Mapping[str, Any], directory: PathLike) -> dict[str, int]:
    """``{stem: records}`` of the shards ``manifest`` (of the dataset in ``directory``)
    lists, in its order; ValueError naming the file if its ``shards`` is not a list of
    distinct ``[stem, records]``.

    >>> listed_shards({'shards': [['00000', 4], ['00001', 2]]}, 'data')
    {'00000': 4, '00001': 2}
    >>> listed_shards({'shards': [['00000', -1]]}, 'data')
    Traceback (most recent call last):
    ...
    ValueError: data/detection.json: shards must be a list of [stem, number of records]
    """
    shards: list[Any] = manifest.get('shards') or []
    problem = None
    if not isinstance(manifest.get('shards'), list) or not all(
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
            and type(entry[1]) is int and entry[1] >= 0 for entry in shards):
        problem = 'shards must be a list of [stem, number of records]'
    elif len({stem for stem, _ in shards}) != len(shards):
        problem = 'a shard is listed twice among %s' % plural(len(shards), 'shard')
    if problem:
        raise ValueError('%s: %s' % (os.path.join(os.fspath(directory), MANIFEST), problem))
    return {stem: count for stem, count in shards}


def manifest_problems(directory: PathLike,
                      counts: Mapping[str, int | None]) -> list[tuple[str, str]]:
    """What is wrong between the manifest of the dataset in ``directory`` (if it has one)
    and its shards: ``counts`` gives the records of each shard found there, tar and parquet
    (its stem: its record count, or None where its records cannot be read). ``(stem, line)`` per problem
    (the stem ``''`` for the manifest itself), the line naming the file and what to do;
    empty when they agree or there is no manifest.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     write_manifest(os.path.join(tmp, MANIFEST),
    ...                    {'shards': [['00000', 4], ['00001', 2]]})
    ...     for stem, line in manifest_problems(tmp, {'00000': 3}):
    ...         print(line.replace(tmp, 'data'))
    data/detection.json lists shard 00000 with 4 records, but data/00000.parquet holds 3: \
the shard or the manifest was replaced; restore the dataset from where it was written
    data/detection.json lists shard 00001 (2 records), but data/00001.tar is missing: the \
dataset is incomplete (a copy cut short?); copy the shard again
    """
    directory = os.fspath(directory)
    try:
        manifest = load_manifest(directory)
        if manifest is None:
            return []
        listed = listed_shards(manifest, directory)
    except ValueError as err:
        return [('', str(err))]
    path = os.path.join(directory, MANIFEST)

    def named(stem, ext):
        return os.path.join(directory, '%s.%s' % (stem, ext))
    problems = []
    for stem, count in listed.items():
        if stem not in counts:
            missing = next((named(stem, ext) for ext in ('tar', 'parquet')
                            if not os.path.exists(named(stem, ext))), named(stem, 'tar'))
            problems.append((stem, '%s lists shard %s (%s), but %s is missing: the dataset '
                                   'is incomplete (a copy cut short?); copy the shard again'
                             % (path, stem, plural(count, 'record'), missing)))
            continue
        found = counts[stem]
        if found is not None and found != count:
            problems.append((stem, '%s lists shard %s with %s, but %s holds %d: the shard '
                                   'or the manifest was replaced; restore the dataset from '
                                   'where it was written'
                             % (path, stem, plural(count, 'record'), named(stem, 'parquet'),
                                found)))
    problems += [(stem, '%s is not listed in %s: a reader of the manifest never reads it; '
                        'remove it, or write the dataset again' % (named(stem, 'tar'), path))
                 for stem in counts if stem not in listed]
    return problems
