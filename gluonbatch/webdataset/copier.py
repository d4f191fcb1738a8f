"""Copying records from a source shard into a shard being written, by blocks.

Resharding changes a record's member names and the ids in its JSON; everything else is
the same bytes. In a tar, every header and every member's data start on a 512-byte block,
so a batch of records is copied as blocks: the source byte range that holds them is read
with a few large ``preadv`` calls, their tar headers are checked in bulk against the index
(:func:`~gluonbatch.webdataset.ustar.plain_headers_match`), the new headers are built from a
template (:class:`~gluonbatch.webdataset.ustar.HeaderBlocks`), and one numpy gather puts
headers, data blocks and rewritten JSON members in place; the batch goes out in one write.
Python touches each record only to rewrite its JSON and format its index line.

The output is the bytes :class:`~gluonbatch.webdataset.writer.ShardWriter` writes for the
same records (``TarInfo.tobuf`` headers), which the tests check; a member's padding is
copied from the source (every common tar writer fills it with zeros).
"""
import os

import numpy as np

from .index import index_lines
from .reader import header_mismatch
from .tar import BLOCK, check_headers, member_header, padded
from .ustar import HeaderBlocks, name_fields, plain_headers_match, ranges_to_indices
from .json_ids import JsonIds

__all__ = ['RecordCopier']

#: Source bytes read per batch of records: large reads, bounded memory.
BATCH_BYTES = 8 << 20
# Records whose bytes lie at most this far apart are read in one range.
_GAP = 64 << 10
_ZEROS = bytes(BLOCK)


class RecordCopier:
    """Copies records of source shards into one :class:`ShardWriter`'s tar.

    Parameters
    ----------
    writer : ShardWriter
        The shard being written (its tar position and index lines grow).
    id_col, old_id_col : str, str or None
        The JSON keys set to each record's new id and, if given, its old one.
    """

    def __init__(self, writer, id_col, old_id_col=None):
        self.writer = writer
        self.headers = HeaderBlocks(writer.mtime)
        self.json_ids = JsonIds(id_col, old_id_col)
        self._buffer = np.zeros(0, np.uint8)

    def _scratch(self, length):
        """A buffer of ``length`` bytes, reused from batch to batch (its pages are mapped
        once, not for every batch)."""
        if len(self._buffer) < length:
            self._buffer = np.empty(length, np.uint8)
        return self._buffer[:length]

    def copy(self, shard, records, fd, rows, new_ids):
        """Append records ``rows`` of ``shard`` (its :class:`ShardRecords`, read through
        descriptor ``fd``) with ids ``new_ids``, in order."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return
        counts = records.starts[rows + 1] - records.starts[rows]
        table = records.members[ranges_to_indices(records.starts[rows], counts)]
        extent = table[:, 0] + padded(table[:, 1]) - table[:, 3]
        member_ends = np.cumsum(counts)
        per_record = np.add.reduceat(extent, member_ends - counts)
        begin = 0
        while begin < len(rows):
            # at least one record per batch, then as many as fit in BATCH_BYTES
            fit = int(np.searchsorted(np.cumsum(per_record[begin:]), BATCH_BYTES, 'right'))
            end = begin + max(1, fit)
            first_member = int(member_ends[begin] - counts[begin])
            self._copy_batch(shard, records, fd, rows[begin:end], new_ids[begin:end],
                             counts[begin:end], table[first_member:member_ends[end - 1]])
            begin = end

    def _copy_batch(self, shard, records, fd, rows, new_ids, counts, table):
        """One batch: records ``rows``, ``counts`` members each, their rows of the member
        table in ``table``."""
        firsts = np.cumsum(counts) - counts
        offsets, sizes, codes, heads = table.T
        owner = np.repeat(np.arange(len(rows)), counts)  # each member's record
        buffer, data_at = _read_members(shard, fd, heads, offsets, sizes, self._scratch)
        old_ids = records.ids[rows].tolist()
        _check_source_headers(shard, records.exts, old_ids, owner, table, buffer, data_at)
        json_members = firsts + records.slots[rows, 2]
        rewritten = self.json_ids(buffer, data_at[json_members], sizes[json_members], new_ids,
                                  old_ids, lambda n: 'record %r of %s' % (old_ids[n], shard.tar))
        # the members keep their extensions in lower case, as a record read returns them
        names = name_fields([key.encode('utf-8') for key in new_ids], owner, codes,
                            records.keys)
        out_sizes = sizes.copy()
        extras = {}  # member -> its new data, where it is not rewritten in the buffer
        for n, data in enumerate(rewritten):
            if data is not None:
                member = int(json_members[n])
                extras[member] = data + _ZEROS[:(-len(data)) % BLOCK]
                out_sizes[member] = len(data)
        segments, data_out = self._patch(buffer, data_at, table, names, out_sizes, owner,
                                         codes, records.keys, new_ids, extras)
        base = self.writer.position
        self.writer.write_segments(segments)
        self.writer.add_index_text(index_lines(new_ids, codes, records.keys, counts,
                                               base + data_out, out_sizes), len(new_ids))

    def _patch(self, buffer, data_at, table, names, sizes, owner, codes, exts, new_ids,
               data_extras):
        """Turn the source bytes in ``buffer`` into the output in place: the new headers
        over the old ones (the data blocks, their padding included, stay as they are).
        Returns the pieces to write, in
        order (views of the buffer, merged where adjacent, and the members' new bytes where
        they do not fit in place), and where each member's data begins in the output."""
        offsets, _, _, heads = table.T
        pax = self.headers.needs_pax(names, sizes)
        in_place = (heads == offsets - BLOCK) & ~pax
        self.headers.write(buffer, data_at[in_place] - BLOCK, names[in_place],
                           sizes[in_place])
        header_extras = {member: member_header('%s.%s' % (new_ids[owner[member]],
                                                          exts[codes[member]]),
                                               int(sizes[member]), self.writer.mtime)
                         for member in np.flatnonzero(~in_place).tolist()}
        # two pieces per member: its headers, its data; -1: not from the buffer
        starts = np.column_stack([data_at - BLOCK, data_at]).ravel()
        lengths = np.column_stack([np.full(len(sizes), BLOCK), padded(sizes)]).ravel()
        extras = {}
        for member, header in header_extras.items():
            starts[2 * member], lengths[2 * member] = -1, len(header)
            extras[2 * member] = header
        for member, data in data_extras.items():
            starts[2 * member + 1] = -1
            extras[2 * member + 1] = data
        outs = np.cumsum(lengths) - lengths
        # merge pieces that follow each other in the buffer
        joins = np.zeros(len(starts), bool)
        joins[1:] = (starts[1:] >= 0) & (starts[:-1] >= 0) & \
            (starts[1:] == starts[:-1] + lengths[:-1])
        firsts = np.flatnonzero(~joins)
        merged = np.add.reduceat(lengths, firsts) if len(firsts) else firsts
        view = memoryview(buffer)
        segments = [extras[first] if start < 0 else view[start:start + length]
                    for first, start, length in zip(firsts.tolist(), starts[firsts].tolist(),
                                                    merged.tolist())]
        return segments, outs[1::2]


def _check_source_headers(shard, exts, keys, owner, table, buffer, data_at):
    """Every member's tar header in ``buffer`` says what the index says (name, size, a
    regular file): checked in bulk, and by tarfile where the bulk check cannot tell (pax
    or GNU headers, another writer's layout), which also says what is wrong."""
    offsets, sizes, codes, heads = table.T
    names = name_fields([key.encode('utf-8') for key in keys], owner, codes, exts)
    single = heads == offsets - BLOCK
    confirmed = np.zeros(len(table), bool)
    confirmed[single] = plain_headers_match(buffer, data_at[single] - BLOCK, names[single],
                                            sizes[single])
    for member in np.flatnonzero(~confirmed).tolist():
        head_at = int(data_at[member] - (offsets[member] - heads[member]))
        found = check_headers(
            buffer[head_at:data_at[member] + sizes[member]].tobytes(), int(heads[member]),
            [('%s.%s' % (keys[owner[member]], exts[codes[member]]), int(offsets[member]),
              int(sizes[member]))])
        if found:
            raise header_mismatch(shard, found)


def _read_members(shard, fd, heads, offsets, sizes, scratch):
    """Read the members' headers and data (``heads[i]`` to the end of their last block)
    from ``shard``'s tar into one block-aligned buffer, in as few ``preadv`` calls as
    their layout allows (members closer than 64 KiB are read in one range).

    Returns the buffer (uint8, ``scratch(length)``) and, per member, where its data begins
    in it.
    """
    ends = offsets + padded(sizes)
    order = np.argsort(heads, kind='stable')
    starts_sorted, ends_sorted = heads[order], np.maximum.accumulate(ends[order])
    # a new range where a member starts past the previous ones' end (plus the gap)
    new = np.ones(len(order), bool)
    new[1:] = starts_sorted[1:] > ends_sorted[:-1] + _GAP
    range_of = np.cumsum(new) - 1
    range_starts = starts_sorted[new]
    range_ends = np.maximum.reduceat(ends_sorted, np.flatnonzero(new))
    lengths = range_ends - range_starts
    buffer_at = np.cumsum(lengths) - lengths
    buffer = scratch(int(lengths.sum()))
    view = memoryview(buffer)
    # bytes each range must have: its members' data, not the padding of the last
    needed = np.maximum.reduceat((offsets + sizes)[order], np.flatnonzero(new)) - range_starts
    for start, at, length, need in zip(range_starts.tolist(), buffer_at.tolist(),
                                       lengths.tolist(), needed.tolist()):
        done = 0
        while done < length:
            got = os.preadv(fd, [view[at + done:at + length]], start + done)
            if not got:
                break
            done += got
        buffer[at + done:at + length] = 0  # past the end of the file: a tar's padding
        if done < need:
            raise ValueError('%s ends at byte %d, before the records read from it: the tar '
                             'was truncated after the dataset was opened'
                             % (shard.tar, start + done))
    member_range = np.empty(len(order), np.int64)
    member_range[order] = range_of
    return buffer, buffer_at[member_range] + offsets - range_starts[member_range]
