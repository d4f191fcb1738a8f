"""Checking a dataset whole before a long job: :func:`~gluonbatch.shards.verify`, one
:class:`Problem` per thing wrong.

Each shard's parquet, index and tar are read as the dataset reads them
(:class:`~gluonbatch.shards.records.ShardRecords`: the ids of the parquet against the
members of the index, or of the tar where there is no index, each record with its image,
caption and metadata), then the tar is read once from start to end: every member's tar
header where the index (or the tar's own headers) put it, checked in bulk where it is a
plain ustar header and by :mod:`tarfile` otherwise, its bytes all there, its ``.json``
parsed and its ``.txt`` UTF-8, and nothing but zero blocks after the last member. With
``decode=True`` every image is decoded as the dataset decodes it. Across shards, no
record id may occur twice, and no tar, parquet or index may be missing its partner. A
dataset with a manifest (:mod:`~gluonbatch.shards.manifest`) must have the shards it
lists, with as many records each, and no others. A kind of dataset asks more of its
records with :class:`RecordRules` (detection's: :func:`gluonbatch.detection.verify`).

A shard's checks stop at the first fault in its files' structure (a tar cut short or
overwritten, an index that is stale, a parquet of other records): what follows is
unreliable. Faults in members' contents (bad JSON, an image that does not decode) are
each reported.
"""
import collections
import os
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import mxnet as mx
import numpy as np

from .._core.typing import PathLike
from .decode import caption_text, decode_image, metadata_object, unconfirmed_objects
from .index import index_disagreement
from .reader import header_mismatch
from .records import IMAGE_EXTENSIONS, ShardRecords
from .files import Shard, examples, shard_files, stem_order
from .manifest import manifest_problems
from .tar import BLOCK, RESTORE, DamagedTar, check_headers, check_tail
from .ustar import checksums_match, name_fields, plain_headers_match

__all__ = ['Problem', 'Report', 'RecordRules', 'verify']

#: Bytes of a tar read at a time, and kept in front of them from the chunk before (the
#: member that spans both; a larger one is joined in a buffer of its own).
CHUNK, KEEP = 4 << 20, 1 << 20
#: What a member is, by its extension: checked as a caption, metadata, an image or not.
_OTHER, _CAPTION, _METADATA, _IMAGE = range(4)
_KINDS = {'image': _IMAGE, 'txt': _CAPTION, 'json': _METADATA}  # RecordRules' names


class Problem(NamedTuple):
    """One thing wrong with a dataset.

    Attributes
    ----------
    shard : str
        The shard's stem (``'00001'`` for ``00001.tar``); ``''`` for the dataset's manifest.
    member : str or None
        The tar member at fault (``'000010003.json'``), or None for the shard's files.
    message : str
        One line naming the file, what is wrong and what to do; also ``str(problem)``.
    """

    shard: str
    member: str | None
    message: str

    def __str__(self) -> str:
        return self.message


class Report(list[Problem]):
    """The :class:`Problem` list :func:`verify` returns (empty for a healthy dataset), and
    what was checked: ``shards``, ``records`` and ``tar_bytes``."""

    def __init__(self, problems: Iterable[Problem] = (), shards: int = 0, records: int = 0,
                 tar_bytes: int = 0) -> None:
        super().__init__(problems)
        self.shards, self.records, self.tar_bytes = shards, records, tar_bytes

    def sort_by_shard(self) -> None:
        """Put the problems in shard order, the manifest's first; stable: the order within
        a shard (its files' order) is kept."""
        self.sort(key=lambda problem: stem_order(problem.shard) if problem.shard else (-1, ''))


class RecordRules(NamedTuple):
    """What a kind of dataset asks of every record beyond the format, for :func:`verify`.

    Attributes
    ----------
    members : tuple of str
        The kinds of member each record must have: ``'image'`` (any image extension),
        ``'txt'``, ``'json'``.
    check_json : callable, optional
        Called with each record's ``json`` member, parsed (a dict): the message of a
        ValueError it raises is a problem of that member.
    """

    members: tuple[str, ...] = ()
    check_json: Callable[[dict[str, Any]], object] | None = None


def verify(path: PathLike, id_col: str = 'key', decode: bool = False,
           progress: bool = False, rules: RecordRules | None = None) -> Report:
    """Check every shard of the dataset at ``path``; returns a :class:`Report` (a list of
    :class:`Problem`, empty when the dataset is healthy).

    Parameters
    ----------
    path : str or os.PathLike
        The dataset directory.
    id_col : str
        The parquet's id column.
    decode : bool
        Also decode every image (with the dataset's decoder): slower, by far.
    progress : bool
        Draw a progress bar (``tqdm``, one step per shard) on stderr.
    rules : gluonbatch.shards.RecordRules, optional
        What this kind of dataset asks of each record, besides the format.

    Raises
    ------
    TypeError
        ``path`` or ``id_col`` of another type, ``rules`` not a :class:`RecordRules`.
    ValueError
        ``rules.members`` naming an unknown kind of member.
    FileNotFoundError
        ``path`` is not a directory, or holds no shard files.

    Examples
    --------
    >>> import os, tempfile
    >>> from gluonbatch.curation import make_example_dataset
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = make_example_dataset(tmp.name, num_shards=2, index=True)
    >>> report = verify(path)
    >>> report, report.shards, report.records
    ([], 2, 6)
    >>> os.truncate(os.path.join(path, '00001.tar'), 2048)
    >>> [(problem.shard, problem.member) for problem in verify(path)]
    [('00001', None)]
    >>> print(verify(path)[0])  # doctest: +ELLIPSIS
    /.../00001.tar is truncated: it has 2048 bytes but its index ... lists members up to ...
    >>> tmp.cleanup()
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError('path must be a str or os.PathLike (a dataset directory), not %s'
                        % type(path).__name__)
    if not isinstance(id_col, str):
        raise TypeError('id_col must be a str, not %s' % type(id_col).__name__)
    rules = RecordRules() if rules is None else rules
    if not isinstance(rules, RecordRules):
        raise TypeError('rules must be a RecordRules or None, not %s' % type(rules).__name__)
    unknown = sorted(set(rules.members) - set(_KINDS))
    if unknown:
        raise ValueError('rules.members must be among %s, got %s' % (sorted(_KINDS), unknown))
    path = os.fspath(path)
    found = shard_files(path)
    if not any(found.values()):
        raise FileNotFoundError('%s holds no shards (NNNNN.tar with NNNNN.parquet)' % path)
    from tqdm import tqdm

    report = Report(_lone_files(path, found))
    stems = sorted(found['tar'] & found['parquet'], key=stem_order)
    counts: dict[str, int | None] = dict.fromkeys(stems)
    # no larger than the largest tar: a small dataset's check is not paid in fresh pages
    largest = max([os.path.getsize(os.path.join(path, stem + '.tar')) for stem in stems],
                  default=0)
    chunk = min(CHUNK, largest + BLOCK)
    room = min(KEEP, chunk)
    shard_ids, buffers = [], [bytearray(room + chunk) for _ in range(2)]
    with tqdm(total=len(stems), desc='verify', unit='shard', file=sys.stderr,
              disable=not progress) as bar, ThreadPoolExecutor(1) as reader:
        for stem in stems:
            shard = Shard(path, stem, stem in found['idx'])
            problems, ids = _check_shard(shard, id_col, bool(decode), rules, reader, buffers,
                                         room)
            report.extend(problems)
            if ids is not None:
                shard_ids.append((stem, ids))
                report.records += len(ids)
                counts[stem] = len(ids)
            report.shards += 1
            report.tar_bytes += os.path.getsize(shard.tar)
            bar.update()
    report.extend(_repeated_ids(path, shard_ids))
    report.extend(Problem(stem, None, line) for stem, line in manifest_problems(path, counts))
    report.sort_by_shard()
    return report


def _lone_files(path, found):
    """Problems of shard files without their partner."""
    def named(stem, ext):
        return os.path.join(path, '%s.%s' % (stem, ext))
    problems = [Problem(stem, None, '%s has no parquet beside it (%s): restore the shard\'s '
                                    'metadata' % (named(stem, 'tar'), named(stem, 'parquet')))
                for stem in found['tar'] - found['parquet']]
    problems += [Problem(stem, None, '%s has no tar beside it (%s): restore the tar or '
                                     'remove the parquet' % (named(stem, 'parquet'),
                                                             named(stem, 'tar')))
                 for stem in found['parquet'] - found['tar']]
    problems += [Problem(stem, None, '%s has no tar beside it (%s): remove the index'
                                     % (named(stem, 'idx'), named(stem, 'tar')))
                 for stem in found['idx'] - found['tar']]
    return problems


def _check_shard(shard, id_col, decode, rules, reader, buffers, room):
    """``(problems, ids)`` of one shard; ``ids`` None where its records cannot be read."""
    try:
        records = ShardRecords(shard, id_col)
    except (ValueError, TypeError) as err:
        return [Problem(shard.stem, None, str(err))], None
    except OSError as err:
        return [Problem(shard.stem, None, 'cannot read shard %s: %s' % (shard.stem, err))], None
    try:
        return _TarPass(shard, records, decode, rules).run(reader, buffers, room), records.ids
    except OSError as err:
        return [Problem(shard.stem, None, 'cannot read %s: %s' % (shard.tar, err))], records.ids


class _TarPass:
    """One sequential read of a shard's tar, checking its members (``records.members``,
    taken in byte order) as they come."""

    def __init__(self, shard, records, decode, rules):
        self.shard, self.decode, self.check_json = shard, decode, rules.check_json
        order = np.argsort(records.members[:, 0], kind='stable')
        self.offsets, self.sizes, self.codes, self.heads = records.members[order].T
        self.record_of = np.repeat(np.arange(len(records.ids)), np.diff(records.starts))[order]
        self.ids, self.tar_exts = records.ids, records.exts
        self.name_fields = name_fields(np.char.encode(records.ids, 'utf-8').tolist(),
                                       self.record_of, self.codes, records.exts)
        self.exts = [ext.lower() for ext in records.exts]
        self.kinds = np.array([_IMAGE if ext in IMAGE_EXTENSIONS else
                               {'txt': _CAPTION, 'json': _METADATA}.get(ext, _OTHER)
                               for ext in self.exts], np.int8)
        # how far the members up to each one reach (an overlap reaches back)
        self.reach = np.maximum.accumulate(self.offsets + self.sizes)
        self.problems = []
        member_kinds = self.kinds[self.codes]
        for kind in rules.members:
            having = np.zeros(len(self.ids), bool)
            having[self.record_of[member_kinds == _KINDS[kind]]] = True
            self.problems += [Problem(shard.stem, None, 'record %r in %s has no %s member; '
                                      'each record of this dataset needs one'
                                      % (self.ids[r], shard.tar, kind))
                              for r in np.flatnonzero(~having).tolist()]

    def run(self, reader, buffers, room):
        """The shard's problems, the tar read once: a chunk ahead by the thread pool
        ``reader`` (reading releases the GIL) into one of the two ``buffers``, after its
        first ``room`` bytes, while the main thread checks the chunk before in the other."""
        count, i = len(self.offsets), 0
        with open(self.shard.tar, 'rb', buffering=0) as handle:
            fd = handle.fileno()
            if hasattr(os, 'posix_fadvise'):  # a larger read-ahead from disk
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            chunks = [memoryview(buffer)[room:] for buffer in buffers]
            ahead = reader.submit(os.preadv, fd, [chunks[0]], 0)
            # view: the tar from byte pos on, up to byte end (read so far)
            turn, view, pos, end = 0, memoryview(b''), 0, 0
            try:
                while i < count:
                    got, keep = ahead.result(), len(view)
                    if keep <= room:  # the bytes kept go in front of the chunk
                        buffers[turn][room - keep:room] = view
                        view = memoryview(buffers[turn])[room - keep:room + got]
                    else:  # a member larger than that: the bytes kept and the chunk joined
                        joined = bytearray(keep + got)
                        joined[:keep], joined[keep:] = view, chunks[turn][:got]
                        view = memoryview(joined)
                    end, turn = end + got, 1 - turn
                    ahead = reader.submit(os.preadv, fd, [chunks[turn]], end)
                    if not got:
                        self._add(None, '%s ends at byte %d, before member %r (bytes %d..%d): '
                                        'the tar is truncated%s' % (
                                            self.shard.tar, end, self.name(i), self.offsets[i],
                                            self.offsets[i] + self.sizes[i], RESTORE))
                        return self.problems
                    done = int(np.searchsorted(self.reach, end, side='right'))
                    if done > i:
                        if not self._check(view, pos, i, done):
                            return self.problems
                        i = done
                    if i < count:  # keep from member i's headers on
                        start = max(pos, min(int(self.heads[i]), end))
                        view, pos = view[start - pos:], start
            finally:
                ahead.exception()  # the read done before its file is closed
        end = int((self.offsets - self.sizes // -BLOCK * BLOCK).max()) if count else 0
        try:
            check_tail(self.shard.tar, os.path.getsize(self.shard.tar), end)
        except DamagedTar as err:
            self._add(None, str(index_disagreement(self.shard.idx, self.shard.tar, str(err))
                                if self.shard.idx else err))
        return self.problems

    def name(self, member):
        """The tar name of member number ``member`` (in byte order)."""
        return '%s.%s' % (self.ids[self.record_of[member]], self.tar_exts[self.codes[member]])

    def _add(self, member, message):
        self.problems.append(Problem(self.shard.stem, member, message))

    def _check(self, buf, pos, i, done):
        """Check members ``i:done``, all in ``buf`` (the tar from byte ``pos`` on);
        False at a fault in the tar's structure (reported), after which the rest of the
        tar is not read."""
        blocks = np.frombuffer(buf, np.uint8, len(buf) // BLOCK * BLOCK)
        offsets, heads = self.offsets[i:done], self.heads[i:done]
        at = offsets - BLOCK - pos
        plain = ((heads == offsets - BLOCK) & (at >= 0)
                 & plain_headers_match(blocks, np.maximum(at, 0), self.name_fields[i:done],
                                       self.sizes[i:done])
                 & checksums_match(blocks, np.maximum(at, 0)))
        view = memoryview(buf)
        for member in (i + np.flatnonzero(~plain)).tolist():  # tarfile says what is there
            head, offset, size = (int(self.heads[member]), int(self.offsets[member]),
                                  int(self.sizes[member]))
            found = check_headers(bytes(view[max(head, pos) - pos:offset + size - pos]),
                                  max(head, pos), [(self.name(member), offset, size)])
            if found:  # the members before it are still checked, in byte order
                self._contents(view, pos, i, member)
                self._add(self.name(member), str(header_mismatch(self.shard, found)))
                return False
        self._contents(view, pos, i, done)
        return True

    def _checked_object(self, data):
        """A JSON member's checks with :class:`RecordRules`: an object, then its rules."""
        self.check_json(metadata_object(data))

    def _contents(self, view, pos, i, done):
        """Check the captions, metadata (and images) of members ``i:done``."""
        kinds = self.kinds[self.codes[i:done]]

        def members(kind):
            chosen = i + np.flatnonzero(kinds == kind)
            return chosen.tolist(), [view[start:start + size] for start, size in zip(
                (self.offsets[chosen] - pos).tolist(), self.sizes[chosen].tolist())]
        captions, texts = members(_CAPTION)
        try:  # valid UTF-8 joined by newlines is valid, and only so
            b'\n'.join(texts).decode('utf-8')
            suspects = []
        except UnicodeDecodeError:
            suspects = list(zip(captions, texts))
        metadata, jsons = members(_METADATA)
        # the kind of dataset's checks read every JSON object; else only those the fast
        # parse of all of them does not confirm are read one by one
        check, unconfirmed = ((self._checked_object, range(len(jsons)))
                              if self.check_json else
                              (metadata_object, unconfirmed_objects(jsons)))
        suspects = [(caption_text, member, data) for member, data in suspects] + [
            (check, metadata[k], jsons[k]) for k in unconfirmed]
        for check, member, data in suspects:  # the dataset's own checks say what is wrong
            try:
                check(data.tobytes())
            except ValueError as err:
                self._add(self.name(member), '%s in %s %s' % (self.name(member),
                                                              self.shard.tar, err))
        for member, data in zip(*members(_IMAGE)) if self.decode else ():
            ext = self.exts[self.codes[member]]
            try:
                decode_image(ext, data.tobytes()).wait_to_read()
            except (mx.base.MXNetError, OSError, ValueError) as err:  # Pillow: OSError
                self._add(self.name(member), 'cannot decode the image %s in %s: %s'
                          % (self.name(member), self.shard.tar,
                             str(err).strip().splitlines()[-1]))


def _repeated_ids(path, shard_ids):
    """Problems of record ids held by more than one shard: one per shard holding ids an
    earlier shard holds."""
    if len(shard_ids) < 2:
        return []
    ids = np.concatenate([ids for _, ids in shard_ids])
    owners = np.repeat(np.arange(len(shard_ids)), [len(ids) for _, ids in shard_ids])
    order = np.argsort(ids, kind='stable')  # stable: each id's earliest shard first
    ids, owners = ids[order], owners[order]
    again = np.flatnonzero(ids[1:] == ids[:-1]) + 1
    if not len(again):
        return []
    run_starts = np.maximum.accumulate(np.where(np.r_[True, ids[1:] != ids[:-1]],
                                                np.arange(len(ids)), 0))
    clashes = collections.defaultdict(list)  # (shard, earlier shard) -> ids
    for at in again.tolist():
        clashes[owners[at], owners[run_starts[at]]].append(ids[at])
    stems = [stem for stem, _ in shard_ids]
    return [Problem(stems[later], None, '%s holds record ids that %s holds too: %s; ids must '
                                        'be unique in a dataset (reshard it to renumber)'
                    % (os.path.join(path, stems[later] + '.tar'),
                       os.path.join(path, stems[earlier] + '.tar'), examples(map(str, clash))))
            for (later, earlier), clash in sorted(clashes.items())]
