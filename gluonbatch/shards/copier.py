"""Copying records from a source shard into a shard being written, by blocks.

Resharding changes a record's member names and the ids in its JSON; everything else is
the same bytes. In a tar, every header and every member's data start on a 512-byte block,
so a batch of records is copied as blocks: the source byte range that holds them is read
with a few large ``preadv`` calls, their tar headers are checked in bulk against the index
(:func:`~gluonbatch.shards.ustar.plain_headers_match`), the new headers are built from a
template (:class:`~gluonbatch.shards.ustar.HeaderBlocks`) over the old ones, and the
batch goes out in one ``writev`` (rewritten JSON members that changed size as pieces of
their own). Python touches a record only in numpy passes over the batch, or to rewrite a
JSON member the bulk pass cannot place. The reads and writes overlap the work: the next
batch is read on a thread of its own, and each batch is written on the writer's thread
while the next one is worked on (both system calls let go of the GIL), with three
buffers used in turn so no buffer is reused while it is read into or written from.

The output is the bytes :class:`~gluonbatch.shards.writer.ShardWriter` writes for the
same records (``TarInfo.tobuf`` headers), which the tests check; a member's padding is
copied from the source (every common tar writer fills it with zeros).
"""
import concurrent.futures
import os
from collections.abc import Sequence

import numpy as np

from .files import Shard
from .index import index_lines
from .reader import header_mismatch
from .tar import BLOCK, check_headers, member_header, padded
from .ustar import HeaderBlocks, name_fields, plain_headers_match, ranges_to_indices
from .json_ids import JsonIds
from .records import ShardRecords
from .writer import ShardWriter

__all__ = ['RecordCopier']

#: Source bytes read per batch of records: large reads, bounded memory.
BATCH_BYTES = 8 << 20
# Records whose bytes lie at most this far apart are read in one range.
_GAP = 64 << 10
_ZEROS = bytes(BLOCK)


class RecordCopier:
    """Copies records of source shards into one :class:`.ShardWriter`'s tar.

    Parameters
    ----------
    writer : ShardWriter
        The shard being written (its tar position and index lines grow).
    id_col, old_id_col : str, str or None
        The JSON keys set to each record's new id and, if given, its old one.
    """

    def __init__(self, writer: ShardWriter, id_col: str, old_id_col: str | None = None) -> None:
        self.writer = writer
        self.headers = HeaderBlocks(writer.mtime)
        self.json_ids = JsonIds(id_col, old_id_col)
        # buffers used by turns: while a batch is worked on, the next one is read into
        # another, and the writer may still be writing the one before from a third
        # (ShardWriter.write_segments waits for that write before it starts the next)
        self._buffers, self._turn = [np.zeros(0, np.uint8)] * 3, 0

    def _scratch(self, length):
        """A buffer of ``length`` bytes, reused every third batch (its pages are mapped
        once, not for every batch)."""
        self._turn = (self._turn + 1) % len(self._buffers)
        if len(self._buffers[self._turn]) < length:
            self._buffers[self._turn] = np.empty(length, np.uint8)
        return self._buffers[self._turn][:length]

    def copy(self, shard: Shard, records: ShardRecords, fd: int,
             rows: Sequence[int] | np.ndarray, new_ids: Sequence[str]) -> None:
        """Append records ``rows`` of ``shard`` (its :class:`.ShardRecords`, read through
        descriptor ``fd``) with ids ``new_ids``, in order."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return
        counts = records.starts[rows + 1] - records.starts[rows]
        table = records.members[ranges_to_indices(records.starts[rows], counts)]
        extent = table[:, 0] + padded(table[:, 1]) - table[:, 3]
        member_ends = np.cumsum(counts)
        per_record = np.add.reduceat(extent, member_ends - counts)
        batches, begin = [], 0
        while begin < len(rows):
            # at least one record per batch, then as many as fit in BATCH_BYTES
            fit = int(np.searchsorted(np.cumsum(per_record[begin:]), BATCH_BYTES, 'right'))
            end = begin + max(1, fit)
            batches.append((begin, end, table[member_ends[begin] - counts[begin]:
                                              member_ends[end - 1]]))
            begin = end

        with concurrent.futures.ThreadPoolExecutor(1) as reads:
            def read(batch):  # the buffer is taken here, in turn, the reading in the thread
                return reads.submit(_ReadPlan(batch[2], self._scratch).read, shard, fd)

            # the next batch is read while this one is worked on (preadv lets go of the GIL)
            pending = read(batches[0])
            for number, (begin, end, batch_table) in enumerate(batches):
                buffer, data_at = pending.result()
                if number + 1 < len(batches):
                    pending = read(batches[number + 1])
                self._copy_batch(shard, records, rows[begin:end], new_ids[begin:end],
                                 counts[begin:end], batch_table, buffer, data_at)

    def _copy_batch(self, shard, records, rows, new_ids, counts, table, buffer, data_at):
        """One batch: records ``rows``, ``counts`` members each, their rows of the member
        table in ``table``, read into ``buffer`` (each member's data at ``data_at``)."""
        firsts = np.cumsum(counts) - counts
        offsets, sizes, codes, heads = table.T
        owner = np.repeat(np.arange(len(rows)), counts)  # each member's record
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
        # once per batch: the buffers' turns rely on it (write_segments waits for the
        # write before, so the buffer read next is no longer being written from)
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


class _ReadPlan:
    """Where a batch's members (rows ``table`` of the member table) are read from and to:
    their headers and data (``heads[i]`` to the end of their last block) into one
    block-aligned buffer (``scratch(length)``), in as few ``preadv`` calls as their layout
    allows (members closer than 64 KiB are read in one range). :meth:`read` reads them."""

    def __init__(self, table, scratch):
        offsets, sizes, _, heads = table.T
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
        # bytes each range must have: its members' data, not the padding of the last
        needed = np.maximum.reduceat((offsets + sizes)[order], np.flatnonzero(new)) - \
            range_starts
        self.ranges = list(zip(range_starts.tolist(), buffer_at.tolist(), lengths.tolist(),
                               needed.tolist()))
        self.buffer = scratch(int(lengths.sum()))
        member_range = np.empty(len(order), np.int64)
        member_range[order] = range_of
        self.data_at = buffer_at[member_range] + offsets - range_starts[member_range]

    def read(self, shard, fd):
        """Read the ranges of ``shard``'s tar (descriptor ``fd``); returns the buffer and,
        per member, where its data begins in it."""
        buffer = self.buffer
        view = memoryview(buffer)
        for start, at, length, need in self.ranges:
            done = 0
            while done < length:
                got = os.preadv(fd, [view[at + done:at + length]], start + done)
                if not got:
                    break
                done += got
            buffer[at + done:at + length] = 0  # past the end of the file: a tar's padding
            if done < need:
                raise ValueError('%s ends at byte %d, before the records read from it: the '
                                 'tar was truncated after the dataset was opened'
                                 % (shard.tar, start + done))
        return buffer, self.data_at
