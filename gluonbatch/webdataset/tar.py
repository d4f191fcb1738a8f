"""Tar members: names, header scanning and checking, and writing headers.

Members are addressed by byte offset and never extracted; this module reads an uncompressed
tar's member list with :mod:`tarfile`, checks a member's header before its bytes are
trusted, and writes the header of a new member.
"""
import os
import re
import tarfile

__all__ = ['split_member_name', 'scan_tar', 'padded']

BLOCK = tarfile.BLOCKSIZE          # 512: tar headers and data are in blocks of this size
_BAD_NAME = re.compile(r'[/\\\s\x00]')


def padded(size):
    """Bytes a member's data occupies in a tar: ``size`` rounded up to whole blocks."""
    return -(-size // BLOCK) * BLOCK



def split_member_name(name, where):
    """``(key, ext)`` of a tar member name; ValueError for names that are not plain files.

    The key is everything before the first ``'.'``, the extension everything after it.
    Names with path components (``'../x.jpg'``, ``'a/b.jpg'``), whitespace, or without a
    key or an extension are refused: members are addressed by offset and never extracted,
    and such names cannot be written to an ``.idx`` file.

    >>> split_member_name('000420031.seg.png', 'x.tar')
    ('000420031', 'seg.png')
    >>> split_member_name('../x.jpg', 'x.tar')  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: x.tar: member name '../x.jpg' has path components or whitespace; ...
    """
    if _BAD_NAME.search(name):
        raise ValueError('%s: member name %r has path components or whitespace; members must '
                         'be plain names such as \'000000000.jpg\'' % (where, name))
    key, dot, ext = name.partition('.')
    if not key or not dot or not ext:
        raise ValueError('%s: member name %r is not <id>.<extension>' % (where, name))
    return key, ext



def _check_tail(tar_path, tar_size, end):
    """After the last member (at byte ``end``), a tar must hold only zero blocks.

    tarfile stops silently at an unreadable header; whatever is not zeros there is a corrupt
    header (or a second archive appended), and a missing end-of-archive block means the
    file was cut short.
    """
    if tar_size - end < BLOCK:
        raise ValueError('%s is truncated: it ends at byte %d without the end-of-archive '
                         'blocks' % (tar_path, tar_size))
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
                raise ValueError('%s is corrupt: unreadable tar header at byte %d (after the '
                                 'last readable member, which ends at byte %d)'
                                 % (tar_path, bad - bad % BLOCK, end))
            position += len(chunk)


def scan_tar(tar_path):
    """Every member of an uncompressed tar as ``(name, data offset, size)``, in tar order.

    Reads the headers only (tarfile seeks over the data). Raises ValueError naming the file
    and member for anything that is not a well-formed tar of plain, regular files.
    """
    tar_size = os.path.getsize(tar_path)
    members = []
    end = 0
    try:
        with tarfile.open(tar_path, mode='r:') as tar:
            for info in tar:
                if not info.isreg() or info.issparse():
                    raise ValueError('%s: member %r is not a regular file (tar type %r); '
                                     'records hold only regular files'
                                     % (tar_path, info.name, info.type))
                split_member_name(info.name, tar_path)
                if info.offset_data + info.size > tar_size:
                    raise ValueError('%s is truncated: member %r needs bytes %d..%d but the '
                                     'file has %d' % (tar_path, info.name, info.offset_data,
                                                      info.offset_data + info.size, tar_size))
                members.append((info.name, info.offset_data, info.size))
                end = info.offset_data + padded(info.size)
    except (tarfile.TarError, EOFError) as err:
        raise ValueError('%s is not a readable uncompressed tar (truncated or corrupt?): %s'
                         % (tar_path, err)) from None
    _check_tail(tar_path, tar_size, end)
    return members

def header_error(buf, pos, name, size):
    """Why the tar header at ``buf[pos:pos + 512]`` is not member ``name`` of ``size`` bytes.

    None when it matches. Names that do not fit a ustar name field as ASCII (GNU/pax long or
    non-ASCII names) are not compared: that header holds a truncated or placeholder name;
    neither are sizes of 8 GiB or more (a pax record or base-256 field holds those).
    """
    encoded = name.encode('utf-8')
    header = buf[pos:pos + BLOCK]
    if len(header) < BLOCK:
        return 'no tar header there'
    if (len(encoded) < 100 and name.isascii()
            and header[:len(encoded) + 1] != encoded + b'\0'):
        found = header[:100].split(b'\0', 1)[0].decode('utf-8', 'replace')
        return 'found the header of %r' % found
    field = header[124:136]
    if size < 8 ** 11 and not field[0] & 0x80:
        try:
            recorded = int(field.strip(b'\0 ') or b'0', 8)
        except ValueError:
            return 'no tar header there'
        if recorded != size:
            return 'its tar header says %d bytes' % recorded
    return None



def member_header(name, size, mtime):
    """The 512-byte POSIX ustar header of a regular file (mode 644, owner 0)."""
    encoded = name.encode('utf-8')
    if len(encoded) > 100:
        raise ValueError('member name %r is longer than the 100 bytes of a tar header' % name)
    if size >= 8 ** 11:
        raise ValueError('member %r has %d bytes; members of 8 GiB or more are not supported'
                         % (name, size))
    fields = b'0000644\x000000000\x000000000\x00%011o\x00%011o\x00        0' % (size, mtime)
    header = bytearray(_HEADER_TEMPLATE)
    header[0:len(encoded)] = encoded
    header[100:157] = fields
    header[148:156] = b'%06o\x00 ' % (sum(encoded) + sum(fields) + _HEADER_TEMPLATE_SUM)
    return bytes(header)


_HEADER_TEMPLATE = bytes(257) + b'ustar\x0000' + bytes(64) + b'0000000\x000000000\x00' + bytes(167)
_HEADER_TEMPLATE_SUM = sum(_HEADER_TEMPLATE)
