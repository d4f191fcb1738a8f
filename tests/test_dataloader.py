"""gluonbatch batchify functions inside mx.gluon.data.DataLoader, with worker processes."""
import mxnet as mx
import numpy as np
import pytest

from gluonbatch.batchify import Append, Pad, Stack, Tuple
from helpers import SHARED, ndarrays



class DetectionLikeDataset(mx.gluon.data.Dataset):
    """Sample i: an image filled with i, i % 5 + 1 boxes filled with i, and the image again."""

    def __len__(self):
        return 23

    def __getitem__(self, idx):
        image = np.full((3, 8, 8), idx, np.float32)
        boxes = np.full((idx % 5 + 1, 6), idx, np.float32)
        return image, boxes, image


@pytest.mark.parametrize('num_workers', [0, 1, 2])
@pytest.mark.parametrize('thread_pool', [False, True])
def test_every_sample_arrives_once_in_shared_memory(num_workers, thread_pool):
    loader = mx.gluon.data.DataLoader(
        DetectionLikeDataset(), batch_size=4, shuffle=True, last_batch='keep',
        batchify_fn=Tuple(Stack(), Pad(pad_val=-1, ret_length=True), Append()),
        num_workers=num_workers, thread_pool=thread_pool)
    seen = []
    for images, (boxes, lengths), appended in loader:
        assert all(leaf.context == SHARED for leaf in ndarrays((images, boxes, lengths)))
        ids = images.asnumpy()[:, 0, 0, 0].astype(int)
        np.testing.assert_array_equal(lengths.asnumpy(), ids % 5 + 1)
        for row, idx, length in zip(boxes.asnumpy(), ids, ids % 5 + 1):
            assert (row[:length] == idx).all() and (row[length:] == -1).all()
        assert [a.shape for a in appended] == [(1, 3, 8, 8)] * len(ids)
        seen.extend(ids.tolist())
    assert sorted(seen) == list(range(23))


@pytest.mark.parametrize('num_workers', [0, 1, 2])
def test_bad_sample_error_reaches_the_main_process(num_workers):
    class Ragged(DetectionLikeDataset):
        def __getitem__(self, idx):
            image, boxes, _ = super().__getitem__(idx)
            return (image[:, :4] if idx == 5 else image), boxes

    loader = mx.gluon.data.DataLoader(Ragged(), batch_size=23, num_workers=num_workers,
                                      batchify_fn=Tuple(Stack(), Pad()), timeout=60)
    with pytest.raises(ValueError, match=r'field 0: sample 5 has shape \(3, 4, 8\)'):
        for _ in loader:
            pass
