"""The ``.idx`` index: NVIDIA DALI's ``wds2idx`` format v1.2, read and written here.

Where each member's bytes are in a tar, one line per sample: the first line is
``v1.2 <number of samples>``, then each sample (the members sharing the name before the
first ``'.'``, in tar order) is one line of ``<ext> <data offset> <size> <member name>``
per member, separated by spaces; the data offset is the byte offset of the member's content
in the tar. DALI's readers use the same files.
"""
import os
from collections.abc import Iterable, Sequence
from typing import TypeAlias

import numpy as np
from numpy.typing import ArrayLike

from .._core.typing import PathLike
from .files import replacing
from .tar import BLOCK, RESTORE, DamagedTar, scan_tar, split_member_name

__all__ = ['INDEX_VERSION', 'write_index', 'read_index', 'parse_index_line', 'group_members',
           'format_index', 'index_disagreement', 'REBUILD']

#: What to do about an index that is stale or damaged (``%s``: its tar).
REBUILD = 'rebuild it with `gluonbatch wds index %s` (or gluonbatch.shards.write_index)'

#: The first token of an ``.idx`` file: the version of the format read and written here.
INDEX_VERSION = 'v1.2'

#: One sample of an index: ``(key, [(ext, data offset, size), ...])``.
Sample: TypeAlias = tuple[str, list[tuple[str, int, int]]]


def group_members(members: Iterable[tuple[str, int, int]], where: PathLike) -> list[Sample]:
    """``[(key, [(ext, offset, size), ...]), ...]``: members grouped by key, first-seen order."""
    samples: dict[str, list[tuple[str, int, int]]] = {}
    for name, offset, size in members:
        key, ext = split_member_name(name, where)
        files = samples.setdefault(key, [])
        if any(ext.lower() == other.lower() for other, _, _ in files):
            raise ValueError('%s holds member %r twice (record %r)' % (where, name, key))
        files.append((ext, offset, size))
    return list(samples.items())


def index_line(key, files):
    """One sample's line: ``<ext> <data offset> <size> <key>.<ext>`` per member.

    >>> index_line('0001', [('jpg', 512, 10), ('txt', 1536, 5)])
    'jpg 512 10 0001.jpg txt 1536 5 0001.txt'
    """
    return ' '.join(['%s %d %d %s.%s' % (ext, offset, size, key, ext)
                     for ext, offset, size in files])


def index_text(count, body):
    """The whole index: its first line, then ``body``, the ``count`` samples' lines (each
    ending in a newline)."""
    return '%s %d\n%s' % (INDEX_VERSION, count, body)


def index_lines(keys, codes, exts, counts, offsets, sizes):
    """The lines of many samples as one text, each line ending in a newline: the same as
    :func:`index_line` per sample, made in bulk with numpy where the samples have the same
    members and keys of one length.

    Parameters
    ----------
    keys : list of str
        Per sample.
    codes : numpy.ndarray of int
        Per member (samples after samples), its extension's number in ``exts``.
    exts : list of str
    counts : numpy.ndarray of int
        Members per sample.
    offsets, sizes : numpy.ndarray of int
        Per member.

    >>> print(index_lines(['01', '02'], np.array([0, 1, 0, 1]), ['jpg', 'txt'],
    ...                   np.array([2, 2]), np.array([512, 1536, 2560, 3584]),
    ...                   np.array([9, 3, 7, 2])), end='')
    jpg 512 9 01.jpg txt 1536 3 01.txt
    jpg 2560 7 02.jpg txt 3584 2 02.txt
    """
    count, codes = len(keys), np.asarray(codes)
    width = int(counts[0]) if count else 0
    key_bytes = [key.encode('utf-8') for key in keys]
    key_lengths = np.fromiter(map(len, key_bytes), np.int64, count)
    if count and (counts == width).all() and (key_lengths == key_lengths[0]).all() and \
            (codes.reshape(count, width) == codes[:width]).all():
        return _uniform_lines(
            np.frombuffer(b''.join(key_bytes), np.uint8).reshape(count, -1),
            [exts[code] for code in codes[:width].tolist()],
            np.asarray(offsets).reshape(count, width), np.asarray(sizes).reshape(count, width))
    ends = np.cumsum(counts).tolist()
    files = list(zip([exts[code] for code in codes.tolist()], np.asarray(offsets).tolist(),
                     np.asarray(sizes).tolist()))
    return ''.join([index_line(key, files[end - n:end]) + '\n'
                    for key, end, n in zip(keys, ends, np.asarray(counts).tolist())])


def digit_columns(values: ArrayLike, base: int = 10, width: int | None = None,
                  zero_padded: bool = False) -> np.ndarray:
    """``values`` (non-negative int64) as rows of ASCII digits in ``base`` (2 to 10),
    right-aligned in ``width`` columns.

    Parameters
    ----------
    values : array_like of int
    base : int
    width : int, optional
        By default as many as the largest value needs; a longer value keeps its last
        ``width`` digits, and ``base ** (width - 1)`` must fit in int64.
    zero_padded : bool
        Leading zeros as ``'0'`` (as tar writes numbers) rather than NULs (dropped where
        the rows are joined into an index's text).

    Returns
    -------
    numpy.ndarray of uint8, shape ``(len(values), width)``

    Examples
    --------
    >>> digit_columns([7, 120]).tobytes()
    b'\\x00\\x007120'
    >>> digit_columns([7, 120], base=8, width=4, zero_padded=True).tobytes()
    b'00070170'
    """
    values = np.asarray(values, np.int64)
    if width is None:
        largest, width = int(values.max()) if len(values) else 0, 1
        while base ** width <= largest:
            width += 1
    if base == 10:
        return _decimal_digits(values, width, zero_padded)
    if base & (base - 1):
        digits = np.empty((len(values), width), np.uint8)
        rest = values.copy()
        for column in range(width - 1, -1, -1):  # numpy divides fastest by a scalar
            digits[:, column] = rest % base
            rest //= base
    else:  # a power of two: every digit at once, by shifts and a mask
        shifts = (base.bit_length() - 1) * np.arange(width - 1, -1, -1)
        digits = ((values[:, None] >> shifts) & (base - 1)).astype(np.uint8)
    digits += ord('0')
    if not zero_padded:  # NULs left of each value's own digits
        lengths = np.searchsorted(base ** np.arange(1, width), values, side='right') + 1
        digits[np.arange(width) < (width - lengths)[:, None]] = 0
    return digits


def _quads(pad):
    """The 10,000 groups of four decimal digits, as one uint32 each, left-padded with
    ``pad`` (a byte string of one character) instead of leading zeros."""
    return np.frombuffer(b''.join(b'%4d' % n for n in range(10000)).replace(b' ', pad),
                         np.uint32)


# Four digits per division rather than one: a value's groups of four are looked up here.
# Rows 0-9999 are groups with digits above them, written with zeros; rows 10000-19999
# the leading group, NUL padded (nothing shown for 0, above the last group); rows
# 20000-29999 a leading last group (0 shown as '0').
_DIGIT_QUADS = np.concatenate([_quads(b'0'), _quads(b'\0'), _quads(b'\0')])
_DIGIT_QUADS[10000] = 0


def _decimal_digits(values, width, zero_padded):
    """:func:`digit_columns` in base 10, from :data:`_DIGIT_QUADS`."""
    quads = -(-width // 4)
    rows = np.empty((len(values), quads), np.uint32)
    rest = values
    for column in range(quads - 1, -1, -1):
        rest, quad = np.divmod(rest, 10000)
        if not zero_padded:  # nothing above this group: it leads, padded with NULs
            quad += (rest == 0) * (20000 if column == quads - 1 else 10000)
        rows[:, column] = _DIGIT_QUADS[quad]
    return rows.view(np.uint8).reshape(len(values), 4 * quads)[:, 4 * quads - width:]


def _uniform_lines(keys, exts, offsets, sizes):
    """:func:`index_lines` for samples with the same member extensions: each line is
    assembled as a row of a byte matrix (texts, digits and NUL placeholders), and the NULs
    are dropped (they cannot occur in an index)."""
    count = len(keys)
    parts = []
    for column, ext in enumerate(exts):
        ext = np.frombuffer(ext.encode('utf-8'), np.uint8)
        parts += [np.tile(np.concatenate([[ord(' ')] if column else [], ext, [ord(' ')]])
                          .astype(np.uint8), (count, 1)),
                  digit_columns(offsets[:, column]), np.full((count, 1), ord(' '), np.uint8),
                  digit_columns(sizes[:, column]), np.full((count, 1), ord(' '), np.uint8),
                  keys, np.tile(np.concatenate([[ord('.')], ext]).astype(np.uint8), (count, 1))]
    parts.append(np.full((count, 1), ord('\n'), np.uint8))
    matrix = np.concatenate(parts, axis=1)
    return matrix[matrix != 0].tobytes().decode('utf-8')


def format_index(samples: Sequence[Sample]) -> str:
    """The index of ``samples`` (``[(key, [(ext, offset, size), ...]), ...]``)."""
    return index_text(len(samples), ''.join(index_line(key, files) + '\n'
                                            for key, files in samples))


def _default_index_path(tar_path):
    return tar_path[:-len('.tar')] + '.idx' if tar_path.endswith('.tar') else tar_path + '.idx'


def write_index(tar_path: PathLike, idx_path: PathLike | None = None) -> str:
    """Write the index of a tar in DALI's ``wds2idx`` format v1.2, one line per sample
    (directory entries skipped), to a temporary name renamed when complete.

    Parameters
    ----------
    tar_path : str or os.PathLike
        An uncompressed tar of plain file names.
    idx_path : str or os.PathLike, optional
        Where to write; by default the tar's path with ``.tar`` replaced by ``.idx``.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    FileNotFoundError
        No such tar file.
    ValueError
        A tar that is not a readable uncompressed tar of plain names, or that holds no
        records (DALI rejects an index of ``v1.2 0``); the message names the file.

    Examples
    --------
    >>> import io, os, tarfile, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tar_path = os.path.join(tmp.name, '00000.tar')
    >>> with tarfile.open(tar_path, 'w') as tar:
    ...     for name, data in [('0001.txt', b'a cat'), ('0001.json', b'{}')]:
    ...         info = tarfile.TarInfo(name)
    ...         info.size = len(data)
    ...         tar.addfile(info, io.BytesIO(data))
    >>> print(open(write_index(tar_path)).read(), end='')
    v1.2 1
    txt 512 5 0001.txt json 1536 2 0001.json
    >>> tmp.cleanup()
    """
    tar_path = os.fspath(tar_path)
    if not os.path.isfile(tar_path):
        raise FileNotFoundError('no tar file %s' % tar_path)
    idx_path = _default_index_path(tar_path) if idx_path is None else os.fspath(idx_path)
    samples = group_members(scan_tar(tar_path), tar_path)
    if not samples:
        raise ValueError('%s holds no records: an index of no samples ("%s 0") is not '
                         'written (DALI refuses one)' % (tar_path, INDEX_VERSION))
    with replacing(idx_path) as tmp, open(tmp, 'w', encoding='utf-8') as handle:
        handle.write(format_index(samples))
    return idx_path


def read_index(idx_path: PathLike, tar_path: PathLike, tar_size: int) -> list[Sample]:
    """Parse and check a v1.2 index against its tar's size; samples as :func:`group_members`."""
    try:
        with open(idx_path, 'rb') as handle:
            text = handle.read().decode('utf-8')
    except UnicodeDecodeError as err:
        raise ValueError('%s is not a text index file: %s' % (idx_path, err)) from None
    lines = text.splitlines()
    head = lines[0].split() if lines else []
    if len(head) != 2 or head[0] != INDEX_VERSION or not head[1].isdigit():
        raise ValueError('%s: the first line must be "%s <number of samples>", found %r'
                         % (idx_path, INDEX_VERSION, lines[0] if lines else ''))
    body = [line for line in lines[1:] if line.strip()]
    if len(body) != int(head[1]):
        raise ValueError('%s is damaged: its first line says %s samples but it lists %d; %s'
                         % (idx_path, head[1], len(body), REBUILD % tar_path))
    samples, seen = [], set()
    for number, line in enumerate(body, start=2):
        try:
            key, files = parse_index_line(line, '%s line %d' % (idx_path, number), idx_path,
                                          tar_path, tar_size)
        except ValueError as err:
            raise index_disagreement(idx_path, tar_path, str(err)) from None
        if key in seen:
            raise ValueError('%s line %d: record %r is listed twice' % (idx_path, number, key))
        seen.add(key)
        samples.append((key, files))
    return samples


def parse_index_line(line: str, where: str, idx_path: PathLike, tar_path: PathLike,
                     tar_size: int) -> Sample:
    """``(key, [(ext, offset, size), ...])``: one sample's line of an index, checked against
    its tar's size; ``where`` names the line in errors.

    >>> parse_index_line('jpg 512 3 01.jpg txt 1536 2 01.txt', 'line 2', 'a.idx', 'a.tar', 2048)
    ('01', [('jpg', 512, 3), ('txt', 1536, 2)])
    """
    tokens = line.split()
    if not tokens or len(tokens) % 4:  # a sample has one member at least
        raise ValueError('%s: expected groups of "<ext> <offset> <size> <name>", found %d '
                         'tokens' % (where, len(tokens)))
    files: list[tuple[str, int, int]] = []
    key = None
    for ext, offset, size, name in zip(*[iter(tokens)] * 4):
        member_key, member_ext = split_member_name(name, where)
        if member_ext != ext:
            raise ValueError('%s: extension %r does not match member %r' % (where, ext, name))
        if key is None:
            key = member_key
        elif member_key != key:
            raise ValueError('%s: members %r and %r of one sample have different ids'
                             % (where, '%s.%s' % (key, files[0][0]), name))
        if not (offset.isdigit() and size.isdigit()):
            raise ValueError('%s: offset and size of %r must be whole numbers, found %r '
                             'and %r' % (where, name, offset, size))
        at, length = int(offset), int(size)
        if at < BLOCK or at % BLOCK:
            raise ValueError('%s does not match %s: member %r has data offset %d, which '
                             'is not a tar data offset (a multiple of %d after the first '
                             'header)' % (idx_path, tar_path, name, at, BLOCK))
        if at + length > tar_size:
            raise ValueError('%s does not match %s: member %r at bytes %d..%d is past the '
                             'end of the tar (%d bytes)' % (idx_path, tar_path, name,
                                                            at, at + length, tar_size))
        if any(ext.lower() == other.lower() for other, _, _ in files):
            raise ValueError('%s: member %r is listed twice' % (where, name))
        files.append((ext, at, length))
    if key is None:  # refused above; said again for the type of key
        raise ValueError('%s: an index line lists no members' % where)
    return key, files


def _listed_members(idx_path):
    """``[(name, data offset, size), ...]`` as an index lists them, read leniently (its
    first line and anything that is not four tokens a member skipped); None where it
    cannot be read at all."""
    try:
        with open(idx_path, 'rb') as handle:
            lines = handle.read().decode('utf-8').splitlines()[1:]
        return [(name, int(offset), int(size)) for tokens in map(str.split, lines)
                for _, offset, size, name in zip(*[iter(tokens)] * 4)]
    except (OSError, ValueError):
        return None


def index_disagreement(idx_path: PathLike, tar_path: PathLike, problem: str,
                       otherwise: str | None = None) -> ValueError:
    """The ValueError for an index that disagrees with its tar (``problem`` says how),
    saying which of the two is at fault and what to do about it.

    The tar is read on its own (:func:`~gluonbatch.shards.tar.scan_tar`). If it does
    not read to its end, the tar is damaged (truncated, or corrupt where the index puts a
    member's headers): restore it, the index is not at fault. If it reads whole and holds
    other members than the index lists, the index is stale: rebuild it. If the two agree,
    the fault is elsewhere (the parquet, say): ``otherwise``, by default ``problem``.

    Examples
    --------
    >>> import io, os, tarfile, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tar_path = os.path.join(tmp.name, '00000.tar')
    >>> with tarfile.open(tar_path, 'w') as tar:
    ...     for name in ('0001.txt', '0002.txt'):
    ...         tar.addfile(tarfile.TarInfo(name), io.BytesIO())
    >>> idx_path = write_index(tar_path)
    >>> os.truncate(tar_path, 512)
    >>> print(index_disagreement(idx_path, tar_path, 'a problem'))  # doctest: +ELLIPSIS
    /.../00000.tar is truncated: ...; restore or re-copy it (its index ... is not at fault)
    >>> tmp.cleanup()
    """
    listed = _listed_members(idx_path)
    try:
        scanned = scan_tar(tar_path)
    except DamagedTar as err:
        return ValueError(_damage(idx_path, tar_path, listed, err))
    except (ValueError, OSError):  # not damage (a name records refuse, say): as it was
        return ValueError(problem)
    if listed is not None and sorted(listed) == sorted(scanned):
        return ValueError(problem if otherwise is None else otherwise)
    return ValueError('%s; %s reads to its end as a tar on its own (%d members) and they are '
                      'not what the index lists: the index %s is stale, %s'
                      % (problem, tar_path, len(scanned), idx_path, REBUILD % tar_path))


def _damage(idx_path, tar_path, listed, err):
    """What is wrong with a tar that does not read to its end (``err``, a
    :class:`~gluonbatch.shards.tar.DamagedTar`), told with what its index lists."""
    fix = ' (its index %s is not at fault)' % idx_path
    tar_size = os.path.getsize(tar_path)
    listed_end = max([offset + size for _, offset, size in listed or ()], default=0)
    if listed_end > tar_size:
        return ('%s is truncated: it has %d bytes but its index %s lists members up to byte '
                '%d%s%s' % (tar_path, tar_size, idx_path, listed_end, RESTORE, fix))
    after = [(offset, name) for name, offset, _ in listed or () if offset > err.at]
    if err.truncated or not after:
        text = str(err)
        return text + ('' if text.endswith(RESTORE) else RESTORE) + fix
    offset, name = min(after)
    return ('%s is corrupt: no tar header at byte %d, where its index %s puts the headers of '
            'member %r (data at byte %d); the tar was overwritten or damaged%s%s'
            % (tar_path, err.at, idx_path, name, offset, RESTORE, fix))
