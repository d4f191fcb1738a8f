"""Draw one padded detection batch: images with their boxes, padding shaded, devices named."""
from collections.abc import Sequence

import numpy as np

from .._core.imagenet import IMAGENET_MEAN, IMAGENET_STD
from .._core.typing import PathLike

__all__ = ['draw_detection_batch']

# gluoncv's presets normalise images with the ImageNet statistics.
_MEAN = np.array(IMAGENET_MEAN)
_STD = np.array(IMAGENET_STD)


def _displayable(image):
    """(3, H, W) normalised float -> (H, W, 3) in [0, 1]."""
    return np.clip(image.transpose(1, 2, 0) * _STD + _MEAN, 0, 1)


def draw_detection_batch(path: PathLike, images: Sequence[np.ndarray],
                         labels: Sequence[np.ndarray], valid_sizes: Sequence[Sequence[int]],
                         devices: Sequence[int], title: str, columns: int = 4,
                         heatmaps: Sequence[np.ndarray] | None = None) -> PathLike:
    """Write a PNG grid of a padded batch and return ``path``.

    Parameters
    ----------
    path : str
        Where the PNG goes.
    images : list of numpy.ndarray
        One normalised (3, H, W) image per sample, as padded in its device slice.
    labels : list of numpy.ndarray
        (M, >= 4) boxes per sample (xmin, ymin, xmax, ymax, class...); rows of -1 are padding.
    valid_sizes : list of (int, int)
        Each sample's own (height, width) before padding.
    devices : list of int
        The device whose slice of the batch each sample is in.
    title : str
    columns : int, default 4
    heatmaps : list of numpy.ndarray, optional
        One (h, w) map in [0, 1] per sample (e.g. CenterNet's targets), drawn over its image
        and stretched to it; cells below 0.01 stay transparent.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = os.path.join(tmp, 'b.png')
    ...     _ = draw_detection_batch(out, [np.zeros((3, 40, 60))],
    ...                              [np.array([[5, 5, 20, 30, 1]])], [(40, 50)], [0], 'one image')
    ...     open(out, 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n'
    True
    """
    # a bare Figure, not pyplot: nothing global (backend, open figures) changes
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    count = len(images)
    columns = max(1, min(columns, count))
    rows = -(-count // columns)
    figure = Figure(figsize=(4 * columns, 3.4 * rows + 0.6))
    axes = figure.subplots(rows, columns, squeeze=False)
    colors = matplotlib.colormaps['tab10']
    for index, axis in enumerate(axes.flat):
        axis.axis('off')
        if index >= count:
            continue
        image = images[index]
        _, height, width = image.shape
        valid_h, valid_w = valid_sizes[index]
        axis.imshow(_displayable(image))
        if heatmaps is not None:
            axis.imshow(np.ma.masked_less(heatmaps[index], 0.01), cmap='inferno', vmin=0,
                        vmax=1, alpha=0.6, extent=(-0.5, width - 0.5, height - 0.5, -0.5))
        # the padding: everything right of and below the sample's own size
        for x, y, w, h in ((valid_w, 0, width - valid_w, height),
                           (0, valid_h, valid_w, height - valid_h)):
            if w > 0 and h > 0:
                axis.add_patch(Rectangle((x - 0.5, y - 0.5), w, h, facecolor='black',
                                         alpha=0.55, hatch='//', edgecolor='white',
                                         linewidth=0))
        for box in labels[index]:
            if box[0] < 0:
                continue  # a padding row
            class_id = int(box[4]) if len(box) > 4 else 0
            axis.add_patch(Rectangle((box[0], box[1]), box[2] - box[0], box[3] - box[1],
                                     fill=False, linewidth=1.6, edgecolor=colors(class_id % 10)))
        axis.set_title('sample %d, device %d\nvalid %dx%d of %dx%d'
                       % (index, devices[index], valid_h, valid_w, height, width), fontsize=9,
                       color=colors(devices[index] % 10))
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    return path
