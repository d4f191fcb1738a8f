"""Checking a detection dataset whole before training on it:
:func:`gluonbatch.detection.verify`.

What :class:`~gluonbatch.detection.DetectionShards` relies on, checked for every record:
the format's checks (:func:`gluonbatch.shards.verify`: the tars, indexes and parquets, the
record keys of the parquet against the tar members, and ``detection.json``'s shard list
against the shards and their record counts), plus detection's own. The manifest's fields
read; each record has an image and a ``json`` member whose annotations decode into a label
of ``(x1, y1, x2, y2, class, ...)`` rows, each class id one of the manifest's classes, and
polygons per row where the dataset has them; and the parquet's ``classes`` lists name only
the manifest's classes.
"""
import functools
import os

import pyarrow.parquet as pq

from .._core.typing import PathLike
from ..shards.files import Shard, shard_files, stem_order
from ..shards.manifest import MANIFEST, load_manifest
from ..shards.parquet import read_table
from ..shards.verify import Problem, RecordRules, Report, verify as verify_shards
from .annotations import ID_COL, check_manifest, record_fields

__all__ = ['verify']


def verify(path: PathLike, decode: bool = False, progress: bool = False) -> Report:
    """Check every shard and record of the detection dataset at ``path``; returns a
    :class:`~gluonbatch.shards.verify.Report` (a list of
    :class:`~gluonbatch.shards.verify.Problem`, empty when the dataset is healthy).

    ``gluonbatch wds verify`` runs it on a directory with a ``detection.json``.

    Parameters
    ----------
    path : str or os.PathLike
        The dataset directory (:func:`from_voc`, :func:`from_coco` or a curation step
        wrote it).
    decode : bool
        Also decode every image: slower, by far.
    progress : bool
        Draw a progress bar on stderr.

    Raises
    ------
    TypeError
        ``path`` is not a path.
    FileNotFoundError
        No such directory, no shards in it, or no ``detection.json`` (not a detection
        dataset).

    Examples
    --------
    >>> import os, tempfile
    >>> from gluonbatch.detection import from_voc, make_voc_example
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = make_voc_example(tmp.name + '/voc', num_images=4)
    >>> path = from_voc(root, tmp.name + '/shards', splits=[(2007, 'trainval')],
    ...                 samples_per_shard=2, progress=False)
    >>> verify(path)
    []
    >>> for ext in ('tar', 'parquet', 'idx'):  # a copy cut short
    ...     os.remove(os.path.join(path, '00001.' + ext))
    >>> print(verify(path)[0])  # doctest: +ELLIPSIS
    /.../detection.json lists shard 00001 (2 records), but /.../00001.tar is missing: ...
    >>> tmp.cleanup()
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError('path must be a str or os.PathLike (a dataset directory), not %s'
                        % type(path).__name__)
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError('no dataset directory %s' % path)
    try:
        manifest = load_manifest(path)
        if manifest is None:
            raise FileNotFoundError('%s is not a detection dataset: it has no %s'
                                    % (path, MANIFEST))
        check_manifest(manifest, path)
    except ValueError as err:
        # the format's check reports a manifest it cannot read; one it can, with fields
        # this version does not read, is reported here; either way the shards are
        # checked without detection's rules
        report = verify_shards(path, ID_COL, decode, progress)
        if not any(problem.shard == '' for problem in report):
            report.insert(0, Problem('', None, str(err)))
        return report
    num_class, segmentation = len(manifest['classes']), manifest['segmentation']
    # a record's parsed json member decodes into what the dataset gives
    rules = RecordRules(('image', 'json'), functools.partial(
        record_fields, num_class=num_class, segmentation=segmentation))
    report = verify_shards(path, ID_COL, decode, progress, rules)
    report.extend(_class_name_problems(path, manifest['classes']))
    report.sort_by_shard()
    return report


def _class_name_problems(path, classes):
    """Problems of parquet ``classes`` lists naming classes the manifest does not have."""
    known, problems = set(classes), []
    found = shard_files(path)
    for stem in sorted(found['tar'] & found['parquet'], key=stem_order):
        shard = Shard(path, stem, False)
        try:
            if 'classes' not in pq.read_schema(shard.parquet).names:
                continue
            table = read_table(shard, ID_COL, ['classes'])
        except (OSError, ValueError, TypeError):
            continue  # the format's check reports it
        for key, names in zip(table.column(ID_COL).to_pylist(),
                              table.column('classes').to_pylist()):
            unknown = sorted(set(names or ()) - known)
            if unknown:
                problems.append(Problem(stem, None, '%s: record %r lists classes %s, which '
                                                    'are not among the %d of detection.json'
                                        % (shard.parquet, key, unknown, len(classes))))
    return problems
