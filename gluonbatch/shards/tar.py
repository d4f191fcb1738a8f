"""Tar members: names, scanning a tar's member list, checking and writing member headers.

Members are addressed by byte offset and never extracted. Headers are read and written by
:mod:`tarfile` (``TarFile.next`` parses each header with ``TarInfo.frombuf`` and applies
pax and GNU extended headers; ``TarInfo.tobuf`` writes one), so members with names of 100
bytes or more and members of 8 GiB or more are handled like any other. Directory entries
are skipped (as DALI's ``wds2idx`` and the ``webdataset`` library do); any other entry that
is not a regular file is refused.
"""
import io
import os
import re
import tarfile
from collections.abc import Iterable
from typing import Any, TypeVar

import numpy as np

from .._core.typing import PathLike

__all__ = ['BLOCK', 'RESTORE', 'Size', 'DamagedTar', 'padded', 'split_member_name',
           'scan_tar', 'check_tail', 'check_headers', 'member_header']

#: Tar headers and member data come in blocks of this many bytes.
BLOCK = tarfile.BLOCKSIZE
#: Where a ustar header block holds what checking a member's header compares: its name,
#: size and checksum fields (byte ranges), its type (a regular file's is one of
#: ``REGULAR_TYPES``) and the first byte of its name prefix.
NAME_FIELD, SIZE_FIELD, CHECKSUM_FIELD = slice(0, 100), slice(124, 136), slice(148, 156)
TYPE_AT, PREFIX_AT, REGULAR_TYPES = 156, 345, b'0\0'
#: A member size, or a numpy array of them.
Size = TypeVar('Size', int, np.ndarray)
_BAD_NAME = re.compile(r'[/\\\s\x00]')
#: What to do about a damaged tar, at the end of the messages that say how it is damaged.
RESTORE = '; restore or re-copy it'
#: How member names are decoded, whatever the locale: UTF-8, other bytes kept as surrogate
#: escapes (and refused by :func:`split_member_name`).
_NAMES: dict[str, Any] = {'encoding': 'utf-8', 'errors': 'surrogateescape'}


class DamagedTar(ValueError):
    """A tar that does not read to its end on its own: cut short (``truncated``) or corrupt
    at byte ``at`` (where its readable part ends).

    >>> err = DamagedTar('x.tar is truncated', at=1024, truncated=True)
    >>> isinstance(err, ValueError), err.at, err.truncated
    (True, 1024, True)
    """

    def __init__(self, message: str, at: int, truncated: bool) -> None:
        super().__init__(message)
        self.at, self.truncated = at, truncated


def padded(size: Size) -> Size:
    """Bytes a member's data occupies in a tar: ``size`` rounded up to whole blocks.

    >>> padded(0), padded(1), padded(512), padded(513)
    (0, 512, 512, 1024)
    >>> padded(np.array([0, 513])).tolist()
    [0, 1024]
    """
    return -(-size // BLOCK) * BLOCK


def split_member_name(name: str, where: PathLike) -> tuple[str, str]:
    """``(key, ext)`` of a tar member name; ValueError for names that are not plain files.

    The key is everything before the first ``'.'``, the extension everything after it.
    Names with path components (``'../x.jpg'``, ``'a/b.jpg'``), whitespace, or without a
    key or an extension are refused: members are addressed by offset and never extracted,
    and such names cannot be written to an ``.idx`` file. So are names that are not UTF-8
    (tarfile hands their bytes over as surrogate escapes): an index, a parquet id and a
    JSON id are UTF-8 text, so such a record could never be matched or written.

    >>> split_member_name('000420031.seg.png', 'x.tar')
    ('000420031', 'seg.png')
    >>> split_member_name('../x.jpg', 'x.tar')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x.tar: member name '../x.jpg' has path components or whitespace; ...
    >>> split_member_name(b'caf\\xe9.jpg'.decode('utf-8', 'surrogateescape'), 'x.tar')
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x.tar: member name b'caf\\xe9.jpg' is not UTF-8; ...
    """
    try:
        name.encode('utf-8')
    except UnicodeEncodeError:
        raise ValueError('%s: member name %r is not UTF-8; member names must be UTF-8 text '
                         '(rename it when the tar is written)'
                         % (where, name.encode('utf-8', 'surrogateescape'))) from None
    if _BAD_NAME.search(name):
        raise ValueError('%s: member name %r has path components or whitespace; members must '
                         'be plain names such as \'000000000.jpg\'' % (where, name))
    key, dot, ext = name.partition('.')
    if not key or not dot or not ext:
        raise ValueError('%s: member name %r is not <id>.<extension>' % (where, name))
    return key, ext


def check_tail(tar_path: PathLike, tar_size: int, end: int) -> None:
    """After the last member (at byte ``end``), a tar must hold only zero blocks; else
    :class:`DamagedTar`.

    tarfile stops silently at an unreadable header; whatever is not zeros there is a corrupt
    header (or a second archive appended), and a missing end-of-archive block means the
    file was cut short.
    """
    if tar_size - end < BLOCK:
        raise DamagedTar('%s is truncated: it ends at byte %d without the end-of-archive '
                         'blocks%s' % (tar_path, tar_size, RESTORE), end, True)
    with open(tar_path, 'rb') as handle:
        handle.seek(end)
        position = end
        while True:
            chunk = handle.read(1 << 20)
            if not chunk:
                return
            stripped = chunk.lstrip(b'\0')
            if stripped:
                bad = position + len(chunk) - len(stripped)
                raise DamagedTar('%s is corrupt: unreadable tar header at byte %d (after the '
                                 'last readable member, which ends at byte %d)%s'
                                 % (tar_path, bad - bad % BLOCK, end, RESTORE),
                                 bad - bad % BLOCK, False)
            position += len(chunk)


def scan_tar(tar_path: PathLike) -> list[tuple[str, int, int]]:
    """Every regular member of an uncompressed tar as ``(name, data offset, size)``, in order.

    Reads the headers only (tarfile seeks over the data) and skips directory entries.
    Raises ValueError naming the file and member for anything else that is not a
    well-formed tar of plain, regular files (:class:`DamagedTar` where it does not read to
    its end).

    Examples
    --------
    >>> import os, tarfile, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, 'x.tar')
    >>> with tarfile.open(path, 'w', format=tarfile.GNU_FORMAT) as tar:
    ...     tar.addfile(tarfile.TarInfo('0' * 120 + '.txt'))
    >>> [(len(name), offset, size) for name, offset, size in scan_tar(path)]
    [(124, 1536, 0)]
    >>> tmp.cleanup()
    """
    tar_size = os.path.getsize(tar_path)
    members = []
    end = 0
    try:
        with tarfile.open(tar_path, mode='r:', **_NAMES) as tar:
            for info in tar:
                end = info.offset_data + padded(info.size)
                if info.isdir():
                    continue
                if not info.isreg() or info.issparse():
                    raise ValueError('%s: member %r is not a regular file (tar type %r); '
                                     'records hold only regular files'
                                     % (tar_path, info.name, info.type))
                split_member_name(info.name, tar_path)
                if info.offset_data + info.size > tar_size:
                    raise DamagedTar('%s is truncated: member %r needs bytes %d..%d but the '
                                     'file has %d%s' % (tar_path, info.name, info.offset_data,
                                                        info.offset_data + info.size, tar_size,
                                                        RESTORE), info.offset, True)
                members.append((info.name, info.offset_data, info.size))
    except (tarfile.TarError, EOFError) as err:
        raise DamagedTar('%s is not a readable uncompressed tar (truncated or corrupt?): %s'
                         % (tar_path, err), end, isinstance(err, EOFError)) from None
    check_tail(tar_path, tar_size, end)
    return members


def check_headers(buf: bytes | bytearray | memoryview, base: int,
                  expected: Iterable[tuple[str, int, int]]
                  ) -> tuple[str, int, int, str] | None:
    """The first of the ``expected`` members whose tar headers in ``buf`` do not match.

    ``buf`` holds a tar's bytes from byte ``base`` on, starting where the headers of the
    first expected member begin (directory entries may come first); ``expected`` lists
    ``(name, data offset, size)``. Returns None when every member is there, in byte order,
    as a regular file of that name and size, else ``(name, data offset, size, problem)``.

    Examples
    --------
    >>> header = member_header('0001.txt', 5, 0)
    >>> buf = header + b'a cat'
    >>> check_headers(buf, 0, [('0001.txt', 512, 5)]) is None
    True
    >>> check_headers(buf, 0, [('0002.txt', 512, 5)])
    ('0002.txt', 512, 5, "found the header of '0001.txt'")
    """
    expected = sorted(expected, key=lambda member: member[1])
    starts = _single_header_blocks(base, expected)
    if starts is not None and all(_plain_header_matches(buf[start:start + BLOCK], name, size)
                                  for start, (name, _, size) in zip(starts, expected)):
        return None
    # Diagnose: frombuf where each member has one header block, else tarfile's stream.
    infos = _headers(buf) if starts is None else (_frombuf(buf, start) for start in starts)
    for name, offset, size in expected:
        info = next(infos, None)
        if info is None:
            problem = 'no tar header there'
        elif info.name != name:
            problem = 'found the header of %r' % info.name
        elif base + info.offset_data != offset:
            problem = 'its header says its data is at byte %d' % (base + info.offset_data)
        elif not info.isreg() or info.issparse():
            problem = 'it is not a regular file (tar type %r)' % info.type
        elif info.size != size:
            problem = 'its tar header says %d bytes' % info.size
        else:
            continue
        return name, offset, size, problem
    return None


def _single_header_blocks(base, expected):
    """Where in ``buf`` each expected member's header block starts, if each member has
    exactly one 512-byte header in front of its data (the usual case); None where pax or GNU
    long-name headers or directory entries come first."""
    head, starts = base, []
    for _, offset, size in expected:
        if offset - head != BLOCK:
            return None
        starts.append(head - base)
        head = offset + padded(size)
    return starts


def _plain_header_matches(block, name, size):
    """Whether ``block`` is the plain ustar header of regular file ``name`` of ``size`` bytes.

    The common case, confirmed by comparing the name, size, type and checksum fields with
    what is expected (about 2 us a member, against about 19 us for ``TarInfo.frombuf``).
    Anything else -- a mismatch, a long name, a large member -- returns False and is parsed
    by tarfile, which says what is wrong.

    >>> block = member_header('0001.txt', 5, 0)
    >>> _plain_header_matches(block, '0001.txt', 5), _plain_header_matches(block, '0001.txt', 6)
    (True, False)
    """
    # the checksum sums the header's bytes, its own field's 8 counted as spaces (256)
    return (len(block) == BLOCK and block[TYPE_AT] in REGULAR_TYPES and not block[PREFIX_AT]
            and block[NAME_FIELD].rstrip(b'\0') == name.encode('utf-8')
            and _octal(block[SIZE_FIELD]) == size
            and _octal(block[CHECKSUM_FIELD]) == (sum(block[:CHECKSUM_FIELD.start]) + 256
                                                  + sum(block[CHECKSUM_FIELD.stop:])))


def _octal(field):
    """A NUL- or space-terminated octal number field, or -1 if it is not one."""
    try:
        return int(field.strip(b' \0') or b'0', 8)
    except ValueError:
        return -1


def _frombuf(buf, start):
    try:
        info = tarfile.TarInfo.frombuf(buf[start:start + BLOCK], **_NAMES)
    except tarfile.HeaderError:
        return None
    info.offset, info.offset_data = start, start + BLOCK
    return info


def _headers(buf):
    """The entries of the tar stream in ``buf`` other than directories, until one is bad."""
    try:
        with tarfile.open(fileobj=io.BytesIO(buf), mode='r:', **_NAMES) as tar:
            info = tar.next()
            while info is not None:
                if not info.isdir():
                    yield info
                info = tar.next()
    except (tarfile.TarError, EOFError):
        return


def member_header(name: str, size: int, mtime: int) -> bytes:
    """The tar headers of a regular file (mode 644, owner 0), by ``TarInfo.tobuf``.

    One 512-byte ustar header; pax headers come first when the name is 100 bytes or more,
    not ASCII, or the size is 8 GiB or more.

    >>> len(member_header('0001.jpg', 10, 0)), len(member_header('0' * 150 + '.jpg', 10, 0))
    (512, 1536)
    """
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, mtime, 0o644
    return info.tobuf(tarfile.PAX_FORMAT, encoding='utf-8')
