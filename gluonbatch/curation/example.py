"""A small synthetic dataset in the NeMo Curator layout, for examples and tests."""
import io
import json
import os

import numpy as np
import pandas as pd

from .._core.checks import check_int
from .._core.typing import PathLike
from ..shards.commit import FORWARD, staging
from ..shards.files import remove_quietly
from ..shards.writer import ShardWriter, commit_shards, id_digits, record_key
from .metadata_writer import arrow_table

__all__ = ['make_example_dataset']

_WORDS = ('red', 'blue', 'green', 'small', 'large', 'striped', 'cat', 'dog', 'boat', 'tree',
          'house', 'bird', 'on', 'a', 'the', 'beach', 'road', 'hill', 'at', 'night')


def make_example_dataset(path: PathLike, num_shards: int = 2, samples_per_shard: int = 3,
                         min_size: int = 16, max_size: int = 32, seed: int | None = 0,
                         index: bool = False) -> str:
    """Write a small synthetic dataset in the NeMo Curator layout; returns ``path``.

    Each record has a JPEG (smooth random colours, sides between ``min_size`` and
    ``max_size`` pixels), a caption and JSON metadata (``key``, ``caption``, ``url``,
    ``width``, ``height``); ids follow the resharding rule with 5-digit shard numbers.
    Needs Pillow.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     print(sorted(os.listdir(make_example_dataset(tmp, num_shards=1, index=True))))
    ['00000.idx', '00000.parquet', '00000.tar']
    """
    from PIL import Image

    num_shards = check_int(num_shards, 'num_shards', minimum=1)
    samples_per_shard = check_int(samples_per_shard, 'samples_per_shard', minimum=1)
    min_size = check_int(min_size, 'min_size', minimum=1)
    max_size = check_int(max_size, 'max_size', minimum=min_size)
    rng = np.random.default_rng(seed)
    path = os.fspath(path)
    os.makedirs(path, exist_ok=True)
    digits = id_digits(samples_per_shard)
    stems = ['%05d' % shard_number for shard_number in range(num_shards)]
    with staging(path) as stage:
        for shard_number, stem in enumerate(stems):
            writer = ShardWriter(stage.path, stem, 0)
            rows = []
            for sample in range(samples_per_shard):
                key = record_key(shard_number, sample, digits)
                height, width = (int(v) for v in rng.integers(min_size, max_size + 1, 2))
                coarse = rng.integers(0, 256, (3, 3, 3), dtype=np.uint8)
                picture = Image.fromarray(coarse).resize((width, height),
                                                         Image.Resampling.BILINEAR)
                encoded = io.BytesIO()
                picture.save(encoded, 'JPEG', quality=90)
                caption = ' '.join(rng.choice(_WORDS, int(rng.integers(3, 8))))
                meta = {'key': key, 'caption': caption, 'width': width, 'height': height,
                        'url': 'https://example.com/%s.jpg' % key}
                writer.add(key, [('jpg', encoded.getvalue()), ('txt', caption.encode()),
                                 ('json', json.dumps(meta).encode())])
                rows.append(meta)
            writer.finish(arrow_table(pd.DataFrame(rows)))
        if not index:  # an index of an earlier dataset there would not match
            for stem in stems:
                remove_quietly(os.path.join(path, stem + '.idx'))
        # the shards appear together (an existing dataset's files are replaced)
        commit_shards(stage, stems, FORWARD, index=index)
    return path
