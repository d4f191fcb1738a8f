"""Shard discovery: ``NNNNN.tar`` with ``NNNNN.parquet`` (and ``NNNNN.idx``) beside it."""
import os
import re

import numpy as np

SHARD_FILE = re.compile(r'^(\d+)\.(tar|parquet|idx)$')
_EXAMPLES = 5                       # ids listed in an error message


def examples(values):
    values = sorted(values)
    more = ' and %d more' % (len(values) - _EXAMPLES) if len(values) > _EXAMPLES else ''
    return ', '.join(map(repr, values[:_EXAMPLES])) + more


def check_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError('%s must be an int, got %r' % (name, value))
    if value < minimum:
        raise ValueError('%s must be at least %d, got %d' % (name, minimum, value))
    return int(value)


def remove_quietly(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


# --------------------------------------------------------------------------- shards

class Shard:
    """One shard: its files, and where its records are in the dataset's record arrays."""

    __slots__ = ('stem', 'tar', 'parquet', 'idx', 'tar_size', 'start', 'stop')

    def __init__(self, directory, stem, has_idx):
        self.stem = stem
        self.tar = os.path.join(directory, stem + '.tar')
        self.parquet = os.path.join(directory, stem + '.parquet')
        self.idx = os.path.join(directory, stem + '.idx') if has_idx else None
        self.tar_size = 0
        self.start = self.stop = 0


def find_shards(directory):
    """The shard stems of ``directory`` in numeric order; FileNotFoundError for lone files."""
    if not os.path.isdir(directory):
        raise FileNotFoundError('no dataset directory %s' % directory)
    found = {'tar': set(), 'parquet': set(), 'idx': set()}
    for name in os.listdir(directory):
        match = SHARD_FILE.match(name)
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


