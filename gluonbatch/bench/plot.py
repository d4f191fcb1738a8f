"""The benchmark's bar chart: every case's time over its floor's (``gluonbatch bench --plot``)."""
import numpy as np

__all__ = ['plot_ratios']


def plot_ratios(results, path, title=None):
    """Write a bar chart of every case's time over the floor's to the PNG ``path``.

    Two bars per case, ``gluonbatch / floor`` and ``gluoncv / floor`` (lower is better, 1
    is the floor), on a logarithmic axis; cases without both ratios are left out.

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
    names = [case['case'] for case in cases]
    positions = np.arange(len(cases))
    height = 0.38
    figure, axis = plt.subplots(figsize=(8, 0.55 * len(cases) + 1.4))
    for offset, (key, label, color) in enumerate((
            ('gluonbatch/floor', 'gluonbatch / floor', 'tab:blue'),
            ('gluoncv/floor', 'gluoncv / floor', 'tab:orange'))):
        values = [case['ratios'][key] for case in cases]
        bars = axis.barh(positions + (offset - 0.5) * height, values, height, label=label,
                         color=color)
        axis.bar_label(bars, labels=['%.2fx' % v if v < 10 else '%.0fx' % v for v in values],
                       padding=3, fontsize=8)
    axis.axvline(1.0, color='black', linewidth=1, linestyle='--')
    axis.set_xscale('log')
    axis.set_yticks(positions, names)
    axis.invert_yaxis()
    axis.set_xlabel('median time / floor time (log scale; 1 = the floor)')
    axis.set_title(title, fontsize=10)
    axis.legend(loc='lower right', fontsize=8)
    axis.margins(x=0.15)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
