"""The benchmark's bar chart: every case's time over its floor's
(``python -m benchmarks --plot``)."""
import numpy as np

__all__ = ['OWN_PANELS', 'plot_ratios']

#: Cases whose floor is of another kind than "write each output once", each drawn in a
#: panel with an axis of its own (name -> the panel's axis label). The WebDataset floor is
#: a sequential read of the tar bytes, hundreds of times faster than reading, decoding and
#: batching the records: on the batchify cases' axis it would squash them.
OWN_PANELS = {'webdataset': 'webdataset: median time per record / sequential read of the '
                            'tar bytes per record (log scale)'}
_BARS = (('gluonbatch/floor', 'gluonbatch / floor', 'tab:blue'),
         ('gluoncv/floor', 'gluoncv / floor', 'tab:orange'))
_HEIGHT = 0.38


def _panels(cases):
    """[(x-axis label, cases)]: the batchify cases first, then one panel per OWN_PANELS case.

    >>> [(len(c), label[:11]) for label, c in _panels([{'case': 'pad_labels'},
    ...     {'case': 'webdataset'}, {'case': 'loader'}])]
    [(2, 'median time'), (1, 'webdataset:')]
    """
    shared = [case for case in cases if case['case'] not in OWN_PANELS]
    panels = [('median time / floor time (log scale; 1 = the floor)', shared)] if shared else []
    return panels + [(OWN_PANELS[case['case']], [case]) for case in cases
                     if case['case'] in OWN_PANELS]


def _draw_panel(axis, cases, xlabel):
    """Two horizontal bars per case on a log axis, with the floor (1) as a dashed line."""
    positions = np.arange(len(cases))
    for offset, (key, label, color) in enumerate(_BARS):
        values = [case['ratios'][key] for case in cases]
        bars = axis.barh(positions + (offset - 0.5) * _HEIGHT, values, _HEIGHT, label=label,
                         color=color)
        axis.bar_label(bars, labels=['%.2fx' % v if v < 10 else '%.0fx' % v for v in values],
                       padding=3, fontsize=8)
    axis.axvline(1.0, color='black', linewidth=1, linestyle='--')
    axis.set_xscale('log')
    axis.set_yticks(positions, [case['case'] for case in cases])
    axis.invert_yaxis()
    axis.set_xlabel(xlabel, fontsize=9)
    axis.margins(x=0.15)


def plot_ratios(results, path, title=None):
    """Write a bar chart of every case's time over the floor's to the PNG ``path``.

    Two bars per case, ``gluonbatch / floor`` and ``gluoncv / floor`` (lower is better, 1
    is the floor), on a logarithmic axis; cases without both ratios are left out. The cases
    of :data:`OWN_PANELS`, whose floor is of another kind, each get a panel below with an
    axis of their own.

    Parameters
    ----------
    results : dict
        The results as ``--json`` writes them: ``{'machine': {...}, 'cases': [...]}``, each
        case with ``'case'`` and ``'ratios'``.
    path : str
        Where the PNG goes.
    title : str, optional
        The chart's title (default: a line naming the machine's CPUs and the mode).

    Returns
    -------
    str
        ``path``.

    Raises
    ------
    ValueError
        If no case has both ratios.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    cases = [case for case in results['cases']
             if {'gluonbatch/floor', 'gluoncv/floor'} <= set(case.get('ratios', {}))]
    if not cases:
        raise ValueError('no case with gluonbatch/floor and gluoncv/floor ratios to plot')
    machine = results.get('machine', {})
    if title is None:
        title = 'time / floor per case (lower is better; %s CPUs, python %s%s)' % (
            machine.get('cpus_usable', '?'), machine.get('python', '?'),
            ', QUICK mode' if results.get('quick') else '')
    panels = _panels(cases)
    # every bar pair gets the same height; each panel adds room for its axis label
    figure, axes = plt.subplots(
        len(panels), 1, squeeze=False,
        figsize=(8, 0.55 * len(cases) + 1.4 + 0.7 * (len(panels) - 1)),
        gridspec_kw={'height_ratios': [len(panel) + 0.8 for _, panel in panels]})
    for axis, (xlabel, panel) in zip(axes[:, 0], panels):
        _draw_panel(axis, panel, xlabel)
    axes[0, 0].set_title(title, fontsize=10)
    axes[0, 0].legend(loc='lower right', fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
