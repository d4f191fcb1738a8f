"""Rewriting the ids in records' ``.json`` members, as resharding renumbers them.

The format's rule is that a record's JSON, its parquet row and its member names carry one
id. A renumbered record's JSON gets its new id (and optionally its old one under a new key)
and is otherwise kept byte for byte: :class:`JsonIds` replaces the id's value where it is
and appends the new key before the closing brace. The result is the JSON that decoding,
``dict.update`` and encoding give (:func:`with_json_ids`), and for JSON that ``json.dumps``
wrote (``ensure_ascii=False``), the same bytes too.

Where the id is, is checked for a whole batch of members at once, as rows of a numpy
matrix; a new id as long as the old one is written over it in the members' buffer. A
member the bulk check cannot be certain of (a nested object, a backslash, the key written
twice or differently) is decoded: its bytes spliced around the new id where the decoded
object shows where the id is, else encoded anew (and refused if it is not a JSON object). Members are not
otherwise validated: the rewrite changes only the id's bytes.
"""
import json
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from .._core.wording import with_article
from .record_arrays import bytes_rows
from .tar import BLOCK


__all__ = ['with_json_ids', 'JsonIds']


class _Pairs(list):
    """A decoded JSON object as its ``(key, value)`` pairs: repeated keys stay visible."""


# (decoded, end): decodes the JSON value at the start of a text without skipping whitespace
_SCAN_PAIRS = json.JSONDecoder(object_pairs_hook=_Pairs).raw_decode


def with_json_ids(data: bytes, ids: Mapping[str, str], source: str) -> bytes:
    """``data`` (a ``.json`` member) decoded, updated with ``ids`` and encoded again.

    Parameters
    ----------
    data : bytes
    ids : dict
        Key -> id.
    source : str
        Names the record in error messages.

    >>> with_json_ids(b'{"key": "07", "w": 3}', {'key': '00'}, 'record 7')
    b'{"key": "00", "w": 3}'
    """
    try:
        meta = json.loads(data)
    except ValueError as err:
        raise ValueError('the .json member of %s is not valid JSON: %s'
                         % (source, err)) from None
    if not isinstance(meta, dict):
        raise ValueError('the .json member of %s holds %s, not an object'
                         % (source, with_article(type(meta).__name__)))
    meta.update(ids)
    return json.dumps(meta, ensure_ascii=False).encode('utf-8')


class JsonIds:
    """Sets ``id_col`` (and ``old_id_col``, if given) in a batch of ``.json`` members.

    Parameters
    ----------
    id_col : str
    old_id_col : str or None

    Examples
    --------
    >>> data = b'{"key": "07", "w": 3}'
    >>> buffer = np.frombuffer(data, np.uint8).copy()
    >>> JsonIds('key')(buffer, np.array([0]), np.array([len(data)]), ['00'], ['07'], str)
    [None]
    >>> buffer.tobytes()
    b'{"key": "00", "w": 3}'
    >>> JsonIds('key', 'old_key')(buffer, np.array([0]), np.array([len(data)]), ['11'],
    ...                           ['00'], str)
    [b'{"key": "11", "w": 3, "old_key": "00"}']
    """

    def __init__(self, id_col: str, old_id_col: str | None = None) -> None:
        self.id_col, self.old_id_col = id_col, old_id_col
        self._key = np.frombuffer(json.dumps(id_col, ensure_ascii=False).encode('utf-8'),
                                  np.uint8)
        # the old id's key as written: appended before the closing brace, and looked for
        # in members that already have it
        old_key = (None if old_id_col is None else
                   json.dumps(old_id_col, ensure_ascii=False).encode('utf-8'))
        self._old_key = None if old_key is None else b', ' + old_key + b': '
        self._old_key_name = None if old_key is None else np.frombuffer(old_key, np.uint8)

    def __call__(self, buffer: np.ndarray, starts: np.ndarray, sizes: np.ndarray,
                 new_ids: Sequence[str], old_ids: Sequence[str],
                 describe: Callable[[int], str]) -> list[bytes | None]:
        """Set the ids of the members at ``buffer[starts[n]:starts[n] + sizes[n]]``.

        Parameters
        ----------
        buffer : numpy.ndarray of uint8
            Holds the members; a member whose new JSON has its old size is rewritten there.
        starts, sizes : numpy.ndarray of int
        new_ids, old_ids : list of str
            Each member's record's new id (digits, as resharding numbers them) and old id.
        describe : callable
            ``describe(n)`` names member ``n``'s record in error messages.

        Returns
        -------
        list
            Per member, None where it was rewritten in ``buffer``, else its new bytes.

        Raises
        ------
        ValueError
            A member that is not valid JSON, or not an object (naming its record).
        """
        starts, sizes = np.asarray(starts, np.int64), np.asarray(sizes, np.int64)
        new_bytes = [new_id.encode('utf-8') for new_id in new_ids]
        old_bytes = [old_id.encode('utf-8') for old_id in old_ids]
        spans = self._value_spans(buffer, starts, sizes, old_bytes)
        out: list[bytes | None] = [None] * len(sizes)
        plain = np.flatnonzero(spans[:, 0] >= 0)
        if self.old_id_col is None:
            new_lengths = np.fromiter(map(len, new_bytes), np.int64, len(new_bytes))
            same = plain[new_lengths[plain] == spans[plain, 1] - spans[plain, 0]]
            _overwrite(buffer, starts[same] + spans[same, 0], [new_bytes[n] for n in same],
                       new_lengths[same])
            done = np.zeros(len(sizes), bool)
            done[same] = True
        else:
            done = np.zeros(len(sizes), bool)
        is_plain = np.zeros(len(sizes), bool)
        is_plain[plain] = True
        for n in np.flatnonzero(~done).tolist():
            start, size = int(starts[n]), int(sizes[n])
            data = buffer[start:start + size].tobytes()
            if is_plain[n]:
                begin, end = spans[n].tolist()
                out[n] = self._spliced(data, begin, end, new_bytes[n], old_ids[n])
            else:
                out[n] = self._rewrite_one(data, new_ids[n], old_ids[n], describe(n))
        return out

    def _ids(self, new_id, old_id):
        ids = {self.id_col: new_id}
        if self.old_id_col is not None:
            ids[self.old_id_col] = old_id
        return ids

    def _spliced(self, data, begin, end, new_id, old_id):
        """``data`` with bytes ``begin:end`` (the id's value) replaced by ``new_id``, and the
        old id added last, if asked for."""
        data = data[:begin] + new_id + data[end:]
        if self._old_key is not None:
            # before the closing brace, as dict.update puts a new key last
            data = b'%s%s%s}' % (data[:-1], self._old_key,
                                 json.dumps(old_id, ensure_ascii=False).encode('utf-8'))
        return data

    def _rewrite_one(self, data, new_id, old_id, where):
        """One member the bulk check could not place: decoded, then rewritten in place
        where the decoded object shows the id's place is certain, else encoded anew."""
        try:
            text = data.decode('utf-8')
            pairs, end = _SCAN_PAIRS(text, 0)
        except (UnicodeDecodeError, ValueError):
            text, pairs, end = '', None, -1
        if end == len(text) and type(pairs) is _Pairs:
            keys = [key for key, _ in pairs]
            # one top-level key of each name (a second spelling, escaped, would be missed)
            # and no nested object or array, so every key is a top-level one
            if keys.count(self.id_col) == 1 and dict(pairs)[self.id_col] == old_id and \
                    (self.old_id_col is None or self.old_id_col not in keys) and \
                    not any(isinstance(value, list) for _, value in pairs):
                key = self._key.tobytes()
                at = data.find(key)
                value = at + len(key) + 3
                if at > 0 and data[at - 1] in _BEFORE_KEY.tobytes() and \
                        data.find(key, at + 1) < 0 and data.startswith(b': "', value - 3):
                    end = data.find(b'"', value)
                    if data[value:end] == old_id.encode('utf-8'):
                        return self._spliced(data, value, end, new_id.encode('utf-8'), old_id)
        return with_json_ids(data, self._ids(new_id, old_id), where)

    def _value_spans(self, buffer, starts, sizes, old_ids):
        """Per member, ``(start, end)`` of the id's value within it where the bulk rewrite
        is certain of its place, else ``(-1, -1)``.

        Certain means: the member is one object (a brace first and last, no other brace, no
        bracket: every key is a top-level one) without a backslash (no key spelled with
        escapes), and its id's key is written once, as a key (after the brace, a comma or a
        space), followed by ``: "`` or ``:"`` and the old id, a string without escapes.
        Members are checked a batch at a time, as rows of a matrix.
        """
        spans = np.full((len(sizes), 2), -1, np.int64)
        rows = np.flatnonzero((sizes >= 2) & (sizes <= _ROW_BYTES))
        if not len(rows):
            return spans
        width = int(sizes[rows].max())
        if (starts[rows] % BLOCK == 0).all() and len(buffer) % BLOCK == 0:
            # whole blocks (members start on one in a tar): one fast take
            blocks = -(-width // BLOCK)
            last = len(buffer) // BLOCK - 1
            matrix = np.ascontiguousarray(np.take(buffer.reshape(-1, BLOCK), np.minimum(
                starts[rows, None] // BLOCK + np.arange(blocks), last), axis=0).reshape(
                len(rows), -1)[:, :width])
        else:
            matrix = buffer[np.minimum(starts[rows, None] + np.arange(width), len(buffer) - 1)]
        # what follows a short member in its row (the next block's bytes) is not its own:
        # the bytes looked for are found in the whole matrix, and those past their
        # member's end dropped (they are few; a pass per byte value over the matrix is not)
        found = _Found(matrix, sizes[rows])
        row = np.arange(len(rows))
        def byte(position):
            return matrix[row, np.clip(position, 0, width - 1)]
        key_rows, key_at = found.pattern(self._key)
        key_count = np.bincount(key_rows, minlength=len(rows))
        at = np.zeros(len(rows), np.int64)  # the first place of the key, where it is
        has_key = np.flatnonzero(key_count)
        at[has_key] = key_at[np.searchsorted(key_rows, has_key)]
        after = at + len(self._key)
        spaced = byte(after + 1) == ord(' ')
        value = after + 2 + spaced
        # the first quote at or after each value's start: row-major positions, searched
        quotes = np.append(found.flat_positions(ord('"')), len(rows) * width)  # none: past all
        end = quotes[np.minimum(np.searchsorted(quotes, row * width + value),
                                len(quotes) - 1)] - row * width
        old = [old_ids[n] for n in rows.tolist()]
        old_lengths = np.fromiter(map(len, old), np.int64, len(old))
        certain = ((key_count == 1) & (matrix[:, 0] == ord('{'))
                   & (byte(found.lengths - 1) == ord('}'))
                   & (found.count(ord('{')) == 1) & (found.count(ord('[')) == 0)
                   & (found.count(ord('\\')) == 0)
                   & (at > 0) & np.isin(byte(at - 1), _BEFORE_KEY) & (byte(after) == ord(':'))
                   & (byte(value - 1) == ord('"'))
                   & (end < found.lengths) & (end - value == old_lengths))
        if self._old_key_name is not None:  # a member that has it already is decoded
            certain[found.pattern(self._old_key_name)[0]] = False
        longest = int(old_lengths.max())
        if longest:
            gathered = matrix[row[:, None], np.clip(value[:, None] + np.arange(longest), 0,
                                                    width - 1)]
            expected = bytes_rows(old, longest)
            certain &= ((gathered == expected) | (np.arange(longest)
                                                  >= old_lengths[:, None])).all(axis=1)
        spans[rows[certain]] = np.column_stack([value, end])[certain]
        return spans


class _Found:
    """Where bytes occur in the rows of ``matrix`` (uint8), each row a member whose first
    ``lengths`` bytes are its own: occurrences past a row's length are not counted."""

    def __init__(self, matrix, lengths):
        self.matrix, self.flat, self.lengths = matrix, matrix.ravel(), lengths
        self.width = matrix.shape[1]
        self._positions = {}

    def flat_positions(self, value):
        """Row-major positions of byte ``value`` in the whole matrix, sorted (past the
        rows' lengths too)."""
        if value not in self._positions:
            self._positions[value] = np.flatnonzero(self.flat == value)
        return self._positions[value]

    def pattern(self, pattern):
        """``(rows, columns)`` where ``pattern`` (uint8) starts and ends within a row's
        length, row-major order."""
        if len(pattern) == 1:
            starts = self.flat_positions(int(pattern[0]))
        else:  # the first two bytes at once: far fewer places to look at one by one
            flat = self.flat
            starts = np.flatnonzero((flat[:-1] == pattern[0]) & (flat[1:] == pattern[1]))
        rows, columns = np.divmod(starts, self.width)
        inside = columns + len(pattern) <= self.lengths[rows]
        starts, rows, columns = starts[inside], rows[inside], columns[inside]
        for shift in range(2, len(pattern)):
            same = self.flat[starts + shift] == pattern[shift]
            starts, rows, columns = starts[same], rows[same], columns[same]
        return rows, columns

    def count(self, value):
        """Per row, how often byte ``value`` occurs within its length."""
        return np.bincount(self.pattern(np.array([value], np.uint8))[0],
                           minlength=len(self.lengths))


# Members up to this size are checked in bulk, as rows of a matrix; larger ones one by one.
_ROW_BYTES = 4096


def _overwrite(buffer, positions, values, lengths):
    """Write ``values`` (bytes, ``lengths`` long) into ``buffer`` at ``positions``, in one
    scatter where they have one length (new ids usually do)."""
    if not values:
        return
    width = int(lengths[0])
    if (lengths == width).all():
        buffer[positions[:, None] + np.arange(width)] = bytes_rows(values, width)
        return
    for position, value in zip(positions.tolist(), values):
        buffer[position:position + len(value)] = np.frombuffer(value, np.uint8)


_BEFORE_KEY = np.frombuffer(b'{, \t\n\r', np.uint8)
