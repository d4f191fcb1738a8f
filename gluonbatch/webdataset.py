"""Sharded image-text datasets (the NeMo Curator layout), read at random on the CPU.

A dataset is a directory of shards ``00000.tar, 00001.tar, ...``, each with a
``00000.parquet`` beside it (one row of metadata per record) and optionally a
``00000.idx`` (v1.2 index: where each member's bytes are in the tar). A tar holds, per
record, ``<id>.jpg`` (the image), ``<id>.txt`` (the caption) and ``<id>.json`` (metadata);
the members sharing the name before the first ``'.'`` are one record, and the parquet has
one row per record with the same id in its id column.

:class:`ImageTextPairDataset` is a gluon ``Dataset`` over such a directory:
``ds[i]`` reads only the bytes of record ``i`` (offsets from the ``.idx`` files, or from
the tar headers scanned once when the dataset is opened) and returns
``(image, caption, metadata)``. :meth:`ImageTextPairDataset.to_webdataset` writes a
filtered, renumbered copy; :func:`write_index` writes ``.idx`` files.

Examples
--------
>>> import tempfile
>>> import mxnet as mx
>>> from gluonbatch.batchify import Tuple, Pad, List
>>> from gluonbatch.webdataset import ImageTextPairDataset, make_example_dataset
>>> path = make_example_dataset(tempfile.mkdtemp(), num_shards=2, samples_per_shard=3)
>>> ds = ImageTextPairDataset.from_webdataset(path, id_col='key')
>>> len(ds), [name[-9:] for name in ds.tar_files]
(6, ['00000.tar', '00001.tar'])
>>> image, caption, meta = ds[4]
>>> image.dtype, image.shape[2], type(caption).__name__, meta['key']
(<class 'numpy.uint8'>, 3, 'str', '000011')
>>> loader = mx.gluon.data.DataLoader(ds, batch_size=4,
...                                   batchify_fn=Tuple(Pad(axis=(0, 1)), List(), List()))
>>> [(images.shape[0], len(captions)) for images, captions, metas in loader]
[(4, 4), (2, 2)]
"""
import io
import json
import logging
import operator
import os
import re
import tarfile
import threading
import time

import mxnet as mx
import numpy as np
import pandas as pd

__all__ = ['ImageTextPairDataset', 'write_index', 'make_example_dataset',
           'IMAGE_EXTENSIONS', 'INDEX_VERSION']

_LOG = logging.getLogger(__name__)

#: Member extensions taken as the record's image (exactly one per record).
IMAGE_EXTENSIONS = ('jpg', 'jpeg', 'png', 'webp')
#: The first token of an ``.idx`` file this module reads and writes.
INDEX_VERSION = 'v1.2'

_BLOCK = tarfile.BLOCKSIZE          # 512: tar headers and data are in blocks of this size
_SHARD_FILE = re.compile(r'^(\d+)\.(tar|parquet|idx)$')
_BAD_NAME = re.compile(r'[/\\\s\x00]')
_EXAMPLES = 5                       # ids listed in an error message


# --------------------------------------------------------------------------- small helpers

def _padded(size):
    """Bytes a member's data occupies in a tar: ``size`` rounded up to whole blocks."""
    return -(-size // _BLOCK) * _BLOCK


def _examples(values):
    values = sorted(values)
    more = ' and %d more' % (len(values) - _EXAMPLES) if len(values) > _EXAMPLES else ''
    return ', '.join(map(repr, values[:_EXAMPLES])) + more


def _check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError('%s must be an int, got %r' % (name, value))
    if value < minimum:
        raise ValueError('%s must be at least %d, got %d' % (name, minimum, value))
    return int(value)


def id_digits(samples_per_shard):
    """Digits of the record part of an id: ``ceil(log10(samples_per_shard))``, exactly.

    >>> [id_digits(n) for n in (1, 9, 10, 11, 10000, 10001)]
    [0, 1, 1, 2, 4, 5]
    """
    return len(str(samples_per_shard - 1)) if samples_per_shard > 1 else 0


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


def _remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


# --------------------------------------------------------------------------- tar scanning

def _check_tail(tar_path, tar_size, end):
    """After the last member (at byte ``end``), a tar must hold only zero blocks.

    tarfile stops silently at an unreadable header; whatever is not zeros there is a corrupt
    header (or a second archive appended), and a missing end-of-archive block means the
    file was cut short.
    """
    if tar_size - end < _BLOCK:
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
                                 % (tar_path, bad - bad % _BLOCK, end))
            position += len(chunk)


def _scan_tar(tar_path):
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
                end = info.offset_data + _padded(info.size)
    except (tarfile.TarError, EOFError) as err:
        raise ValueError('%s is not a readable uncompressed tar (truncated or corrupt?): %s'
                         % (tar_path, err)) from None
    _check_tail(tar_path, tar_size, end)
    return members


def _group_members(members, where):
    """``[(key, [(ext, offset, size), ...]), ...]``: members grouped by key, first-seen order."""
    samples = {}
    for name, offset, size in members:
        key, ext = split_member_name(name, where)
        files = samples.setdefault(key, [])
        if any(ext == other for other, _, _ in files):
            raise ValueError('%s holds member %r twice (record %r)' % (where, name, key))
        files.append((ext, offset, size))
    return list(samples.items())


def _format_index(samples):
    lines = ['%s %d' % (INDEX_VERSION, len(samples))]
    for key, files in samples:
        lines.append(' '.join('%s %d %d %s.%s' % (ext, offset, size, key, ext)
                              for ext, offset, size in files))
    return '\n'.join(lines) + '\n'


def _default_index_path(tar_path):
    return tar_path[:-len('.tar')] + '.idx' if tar_path.endswith('.tar') else tar_path + '.idx'


def write_index(tar_path, idx_path=None):
    """Write the v1.2 index of a tar: where every member's bytes are, one line per sample.

    The first line is ``v1.2 <number of samples>``; then each sample (members sharing the
    name before the first ``'.'``, in tar order) is one line of
    ``<ext> <data offset> <size> <member name>`` per member, separated by spaces. The data
    offset is the byte offset of the member's content in the tar. The file is written to a
    temporary name and renamed when complete.

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

    Examples
    --------
    >>> import io, os, tarfile, tempfile
    >>> tar_path = os.path.join(tempfile.mkdtemp(), '00000.tar')
    >>> with tarfile.open(tar_path, 'w') as tar:
    ...     for name, data in [('0001.txt', b'a cat'), ('0001.json', b'{}')]:
    ...         info = tarfile.TarInfo(name)
    ...         info.size = len(data)
    ...         tar.addfile(info, io.BytesIO(data))
    >>> print(open(write_index(tar_path)).read(), end='')
    v1.2 1
    txt 512 5 0001.txt json 1536 2 0001.json
    """
    tar_path = os.fspath(tar_path)
    if not os.path.isfile(tar_path):
        raise FileNotFoundError('no tar file %s' % tar_path)
    idx_path = _default_index_path(tar_path) if idx_path is None else os.fspath(idx_path)
    samples = _group_members(_scan_tar(tar_path), tar_path)
    directory, name = os.path.split(os.path.abspath(idx_path))
    tmp = os.path.join(directory, '.%s.tmp' % name)
    try:
        with open(tmp, 'w', encoding='utf-8') as handle:
            handle.write(_format_index(samples))
        os.replace(tmp, idx_path)
    finally:
        _remove_quietly(tmp)
    return idx_path


def _read_index(idx_path, tar_path, tar_size):
    """Parse and check a v1.2 index against its tar's size; samples as :func:`_group_members`."""
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
        raise ValueError('%s does not match itself: its first line says %s samples but it '
                         'lists %d' % (idx_path, head[1], len(body)))
    samples, seen = [], set()
    for number, line in enumerate(body, start=2):
        tokens = line.split()
        if len(tokens) % 4:
            raise ValueError('%s line %d: expected groups of "<ext> <offset> <size> <name>", '
                             'found %d tokens' % (idx_path, number, len(tokens)))
        files, key = [], None
        for ext, offset, size, name in zip(*[iter(tokens)] * 4):
            where = '%s line %d' % (idx_path, number)
            member_key, member_ext = split_member_name(name, where)
            if member_ext != ext:
                raise ValueError('%s: extension %r does not match member %r'
                                 % (where, ext, name))
            if key is None:
                key = member_key
            elif member_key != key:
                raise ValueError('%s: members %r and %r of one sample have different ids'
                                 % (where, '%s.%s' % (key, files[0][0]), name))
            if not (offset.isdigit() and size.isdigit()):
                raise ValueError('%s: offset and size of %r must be whole numbers, found %r '
                                 'and %r' % (where, name, offset, size))
            offset, size = int(offset), int(size)
            if offset < _BLOCK or offset % _BLOCK:
                raise ValueError('%s does not match %s: member %r has data offset %d, which '
                                 'is not a tar data offset (a multiple of %d after the first '
                                 'header)' % (idx_path, tar_path, name, offset, _BLOCK))
            if offset + size > tar_size:
                raise ValueError('%s does not match %s: member %r at bytes %d..%d is past the '
                                 'end of the tar (%d bytes)' % (idx_path, tar_path, name,
                                                                offset, offset + size, tar_size))
            if any(ext == other for other, _, _ in files):
                raise ValueError('%s: member %r is listed twice' % (where, name))
            files.append((ext, offset, size))
        if key in seen:
            raise ValueError('%s line %d: record %r is listed twice' % (idx_path, number, key))
        seen.add(key)
        samples.append((key, files))
    return samples


def _header_error(buf, pos, name, size):
    """Why the tar header at ``buf[pos:pos + 512]`` is not member ``name`` of ``size`` bytes.

    None when it matches. Names that do not fit a ustar name field as ASCII (GNU/pax long or
    non-ASCII names) are not compared: that header holds a truncated or placeholder name;
    neither are sizes of 8 GiB or more (a pax record or base-256 field holds those).
    """
    encoded = name.encode('utf-8')
    header = buf[pos:pos + _BLOCK]
    if len(header) < _BLOCK:
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


# --------------------------------------------------------------------------- shards

class _Shard:
    """One shard: its files, and where its records are in the dataset's record arrays."""

    __slots__ = ('stem', 'tar', 'parquet', 'idx', 'tar_size', 'start', 'stop')

    def __init__(self, directory, stem, has_idx):
        self.stem = stem
        self.tar = os.path.join(directory, stem + '.tar')
        self.parquet = os.path.join(directory, stem + '.parquet')
        self.idx = os.path.join(directory, stem + '.idx') if has_idx else None
        self.tar_size = 0
        self.start = self.stop = 0


def _find_shards(directory):
    """The shard stems of ``directory`` in numeric order; FileNotFoundError for lone files."""
    if not os.path.isdir(directory):
        raise FileNotFoundError('no dataset directory %s' % directory)
    found = {'tar': set(), 'parquet': set(), 'idx': set()}
    for name in os.listdir(directory):
        match = _SHARD_FILE.match(name)
        if match and os.path.isfile(os.path.join(directory, name)):
            found[match.group(2)].add(match.group(1))
    tars, parquets = found['tar'], found['parquet']
    if not tars and not parquets:
        raise FileNotFoundError('%s holds no shards (NNNNN.tar with NNNNN.parquet)'
                                % directory)
    for stems, ext, other in ((tars - parquets, 'tar', 'parquet'),
                              (parquets - tars, 'parquet', 'tar'),
                              (found['idx'] - tars, 'idx', 'tar')):
        if stems:
            stem = min(stems, key=lambda s: (int(s), s))
            raise FileNotFoundError('%s has no %s beside it (%s: %d shard file(s) without '
                                    'their .%s)' % (os.path.join(directory, stem + '.' + ext),
                                                    stem + '.' + other,
                                                    os.path.join(directory, '*.' + ext),
                                                    len(stems), other))
    return sorted(tars, key=lambda s: (int(s), s)), found['idx']


def _read_parquet(shard, id_col):
    """A shard's metadata, rows sorted by id, with the checks that name the file and row."""
    try:
        frame = pd.read_parquet(shard.parquet)
    except ImportError:
        raise
    except Exception as err:  # pyarrow raises its own error types for damaged files
        raise ValueError('%s is not a readable parquet file: %s' % (shard.parquet, err)) from None
    if id_col not in frame.columns:
        raise ValueError('%s has no id column %r; its columns are %s'
                         % (shard.parquet, id_col, list(map(str, frame.columns))))
    ids = frame[id_col].to_numpy()
    for row, value in enumerate(ids):
        if not isinstance(value, str):
            raise TypeError('%s row %d: id %r in column %r is not a str (%s); ids must be '
                            'strings such as \'000420031\' (zero-padded digits)' % (
                                shard.parquet, row, value, id_col, type(value).__name__))
    duplicated = frame[id_col].duplicated()
    if duplicated.any():
        raise ValueError('%s lists record ids more than once: %s'
                         % (shard.parquet, _examples(set(frame[id_col][duplicated]))))
    return frame.sort_values(id_col, kind='stable').reset_index(drop=True)


class _RecordTable:
    """The record arrays under construction: numpy arrays, no per-record Python objects.

    Worker processes forked from the DataLoader share these pages; Python objects per
    record would be copied into every worker as their reference counts change.
    """

    def __init__(self):
        self.exts, self.codes = [], {}
        self.members, self.starts, self.shards, self.slots = [], [0], [], []

    def code(self, ext):
        if ext not in self.codes:
            self.codes[ext] = len(self.exts)
            self.exts.append(ext)
        return self.codes[ext]

    def add_shard(self, number, shard, samples, ids):
        """Add a shard's records in the order of ``ids``, checking them against its tar."""
        where = shard.idx or shard.tar
        by_key = dict(samples)
        missing = [key for key in ids if key not in by_key]
        if missing:
            raise ValueError('%s lists ids that %s does not hold: %s'
                             % (shard.parquet, where, _examples(missing)))
        if len(by_key) != len(ids):
            extra = set(by_key) - set(ids)
            raise ValueError('%s holds records missing from %s: %s'
                             % (where, shard.parquet, _examples(extra)))
        for key in ids:
            files = by_key[key]
            exts = [ext for ext, _, _ in files]
            images = [pos for pos, ext in enumerate(exts) if ext.lower() in IMAGE_EXTENSIONS]
            if len(images) != 1:
                raise ValueError('record %r in %s has %s image members (%s); a record needs '
                                 'exactly one of .%s' % (
                                     key, where, len(images) or 'no',
                                     ', '.join('.' + ext for ext in exts),
                                     ', .'.join(IMAGE_EXTENSIONS)))
            slots = [images[0]]
            for wanted, what in (('txt', 'caption'), ('json', 'metadata')):
                if wanted not in exts:
                    raise ValueError('record %r in %s has no %s member (.%s); it has %s'
                                     % (key, where, what, wanted,
                                        ', '.join('.' + ext for ext in exts)))
                slots.append(exts.index(wanted))
            self.members.extend((offset, size, self.code(ext)) for ext, offset, size in files)
            self.starts.append(len(self.members))
            self.shards.append(number)
            self.slots.append(slots)

    def arrays(self):
        return (np.array(self.members, dtype=np.int64).reshape(-1, 3),
                np.array(self.starts, dtype=np.int64),
                np.array(self.shards, dtype=np.int32),
                np.array(self.slots, dtype=np.int16).reshape(-1, 3))


def _record_spans(members, starts):
    """Per record ``(first byte, length)`` covering its headers and data in one read.

    The length is -1 for records whose members are not adjacent in the tar (read member by
    member then): the span may hold up to 8 blocks more than the members themselves (pax
    headers).
    """
    spans = np.full((len(starts) - 1, 2), -1, dtype=np.int64)
    if len(spans):
        offsets, sizes = members[:, 0], members[:, 1]
        begin = starts[:-1]
        low = np.minimum.reduceat(offsets, begin) - _BLOCK
        high = np.maximum.reduceat(offsets + sizes, begin)
        needed = np.add.reduceat(_BLOCK + -(-sizes // _BLOCK) * _BLOCK, begin) + 8 * _BLOCK
        spans[:, 0] = low
        spans[:, 1] = np.where(high - low <= needed, high - low, -1)
    return spans


#: Incremented in every child process after a fork: datasets then reopen their files.
_FORK_GENERATION = [0]


def _after_fork_in_child():
    _FORK_GENERATION[0] += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


# --------------------------------------------------------------------------- the dataset

class ImageTextPairDataset(mx.gluon.data.Dataset):
    """Random access to a sharded image-text dataset: ``ds[i] -> (image, caption, metadata)``.

    Open one with :meth:`from_webdataset`. ``image`` is an ``mx.nd.NDArray`` (H, W, 3)
    uint8 (RGB, decoded by ``mx.image.imdecode``), ``caption`` the ``.txt`` member as a
    ``str`` and ``metadata`` the ``.json`` member as a ``dict``. Record ``i`` is row ``i``
    of :attr:`metadata`: shards in numeric order, each shard's rows sorted by id.

    Reading a record reads only its bytes (usually one ``pread`` for all its members), and
    checks each member's tar header on the way, so a stale ``.idx`` cannot return another
    member's bytes. File handles are opened lazily, per process: DataLoader worker
    processes each open their own.

    Attributes
    ----------
    metadata : pandas.DataFrame
        One row per record, in record order. Columns added here are used by
        :meth:`to_webdataset` and saved by :meth:`save_metadata`; rows must stay as they are.
    path : str
        The dataset directory (absolute).
    id_col : str
        The id column of the parquet files.
    tar_files : list of str
        The tar of every shard of this dataset (this rank's, with ``world_size > 1``).

    Examples
    --------
    >>> import tempfile
    >>> path = make_example_dataset(tempfile.mkdtemp(), num_shards=3, samples_per_shard=2)
    >>> ds = ImageTextPairDataset.from_webdataset(path, 'key')
    >>> list(ds.metadata['key'])
    ['000000', '000001', '000010', '000011', '000020', '000021']
    >>> resized = ds.transform_first(lambda image: mx.image.imresize(image, 8, 8))
    >>> resized[0][0].shape
    (8, 8, 3)
    >>> sorted(ds.read_raw(0))
    ['jpg', 'json', 'txt']
    """

    def __init__(self, path, id_col, rank=0, world_size=1, use_index=True):
        if not isinstance(id_col, str):
            raise TypeError('id_col must be a str, got %r' % (id_col,))
        world_size = _check_int(world_size, 'world_size', 1)
        rank = _check_int(rank, 'rank', 0)
        if rank >= world_size:
            raise ValueError('rank must be in [0, world_size); got rank %d with world_size %d'
                             % (rank, world_size))
        self.path = os.path.abspath(os.fspath(path))
        self.id_col = id_col
        self.rank, self.world_size = rank, world_size
        stems, indexed = _find_shards(self.path)
        self._all_shards = len(stems)
        stems = stems[rank::world_size]
        if not stems:
            _LOG.warning('%s: rank %d of %d gets no shard (the dataset has %d); its dataset '
                         'is empty', self.path, rank, world_size, self._all_shards)
        self._shards = [_Shard(self.path, stem, use_index and stem in indexed)
                        for stem in stems]
        self._reset_handles()

        frames, table = [], _RecordTable()
        for number, shard in enumerate(self._shards):
            frame = _read_parquet(shard, id_col)
            shard.tar_size = os.path.getsize(shard.tar)
            if shard.idx:
                samples = _read_index(shard.idx, shard.tar, shard.tar_size)
                if len(samples) != len(frame):
                    raise ValueError('%s does not match %s: it lists %d samples, the parquet '
                                     '%d rows (rebuild it with `gluonbatch wds index %s`)'
                                     % (shard.idx, shard.tar, len(samples), len(frame),
                                        shard.tar))
            else:
                samples = _group_members(_scan_tar(shard.tar), shard.tar)
            shard.start = len(table.shards)
            table.add_shard(number, shard, samples, frame[id_col].tolist())
            shard.stop = len(table.shards)
            frames.append(frame)
        (self._members, self._starts, self._record_shard,
         self._slots) = table.arrays()
        self._spans = _record_spans(self._members, self._starts)
        self._verified = np.zeros(len(self._record_shard), dtype=bool)
        self._exts = table.exts
        if frames:
            self.metadata = pd.concat(frames, ignore_index=True)
        else:
            self.metadata = pd.DataFrame({id_col: pd.Series([], dtype=object)})
        self._ids = self.metadata[id_col].to_numpy(dtype=str)
        self._check_unique_ids()
        for shard in self._shards:  # an idx for another tar fails here, not mid-epoch
            if shard.idx and shard.stop > shard.start:
                self._read_members(shard.start)
                self._read_members(shard.stop - 1)

    @classmethod
    def from_webdataset(cls, path, id_col, rank=0, world_size=1, use_index=True):
        """Open the dataset in directory ``path``.

        Parameters
        ----------
        path : str or os.PathLike
            Directory of ``NNNNN.tar`` shards, each with its ``NNNNN.parquet`` and
            optionally ``NNNNN.idx``.
        id_col : str
            The parquet column holding the record ids (string ids, e.g. ``'key'``).
        rank, world_size : int, default 0 and 1
            Keep only the shards of this rank: shard ``k`` (in numeric order) belongs to
            rank ``k % world_size``. Ranks are disjoint and together cover every shard; a
            rank beyond the number of shards gets an empty dataset (and a log warning)
            rather than an error, so every rank can run the same code.
        use_index : bool, default True
            Use the ``.idx`` files present. Without one (or with ``False``) a shard's tar
            headers are scanned once here; no file is written either way.

        Raises
        ------
        FileNotFoundError
            No such directory, no shards, or a tar without its parquet (or the reverse).
        TypeError
            Ids that are not strings.
        ValueError
            Ids or records that do not match between a parquet and its tar, a truncated or
            corrupt tar, an index that does not match its tar, member names with path
            components; each names the file and record.

        Examples
        --------
        >>> import tempfile
        >>> path = make_example_dataset(tempfile.mkdtemp(), num_shards=3, samples_per_shard=2)
        >>> [len(ImageTextPairDataset.from_webdataset(path, 'key', rank=r, world_size=2))
        ...  for r in (0, 1)]
        [4, 2]
        """
        return cls(path, id_col, rank=rank, world_size=world_size, use_index=use_index)

    # ---------------------------------------------------------------- properties

    @property
    def tar_files(self):
        """The tar path of every shard of this dataset, in shard order."""
        return [shard.tar for shard in self._shards]

    def __len__(self):
        return len(self._record_shard)

    def __repr__(self):
        return ('%s(%r, id_col=%r, shards=%d, records=%d%s)'
                % (type(self).__name__, self.path, self.id_col, len(self._shards), len(self),
                   ', rank=%d, world_size=%d' % (self.rank, self.world_size)
                   if self.world_size > 1 else ''))

    def _check_unique_ids(self):
        duplicated = self.metadata[self.id_col].duplicated()
        if duplicated.any():
            key = self.metadata[self.id_col][duplicated].iloc[0]
            shards = [shard.parquet for shard in self._shards
                      if key in set(self._ids[shard.start:shard.stop])]
            raise ValueError('record id %r is in more than one shard: %s' % (key, shards))

    # ---------------------------------------------------------------- file handles

    def _reset_handles(self):
        self._generation = _FORK_GENERATION[0]
        self._lock = threading.Lock()
        self._handles = {}

    def _fd(self, shard):
        """This process's read-only descriptor of ``shard``'s tar, opened on first use."""
        if self._generation != _FORK_GENERATION[0]:
            # a forked worker: open its own handles, never share the parent's
            self._reset_handles()
        handle = self._handles.get(shard.tar)
        if handle is None:
            with self._lock:
                handle = self._handles.get(shard.tar)
                if handle is None:
                    handle = open(shard.tar, 'rb', buffering=0)
                    self._handles[shard.tar] = handle
        return handle.fileno()

    def close(self):
        """Close this process's file handles (they reopen on the next read)."""
        handles, self._handles = self._handles, {}
        if self._generation == _FORK_GENERATION[0]:
            for handle in handles.values():
                handle.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        for name in ('_handles', '_lock', '_generation'):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._reset_handles()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    # ---------------------------------------------------------------- reading

    def _index(self, idx):
        try:
            i = operator.index(idx)
        except TypeError:
            raise TypeError('record index must be an int, got %r' % (idx,)) from None
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError('record index %d out of range for %d records' % (idx, n))
        return i

    def _describe(self, i, member=None):
        shard = self._shards[self._record_shard[i]]
        what = 'member %s of record %r' % (member, self._ids[i]) if member else \
            'record %r' % self._ids[i]
        return '%s (index %d) in %s' % (what, i, shard.tar)

    def _read_members(self, i):
        """``[(ext, bytes), ...]``: every member of record ``i``, in tar order.

        One ``pread`` of the record's span when its members are adjacent (the usual case),
        else one per member. The tar header before each member is checked against the
        member's name and size the first time a process reads the record.
        """
        shard = self._shards[self._record_shard[i]]
        fd = self._fd(shard)
        rows = self._members[self._starts[i]:self._starts[i + 1]].tolist()
        start, length = self._spans[i].tolist()
        if length >= 0:
            buf = os.pread(fd, length, start)
            if len(buf) != length:
                self._truncated(i, shard)
            if not self._verified[i]:
                self._verify(i, shard, [(buf, offset - _BLOCK - start, offset, size, code)
                                        for offset, size, code in rows])
            exts = self._exts
            return [(exts[code], buf[offset - start:offset - start + size])
                    for offset, size, code in rows]
        pieces = []
        for offset, size, code in rows:
            buf = os.pread(fd, _BLOCK + size, offset - _BLOCK)
            if len(buf) != _BLOCK + size:
                self._truncated(i, shard)
            pieces.append((buf, 0, offset, size, code))
        if not self._verified[i]:
            self._verify(i, shard, pieces)
        return [(self._exts[code], buf[_BLOCK:]) for buf, _, _, _, code in pieces]

    def _truncated(self, i, shard):
        raise ValueError('%s ends before the bytes of %s: the tar was truncated after the '
                         'dataset was opened' % (shard.tar, self._describe(i)))

    def _verify(self, i, shard, pieces):
        """Check the tar header of every member of record ``i``; remember that it matched."""
        key = self._ids[i]
        for buf, pos, offset, size, code in pieces:
            name = '%s.%s' % (key, self._exts[code])
            problem = _header_error(buf, pos, name, size)
            if problem:
                source = ('its index %s does not match it' % shard.idx if shard.idx
                          else 'it changed after the dataset was opened')
                raise ValueError('%s: expected member %s (%d bytes) at byte %d but %s; %s'
                                 % (shard.tar, name, size, offset, problem, source))
        self._verified[i] = True

    def read_raw(self, idx):
        """The undecoded members of record ``idx`` as ``{extension: bytes}``.

        Examples
        --------
        >>> import tempfile
        >>> ds = ImageTextPairDataset.from_webdataset(
        ...     make_example_dataset(tempfile.mkdtemp(), num_shards=1), 'key')
        >>> ds.read_raw(0)['jpg'][:2]
        b'\\xff\\xd8'
        """
        return dict(self._read_members(self._index(idx)))

    def __getitem__(self, idx):
        i = self._index(idx)
        members = self._read_members(i)
        image_slot, text_slot, json_slot = self._slots[i].tolist()
        image_ext, image_bytes = members[image_slot]
        try:
            image = mx.image.imdecode(image_bytes)
        except mx.base.MXNetError as err:
            reason = str(err).strip().splitlines()[-1]
            raise ValueError('cannot decode the image of %s: %s'
                             % (self._describe(i, '%s.%s' % (self._ids[i], image_ext)),
                                reason)) from None
        try:
            caption = members[text_slot][1].decode('utf-8')
        except UnicodeDecodeError as err:
            raise ValueError('the caption of %s is not UTF-8 text: %s'
                             % (self._describe(i), err)) from None
        try:
            metadata = json.loads(members[json_slot][1])
        except ValueError as err:
            raise ValueError('the .json member of %s is not valid JSON: %s'
                             % (self._describe(i), err)) from None
        if not isinstance(metadata, dict):
            raise ValueError('the .json member of %s holds a %s, not an object'
                             % (self._describe(i), type(metadata).__name__))
        return image, caption, metadata

    # ---------------------------------------------------------------- writing

    def _checked_metadata(self):
        frame = self.metadata
        if not isinstance(frame, pd.DataFrame):
            raise TypeError('metadata must be a pandas DataFrame, got %s' % type(frame).__name__)
        if self.id_col not in frame.columns:
            raise ValueError('metadata lost its id column %r' % self.id_col)
        if len(frame) != len(self) or not np.array_equal(
                frame[self.id_col].to_numpy(dtype=str), self._ids):
            raise ValueError('metadata no longer matches the records of %s: rows were added, '
                             'removed or reordered, or ids changed (%d rows for %d records); '
                             'add columns, but keep the rows' % (self.path, len(frame),
                                                                 len(self)))
        return frame.reset_index(drop=True)

    def save_metadata(self, path=None, columns=None):
        """Write the metadata back as one parquet per shard, with the shards' file names.

        Parameters
        ----------
        path : str or os.PathLike, optional
            Directory to write into (created if needed). By default the dataset's own
            directory, whose parquet files are then replaced atomically (each is written to
            a temporary name and renamed over the old one).
        columns : list of str, optional
            Save only these columns; the id column is always saved (first, if not listed).

        Returns
        -------
        list of str
            The parquet files written.

        Examples
        --------
        >>> import tempfile
        >>> path = make_example_dataset(tempfile.mkdtemp(), num_shards=2)
        >>> ds = ImageTextPairDataset.from_webdataset(path, 'key')
        >>> ds.metadata['long'] = ds.metadata['caption'].str.len() > 12
        >>> [p[-13:] for p in ds.save_metadata(columns=['long'])]
        ['00000.parquet', '00001.parquet']
        >>> list(ImageTextPairDataset.from_webdataset(path, 'key').metadata.columns)
        ['key', 'long']
        """
        frame = self._checked_metadata()
        if columns is not None:
            if isinstance(columns, str):
                columns = [columns]
            columns = list(columns)
            unknown = [c for c in columns if c not in frame.columns]
            if unknown:
                raise ValueError('save_metadata: no column(s) %s in the metadata; it has %s'
                                 % (unknown, list(map(str, frame.columns))))
            if self.id_col not in columns:
                columns.insert(0, self.id_col)
            frame = frame[columns]
        directory = self.path if path is None else os.path.abspath(os.fspath(path))
        os.makedirs(directory, exist_ok=True)
        written = []
        for shard in self._shards:
            final = os.path.join(directory, shard.stem + '.parquet')
            tmp = os.path.join(directory, '.%s.parquet.tmp' % shard.stem)
            try:
                frame.iloc[shard.start:shard.stop].to_parquet(tmp, index=False)
                os.replace(tmp, final)
            finally:
                _remove_quietly(tmp)
            written.append(final)
        return written

    def to_webdataset(self, path, filter_column, samples_per_shard=10000, max_shards=5,
                      old_id_col=None):
        """Write the records whose ``filter_column`` is True as a new, renumbered dataset.

        Record ``s`` of new shard ``k`` gets id ``s + 10**d * k`` zero-padded to
        ``max_shards + d`` digits, where ``d = ceil(log10(samples_per_shard))``; its members
        are renamed ``<new id>.<ext>``. Each shard is written as ``NNNNN.tar`` (``max_shards``
        digits), ``NNNNN.parquet`` (the metadata, id column renumbered) and ``NNNNN.idx``,
        each to a temporary name (``.NNNNN.tar.tmp``) renamed when complete; the tar before
        the index and the parquet. Records are read and written one at a time, so memory is
        bounded by one output shard's metadata, not by the dataset.

        Parameters
        ----------
        path : str or os.PathLike
            Destination directory (created if needed). It may not be the source directory,
            nor hold shard files already.
        filter_column : str or None
            A bool column of :attr:`metadata` (columns added in memory count); None keeps
            every record.
        samples_per_shard : int, default 10000
        max_shards : int, default 5
            Digits of the shard number; more than ``10**max_shards`` shards is an error,
            raised before anything is written.
        old_id_col : str, optional
            Keep each record's previous id in this new column.

        Returns
        -------
        list of str
            The tar files written, in order; empty (and nothing written, the directory not
            even created) when no record is kept.

        Examples
        --------
        >>> import tempfile
        >>> ds = ImageTextPairDataset.from_webdataset(
        ...     make_example_dataset(tempfile.mkdtemp(), num_shards=2), 'key')
        >>> ds.metadata['keep'] = [True, False, True, True, True, False]
        >>> out = tempfile.mkdtemp()
        >>> [p[-9:] for p in ds.to_webdataset(out, 'keep', samples_per_shard=3,
        ...                                   old_id_col='old_key')]
        ['00000.tar', '00001.tar']
        >>> new = ImageTextPairDataset.from_webdataset(out, 'key')
        >>> new.metadata[['key', 'old_key']].values.tolist()
        [['000000', '000000'], ['000001', '000002'], ['000002', '000010'], ['000010', '000011']]
        """
        frame = self._checked_metadata()
        samples_per_shard = _check_int(samples_per_shard, 'samples_per_shard', 1)
        max_shards = _check_int(max_shards, 'max_shards', 1)
        if filter_column is None:
            keep = np.ones(len(frame), dtype=bool)
        else:
            if filter_column not in frame.columns:
                raise ValueError('to_webdataset: no filter column %r in the metadata; it has %s'
                                 % (filter_column, list(map(str, frame.columns))))
            column = frame[filter_column]
            if not pd.api.types.is_bool_dtype(column.dtype) or column.isna().any():
                raise TypeError('to_webdataset: filter column %r must be bool (True keeps a '
                                'record), got dtype %s' % (filter_column, column.dtype))
            keep = column.to_numpy(dtype=bool)
        if old_id_col is not None:
            if not isinstance(old_id_col, str):
                raise TypeError('old_id_col must be a str, got %r' % (old_id_col,))
            if old_id_col == self.id_col or old_id_col in frame.columns:
                raise ValueError('to_webdataset: old_id_col %r is already a column of the '
                                 'metadata; choose a new name' % old_id_col)
        destination = os.path.abspath(os.fspath(path))
        if os.path.realpath(destination) == os.path.realpath(self.path):
            raise ValueError('to_webdataset: %s is the source directory; write the new '
                             'dataset somewhere else' % destination)
        if os.path.isdir(destination):
            existing = sorted(n for n in os.listdir(destination) if _SHARD_FILE.match(n))
            if existing:
                raise ValueError('to_webdataset: %s already holds shard files (%s); write into '
                                 'an empty directory' % (destination, _examples(existing)))
        rows = np.flatnonzero(keep)
        num_shards = -(-len(rows) // samples_per_shard)
        if num_shards > 10 ** max_shards:
            raise ValueError('to_webdataset: %d records at %d per shard need %d shards, more '
                             'than max_shards=%d digits can number; raise max_shards or '
                             'samples_per_shard' % (len(rows), samples_per_shard, num_shards,
                                                    max_shards))
        if not len(rows):
            _LOG.info('to_webdataset: no record of %s has %r True; nothing written',
                      self.path, filter_column)
            return []
        os.makedirs(destination, exist_ok=True)
        digits = id_digits(samples_per_shard)
        width = max_shards + digits
        mtime = int(time.time())
        written = []
        for shard_number in range(num_shards):
            chunk = rows[shard_number * samples_per_shard:(shard_number + 1) * samples_per_shard]
            new_ids = ['%0*d' % (width, sample + 10 ** digits * shard_number)
                       for sample in range(len(chunk))]
            meta = frame.iloc[chunk].reset_index(drop=True)
            if old_id_col is not None:
                meta[old_id_col] = meta[self.id_col].astype(object)
            meta[self.id_col] = new_ids
            writer = _ShardWriter(destination, '%0*d' % (max_shards, shard_number), mtime)
            try:
                for new_id, row in zip(new_ids, chunk.tolist()):
                    writer.add(new_id, self._read_members(row))
                written.append(writer.finish(meta))
            finally:
                writer.abort()
        _LOG.info('to_webdataset: wrote %d of %d records of %s into %d shard(s) in %s',
                  len(rows), len(frame), self.path, num_shards, destination)
        return written


def _ustar_header(name, size, mtime):
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


class _ShardWriter:
    """Writes one shard: ``.NNNNN.tar.tmp`` etc., renamed into place by :meth:`finish`.

    The tar is plain POSIX ustar, written directly (a header, the data, zero padding per
    member; two zero blocks and padding to a 10240-byte record at the end).
    """

    def __init__(self, directory, stem, mtime):
        self.final = {ext: os.path.join(directory, '%s.%s' % (stem, ext))
                      for ext in ('tar', 'idx', 'parquet')}
        self.tmp = {ext: os.path.join(directory, '.%s.%s.tmp' % (stem, ext))
                    for ext in ('tar', 'idx', 'parquet')}
        self.mtime = mtime
        self.samples = []
        self.position = 0
        self.handle = open(self.tmp['tar'], 'wb')

    def add(self, key, members):
        """Append one record: ``members`` is ``[(ext, bytes), ...]``."""
        files = []
        write = self.handle.write
        for ext, data in members:
            size = len(data)
            write(_ustar_header('%s.%s' % (key, ext), size, self.mtime))
            write(data)
            padding = _padded(size) - size
            if padding:
                write(bytes(padding))
            files.append((ext, self.position + _BLOCK, size))
            self.position += _BLOCK + size + padding
        self.samples.append((key, files))

    def finish(self, metadata):
        """Close the tar, write the index and the parquet, rename all three; the tar path."""
        end = self.position + 2 * _BLOCK
        record = tarfile.RECORDSIZE
        self.handle.write(bytes(2 * _BLOCK + (-end) % record))
        self.handle.close()
        with open(self.tmp['idx'], 'w', encoding='utf-8') as handle:
            handle.write(_format_index(self.samples))
        metadata.to_parquet(self.tmp['parquet'], index=False)
        for ext in ('tar', 'idx', 'parquet'):
            os.replace(self.tmp[ext], self.final[ext])
        return self.final['tar']

    def abort(self):
        """Remove whatever temporary file is left (nothing after :meth:`finish`)."""
        self.handle.close()
        for tmp in self.tmp.values():
            _remove_quietly(tmp)


# --------------------------------------------------------------------------- example data

_WORDS = ('red', 'blue', 'green', 'small', 'large', 'striped', 'cat', 'dog', 'boat', 'tree',
          'house', 'bird', 'on', 'a', 'the', 'beach', 'road', 'hill', 'at', 'night')


def make_example_dataset(path, num_shards=2, samples_per_shard=3, min_size=16, max_size=32,
                         seed=0, index=False):
    """Write a small synthetic dataset in the NeMo Curator layout; returns ``path``.

    Each record has a JPEG (smooth random colours, sides between ``min_size`` and
    ``max_size`` pixels), a caption and JSON metadata (``key``, ``caption``, ``url``,
    ``width``, ``height``); ids follow the resharding rule with 5-digit shard numbers.
    Needs Pillow.

    >>> import os, tempfile
    >>> sorted(os.listdir(make_example_dataset(tempfile.mkdtemp(), num_shards=1, index=True)))
    ['00000.idx', '00000.parquet', '00000.tar']
    """
    from PIL import Image

    num_shards = _check_int(num_shards, 'num_shards', 1)
    samples_per_shard = _check_int(samples_per_shard, 'samples_per_shard', 1)
    rng = np.random.default_rng(seed)
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    digits = id_digits(samples_per_shard)
    for shard_number in range(num_shards):
        writer = _ShardWriter(path, '%05d' % shard_number, 0)
        rows = []
        try:
            for sample in range(samples_per_shard):
                key = '%0*d' % (5 + digits, sample + 10 ** digits * shard_number)
                height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
                coarse = rng.integers(0, 256, (3, 3, 3), dtype=np.uint8)
                picture = Image.fromarray(coarse).resize((width, height), Image.BILINEAR)
                encoded = io.BytesIO()
                picture.save(encoded, 'JPEG', quality=90)
                caption = ' '.join(rng.choice(_WORDS, int(rng.integers(3, 8))))
                meta = {'key': key, 'caption': caption, 'width': width, 'height': height,
                        'url': 'https://example.com/%s.jpg' % key}
                writer.add(key, [('jpg', encoded.getvalue()), ('txt', caption.encode()),
                                 ('json', json.dumps(meta).encode())])
                rows.append(meta)
            writer.finish(pd.DataFrame(rows))
        finally:
            writer.abort()
        if not index:
            os.remove(writer.final['idx'])
    return path
