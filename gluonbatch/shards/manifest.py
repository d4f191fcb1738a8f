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

__all__ = ['MANIFEST', 'MANIFEST_TMP', 'VERIFY_HINT', 'load_manifest', 'write_manifest',
           'with_shards', 'listed_shards']

#: The manifest's file name in a dataset directory.
MANIFEST = 'detection.json'
#: Its name in a commit's staging directory, until the commit moves it.
MANIFEST_TMP = '.' + MANIFEST + '.tmp'
#: What an error met while reading a dataset tells the user to run: ``VERIFY_HINT % dir``.
VERIFY_HINT = 'check the whole dataset with `gluonbatch wds verify %s`'


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
        raise ValueError('%s is not valid JSON: %s; %s'
                         % (path, err, VERIFY_HINT % directory)) from None
    if not isinstance(manifest, dict):
        raise ValueError('%s: expected a JSON object, found %s; %s'
                         % (path, type(manifest).__name__, VERIFY_HINT % directory))
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
    ValueError: data/detection.json: shards must be a list of [stem, number of records]; \
check the whole dataset with `gluonbatch wds verify data`
    """
    shards = manifest.get('shards')
    problem = None
    if not isinstance(shards, list) or not all(
            isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
            and type(entry[1]) is int and entry[1] >= 0 for entry in shards):
        problem = 'shards must be a list of [stem, number of records]'
    elif len({stem for stem, _ in shards}) != len(shards):
        problem = 'a shard is listed twice among %s' % plural(len(shards), 'shard')
    if problem:
        directory = os.fspath(directory)
        raise ValueError('%s: %s; %s' % (os.path.join(directory, MANIFEST), problem,
                                         VERIFY_HINT % directory))
    return {stem: count for stem, count in shards}
