"""Pictures of what each batchify function returns, for the documentation.

Every figure is made by calling the real gluonbatch function on a few tiny samples and
drawing its output: one panel per output field, one row per sample (or per list item),
each cell coloured by the sample its value came from and padding shaded grey and hatched.
``docs/conf.py`` calls :func:`draw_all` at build time; the figures belong to the pages,
not to the package.
"""
import collections
import os

import numpy as np

__all__ = ['FIGURES', 'draw_figure', 'draw_all']

# Three 1-d samples of different lengths: the values say which sample (tens) and position.
_LENGTHS = (2, 5, 3)


def _labels():
    return [np.arange(n, dtype='float32') + 10 * (i + 1) for i, n in enumerate(_LENGTHS)]


def _images():
    return [np.full(4, i + 1, dtype='float32') for i in range(len(_LENGTHS))]


_Sample = collections.namedtuple('Sample', ['image', 'label'])


def _cells_of_array(array, lengths=None):
    """Rows of (text, sample or None) for an NDArray/ndarray with the batch on axis 0."""
    values = np.asarray(array.asnumpy() if hasattr(array, 'asnumpy') else array)
    if values.ndim == 1:
        values = values[:, None]
    values = values.reshape(values.shape[0], -1)
    rows = []
    for i, row in enumerate(values):
        valid = row.size if lengths is None else int(lengths[i])
        rows.append([('%g' % v, i if j < valid else None) for j, v in enumerate(row)])
    return rows


def _describe(value):
    if hasattr(value, 'asnumpy'):
        return 'NDArray %s %s %s' % (tuple(value.shape), np.dtype(value.dtype).name,
                                     value.context)
    return type(value).__name__


def _panel(name, value, lengths=None):
    """One panel: a title and rows of cells, from an output field."""
    if isinstance(value, list):
        rows = []
        for i, item in enumerate(value):
            if hasattr(item, 'asnumpy'):
                rows.append([('%g' % v, i) for v in item.asnumpy().ravel()])
            else:
                rows.append([(repr(item), i)])
        kinds = sorted({_describe(item) for item in value})
        title = '%s: list of %d (%s)' % (name, len(value), '; '.join(kinds))
        return {'title': title, 'rows': rows, 'row_label': 'item %d'}
    return {'title': '%s: %s' % (name, _describe(value)),
            'rows': _cells_of_array(value, lengths), 'row_label': 'sample %d'}


def _stack():
    from gluonbatch.batchify import Stack
    return [_panel('batch', Stack()(_images()))]


def _pad():
    from gluonbatch.batchify import Pad
    batch, lengths = Pad(pad_val=-1, ret_length=True)(_labels())
    return [_panel('batch', batch, _LENGTHS), _panel('valid lengths', lengths)]


def _pad_slices():
    from gluonbatch.batchify import Pad
    slices = Pad(pad_val=-1, num_shards=2)(_labels())
    panels, start = [], 0
    for index, piece in enumerate(slices):
        count = piece.shape[0]
        panel = _panel('device slice %d' % index, piece, _LENGTHS[start:start + count])
        # keep the colours of the samples' positions in the whole batch
        panel['rows'] = [[(text, None if sample is None else sample + start)
                          for text, sample in row] for row in panel['rows']]
        panel['first'] = start
        panels.append(panel)
        start += count
    return panels


def _append():
    from gluonbatch.batchify import Append
    return [_panel('batch', Append()(_labels()))]


def _list():
    from gluonbatch.batchify import List
    return [_panel('batch', List()(['cat', 'two dogs', 'a bird']))]


def _tuple():
    from gluonbatch.batchify import Pad, Stack, Tuple
    images, labels = Tuple(Stack(), Pad(pad_val=-1))(list(zip(_images(), _labels())))
    return [_panel('[0] Stack()', images), _panel('[1] Pad(pad_val=-1)', labels, _LENGTHS)]


def _dict():
    from gluonbatch.batchify import Dict, Pad, Stack
    samples = [{'image': image, 'label': label} for image, label in zip(_images(), _labels())]
    batch = Dict({'image': Stack(), 'label': Pad(pad_val=-1)})(samples)
    return [_panel("['image'] Stack()", batch['image']),
            _panel("['label'] Pad(pad_val=-1)", batch['label'], _LENGTHS)]


def _named_tuple():
    from gluonbatch.batchify import NamedTuple, Pad, Stack
    samples = [_Sample(image, label) for image, label in zip(_images(), _labels())]
    batch = NamedTuple(_Sample, {'image': Stack(), 'label': Pad(pad_val=-1)})(samples)
    return [_panel('.image Stack()', batch.image),
            _panel('.label Pad(pad_val=-1)', batch.label, _LENGTHS)]


def _default_collate():
    from gluonbatch import default_collate
    samples = [{'image': image, 'count': len(label), 'id': 'img-%d' % i}
               for i, (image, label) in enumerate(zip(_images(), _labels()))]
    batch = default_collate(samples)
    return [_panel("['image']", batch['image']), _panel("['count']", batch['count']),
            _panel("['id']", batch['id'])]


#: name -> (title, function returning the panels of that batchify's output)
FIGURES = collections.OrderedDict([
    ('stack', ('Stack()(samples)', _stack)),
    ('pad', ('Pad(pad_val=-1, ret_length=True)(samples)', _pad)),
    ('pad_slices', ('Pad(pad_val=-1, num_shards=2)(samples)', _pad_slices)),
    ('append', ('Append()(samples)', _append)),
    ('list', ("List()(['cat', 'two dogs', 'a bird'])", _list)),
    ('tuple', ('Tuple(Stack(), Pad(pad_val=-1))(samples)', _tuple)),
    ('dict', ("Dict({'image': Stack(), 'label': Pad(pad_val=-1)})(samples)", _dict)),
    ('namedtuple', ("NamedTuple(Sample, {'image': Stack(), 'label': Pad(pad_val=-1)})"
                    "(samples)", _named_tuple)),
    ('default_collate', ('default_collate(samples)', _default_collate)),
])


def draw_figure(name, path):
    """Draw the figure ``name`` (a key of :data:`FIGURES`) as a PNG at ``path``.

    Parameters
    ----------
    name : str
        Which batchify function: ``'stack'``, ``'pad'``, ... (the keys of ``FIGURES``).
    path : str
        Where the PNG goes.

    Returns
    -------
    str
        ``path``.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = draw_figure('pad', os.path.join(tmp, 'pad.png'))
    ...     open(out, 'rb').read(8) == b'\\x89PNG\\r\\n\\x1a\\n'
    True
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    title, make_panels = FIGURES[name]
    panels = make_panels()
    colors = plt.get_cmap('tab10')

    def cell_width(text):
        return max(1.0, 0.22 * len(text) + 0.3)

    widths = [max(sum(cell_width(text) for text, _ in row) for row in panel['rows'])
              for panel in panels]
    heights = [len(panel['rows']) + 1.2 for panel in panels]
    # wide enough for the longest title too (monospace, about 0.19 cells per character)
    span = max(max(widths), 5, 0.19 * max(len(panel['title']) for panel in panels),
               0.17 * len(title))
    figure, axes = plt.subplots(len(panels), 1, squeeze=False,
                                figsize=(1.6 + 0.55 * span, 0.5 + 0.42 * sum(heights)),
                                gridspec_kw={'height_ratios': heights})
    for axis, panel in zip(axes[:, 0], panels):
        first = panel.get('first', 0)
        for i, row in enumerate(panel['rows']):
            x = 0.0
            for text, sample in row:
                width = cell_width(text)
                if sample is None:  # padding
                    patch = Rectangle((x, i), width, 1, facecolor='0.85', edgecolor='0.4',
                                      hatch='//', linewidth=0.8)
                else:
                    patch = Rectangle((x, i), width, 1, facecolor=colors(sample % 10),
                                      alpha=0.45, edgecolor='0.25', linewidth=0.8)
                axis.add_patch(patch)
                axis.text(x + width / 2, i + 0.5, text, ha='center', va='center',
                          fontsize=8)
                x += width
        rows = len(panel['rows'])
        axis.set_xlim(-0.05, span + 0.05)
        axis.set_ylim(rows + 0.05, -0.05)
        axis.set_aspect('equal')
        axis.set_xticks([])
        axis.set_yticks([i + 0.5 for i in range(rows)],
                        [panel['row_label'] % (i + first) for i in range(rows)], fontsize=8)
        for side in ('top', 'right', 'bottom', 'left'):
            axis.spines[side].set_visible(False)
        axis.tick_params(length=0)
        axis.set_title(panel['title'], fontsize=9, loc='left', family='monospace')
    figure.suptitle(title, fontsize=10, family='monospace')
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def draw_all(directory):
    """Draw every figure of :data:`FIGURES` into ``directory`` as ``NAME.png``.

    Returns
    -------
    list of str
        The paths written.
    """
    os.makedirs(directory, exist_ok=True)
    return [draw_figure(name, os.path.join(directory, name + '.png')) for name in FIGURES]
