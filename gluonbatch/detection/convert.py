"""Writing a converted detection dataset: the records a source module read and checked
(:mod:`~gluonbatch.detection.voc`, :mod:`~gluonbatch.detection.coco`) go into shards
(:class:`~gluonbatch.shards.writer.ShardWriter`) in a staging directory of the
destination, and the shards and the manifest ``detection.json`` (moved last) appear in one
commit that a kill undoes (:mod:`~gluonbatch.shards.commit`): a failed or killed
conversion leaves nothing a reader sees.

A record is the image file's path and member extension, its caption (the ``txt``
member: the names of its label's objects, so that the records are an image-text dataset
too, which :class:`~gluonbatch.curation.ImageTextPairDataset` and ``verify`` read), its
``json`` member (bytes, encoded while the source was read, so that nothing can fail there
once shards are being written) and its parquet row. The members are written in that
order, next to each other.
"""
import os
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
from numpy.typing import ArrayLike, DTypeLike

from .._core.checks import check_int, described
from .._core.console import counted, is_terminal, stage_named
from .._core.typing import PathLike
from .._core.wording import plural
from ..shards.commit import BACK, recover, staging
from ..shards.files import SHARD_FILE, examples
from ..shards.manifest import MANIFEST, MANIFEST_TMP, write_manifest
from ..shards.writer import ShardWriter, commit_shards, id_digits, record_key
from .annotations import ID_COL, make_manifest

__all__ = ['Record', 'label_fields', 'caption', 'source_root', 'show_progress',
           'destination', 'write_dataset', 'STEM_DIGITS']


class Record(NamedTuple):
    """One image to write: ``image`` (its file's path), ``ext`` (its member's extension),
    ``caption`` (the ``txt`` member), ``annotations`` (the ``json`` member's bytes) and
    ``row`` (its parquet row, the columns but ``key``)."""

    image: str
    ext: str
    caption: str
    annotations: bytes
    row: dict[str, Any]

#: Digits of a converted dataset's shard numbers (``00000.tar``).
STEM_DIGITS = 5


def label_fields(rows: ArrayLike, dtype: DTypeLike | None = None) -> dict[str, Any]:
    """A record's ``label`` and ``label_dtype``: ``rows`` as gluoncv's dataset makes its
    label array of them, ``np.array(rows)`` (then ``.astype(dtype)`` if given), so the
    dtype is numpy's choice for those values (an int label where every value is an int).

    >>> label_fields([[1.5, 2.0, 3.0, 4.0, 7, 0]])
    {'label': [[1.5, 2.0, 3.0, 4.0, 7.0, 0.0]], 'label_dtype': 'float64'}
    >>> label_fields([[-1, -1, -1, -1, -1]])['label_dtype'], label_fields([])
    ('int64', {'label': [], 'label_dtype': 'float64'})
    """
    array = np.array(rows) if dtype is None else np.asarray(rows).astype(dtype)
    return {'label': array.tolist(), 'label_dtype': array.dtype.name}


def caption(names: Iterable[str]) -> str:
    """A record's caption: the class names of its label's objects, in label order.

    >>> caption(['dog', 'person', 'dog'])
    'dog, person, dog'
    """
    return ', '.join(names)


def source_root(root: PathLike) -> str:
    """``root``, a source dataset's directory, as an absolute path; FileNotFoundError if it
    is not a directory."""
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError('root must be a directory path (str or os.PathLike), got %s'
                        % described(root))
    root = os.path.abspath(os.path.expanduser(os.fspath(root)))
    if not os.path.isdir(root):
        raise FileNotFoundError('no dataset root directory %s' % root)
    return root


def show_progress(progress: bool | None) -> bool:
    """Whether to show progress: ``progress`` (a bool), or by default where ``sys.stderr``
    is a terminal (a bar)."""
    if progress is None:
        return is_terminal(sys.stderr)
    if not isinstance(progress, bool):
        raise TypeError('progress must be True, False or None, got %s' % described(progress))
    return progress


def destination(dst: PathLike, what: str) -> str:
    """The absolute path of ``dst``, a directory to write a new dataset into (made later
    if missing); ValueError if it holds shards or a manifest already. What a killed run
    left there is settled first. ``what`` (``'from_voc'``) starts the messages."""
    if not isinstance(dst, (str, os.PathLike)):
        raise TypeError('%s: dst must be a directory path (str or os.PathLike), got %s'
                        % (what, described(dst)))
    path = os.path.abspath(os.path.expanduser(os.fspath(dst)))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise NotADirectoryError('%s: dst %s is not a directory' % (what, path))
    if os.path.isdir(path):
        recover(path)
        existing = sorted(name for name in os.listdir(path)
                          if SHARD_FILE.match(name) or name == MANIFEST)
        if existing:
            raise ValueError('%s: %s already holds a dataset (%s); convert into a new or '
                             'empty directory' % (what, path, examples(existing)))
    return path


def _column_types(rows):
    """The parquet type of each column, one for the whole dataset (not per shard: the
    shards agree), as pyarrow infers it from all the values; ``classes`` is a list of
    strings even where every list is empty."""
    return {name: pa.list_(pa.string()) if name == 'classes'
            else pa.array([row[name] for row in rows]).type for name in rows[0]}


def write_dataset(records: Sequence[Record], dst: str, what: str, samples_per_shard: int,
                  show: bool, **manifest: Any) -> str:
    """Write ``records`` (a list of :data:`Record`, in dataset order) into ``dst`` (from
    :func:`destination`; made if missing, and removed again if the run made it and fails),
    ``samples_per_shard`` per shard, with the manifest
    :func:`~gluonbatch.detection.annotations.make_manifest` makes of
    ``manifest`` and the shards. Returns ``dst``.

    ``what`` labels the progress shown when ``show`` (one step per image).
    """
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    if not records:
        raise ValueError('%s: there is no image to convert; nothing was written' % what)
    num_shards = -(-len(records) // samples_per_shard)
    if num_shards > 10 ** STEM_DIGITS:
        raise ValueError('%s: %s at %d per shard need %d shards, more than %d digits can '
                         'number; raise samples_per_shard' % (
                             what, plural(len(records), 'image'), samples_per_shard,
                             num_shards, STEM_DIGITS))
    types = _column_types([record.row for record in records])
    created = not os.path.isdir(dst)
    os.makedirs(dst, exist_ok=True)
    committed = False
    try:
        with staging(dst) as stage:
            with stage_named('writing shards'):
                shards = _write_shards(records, stage, samples_per_shard, types,
                                       counted(records, what, 'image', show))
            write_manifest(stage.file(MANIFEST_TMP), make_manifest(shards=shards, **manifest))
            commit_shards(stage, [stem for stem, _ in shards], BACK,
                          last=[(MANIFEST_TMP, MANIFEST)])
            committed = True
    finally:
        if created and not committed:
            try:  # a failed run leaves nothing, not even the directory it made
                os.rmdir(dst)
            except OSError:
                pass  # something else was put there meanwhile
    return dst


def _write_shards(records, stage, samples_per_shard, types, items):
    """Write the shards into ``stage``, taking the records from ``items`` (``records``,
    with progress); returns ``[(stem, records), ...]``."""
    digits = id_digits(samples_per_shard)
    mtime = int(time.time())
    shards, writer, rows = [], None, []
    try:
        for number, record in enumerate(items):
            shard, position = divmod(number, samples_per_shard)
            if writer is None:
                stem = '%0*d' % (STEM_DIGITS, shard)
                writer, rows = ShardWriter(stage.path, stem, mtime), []
            key = record_key(shard, position, digits, STEM_DIGITS)
            with open(record.image, 'rb') as handle:  # the file's bytes, as they are
                image = handle.read()
            writer.add(key, [(record.ext, image), ('txt', record.caption.encode('utf-8')),
                             ('json', record.annotations)])
            rows.append(dict(record.row, **{ID_COL: key}))
            if position == samples_per_shard - 1 or number == len(records) - 1:
                writer.finish(_table(rows, types))
                shards.append((stem, len(rows)))
                writer = None
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return shards


def _table(rows, types):
    columns = {ID_COL: pa.array([row[ID_COL] for row in rows], pa.string())}
    columns.update((name, pa.array([row[name] for row in rows], kind))
                   for name, kind in types.items())
    return pa.table(columns)
