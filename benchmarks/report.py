"""The benchmark's report: machine facts, the printed tables, and the results as JSON data."""
import importlib
import importlib.metadata
import json
import os
import platform

__all__ = ['machine_facts', 'format_value', 'format_goal', 'format_report', 'json_ready',
           'steal_summary', 'write_json']


def _version(distribution, module):
    """Installed distribution version (gluoncv's ``__version__`` misreports 0.10.5 as 0.11.0).

    >>> _version('numpy', 'numpy') == __import__('numpy').__version__
    True
    """
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return getattr(importlib.import_module(module), '__version__', 'unknown')


def machine_facts():
    """Versions and CPU facts printed at the top of the report and stored in the JSON.

    >>> sorted(machine_facts())[:3]
    ['MXNET_CPU_WORKER_NTHREADS', 'OMP_NUM_THREADS', 'cpu_count']
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    return {'python': platform.python_version(), 'platform': platform.platform(),
            'processor': platform.processor() or platform.machine(),
            'cpu_count': os.cpu_count(), 'cpus_usable': usable,
            'mxnet': _version('mxnet', 'mxnet'), 'numpy': _version('numpy', 'numpy'),
            'gluoncv': _version('gluoncv', 'gluoncv'),
            'gluonbatch': _version('gluonbatch', 'gluonbatch'),
            'load_average_1m': os.getloadavg()[0],
            'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS'),
            'MXNET_CPU_WORKER_NTHREADS': os.environ.get('MXNET_CPU_WORKER_NTHREADS')}


def format_value(check):
    """``12.3x`` / ``0.4%`` / ``61234 rec/s`` / ``18.3 ms`` style rendering of a check's value.

    >>> format_value({'unit': 'x', 'value': 31.04}), format_value({'unit': '%', 'value': 0.43})
    ('31.0x', '0.4%')
    >>> [format_value({'unit': unit, 'value': value})
    ...  for unit, value in (('rec/s', 61234.4), ('ms', 18.26), ('ms', 0.314))]
    ['61234 rec/s', '18.3 ms', '0.31 ms']
    """
    unit, value = check['unit'], check['value']
    if unit == '%':
        return '%.1f%%' % value
    if unit == 'rec/s':
        return '%.0f rec/s' % value
    if unit == 'ms':
        return '%.1f ms' % value if value >= 10 else '%.2f ms' % value
    return '%.2fx' % value if value < 10 else '%.1fx' % value


def format_goal(check):
    """The goal column: ``>= 50x``, ``<= 5%``, ``>= 60000 rec/s``, ``<= 20 ms`` or ``-``
    for information-only lines.

    >>> format_goal({'goal': ('>=', 50), 'unit': 'x'}), format_goal({'goal': None})
    ('>= 50x', '-')
    >>> [format_goal({'goal': goal, 'unit': unit})
    ...  for goal, unit in ((('>=', 60000), 'rec/s'), (('<=', 20), 'ms'), (('<=', 5), '%'))]
    ['>= 60000 rec/s', '<= 20 ms', '<= 5%']
    """
    if check['goal'] is None:
        return '-'
    op, bound = check['goal']
    unit = check['unit']
    # the units of absolute values are set apart from the number, as format_value does
    return '%s %g%s%s' % (op, bound, ' ' if unit in ('rec/s', 'ms') else '', unit)


def _preamble(facts, rows, quick):
    """The lines above the tables: the mode, the machine and what the times mean."""
    lines = ['gluonbatch benchmark%s' % (' (QUICK smoke mode: small sizes, few rounds; '
                                        'goals are not meaningful)' if quick else ''),
             'machine: %s cpus (%s usable), %s, python %s, load average %.2f at start'
             % (facts['cpu_count'], facts['cpus_usable'], facts['processor'], facts['python'],
                facts['load_average_1m']),
             'versions: mxnet %s, numpy %s, gluoncv %s, gluonbatch %s'
             % (facts['mxnet'], facts['numpy'], facts['gluoncv'], facts['gluonbatch']),
             'floor = mx.nd.array(np.ones(shape), ctx=cpu_shared(0)) per output; times are medians '
             'of interleaved rounds, ms']
    if any(row['case'] == 'loader' for row in rows):
        lines.append('loader: ms per batch over whole epochs of a 2-worker DataLoader (rounds are '
                     'epochs); its floor makes each batch that way in the worker')
    for row in rows:
        if row['case'] == 'webdataset':
            raw = row['raw_read_us_per_record']
            lines.append('webdataset: ms per record over shuffled epochs of a 2-worker DataLoader '
                         '(read + decode + batchify); its floor reads the tar bytes front to back')
            lines.append('webdataset: %.0f records/s; raw reads per record: random %.1f us, in '
                         'order %.1f us, sequential bytes %.2f us, tarfile stream %.1f us, '
                         'verify %.1f us; reshard %.0f MB/s, copyfile %.0f MB/s'
                         % (row['records_per_s']['gluonbatch'], raw['random'], raw['in_order'],
                            raw['sequential'], raw['tarfile_stream'], raw['verify'],
                            row['reshard_mb_per_s'], row['copyfile_mb_per_s']))
        if row['case'].startswith('curation'):
            lines += _curation_lines(row)
        if 'decode_ms' in row:
            lines.append('%s: of the floor, decoding the JPEG is %.2f ms'
                         % (row['case'], row['decode_ms']))
        if row['case'].startswith('transforms_loader'):
            lines.append('%s: images/s %s' % (row['case'], ', '.join(
                '%s %.1f' % item for item in row['images_per_s'].items())))
        if row['case'] == 'seeded_loader':
            lines.append("seeded_loader: gluonbatch = DetectionDataLoader, mxnet = MXNet's "
                         'DataLoader, seeded = with seed=0 (mxnet seeded: SeededDataset + '
                         'SeededBatchSampler); times are CPU seconds of all the loader\'s '
                         'processes, the goal\'s measure')
            for key, unit in (('images_per_cpu_s', 'images per CPU second'),
                              ('images_per_s', 'images/s (wall clock)')):
                lines.append('seeded_loader: %s %s' % (unit, ', '.join(
                    '%s %.1f' % item for item in row[key].items())))
            lines.append('seeded_loader: the work seeding adds to a batch (its keys made and '
                         'pickled, each sample\'s generators seeded, MXNet\'s once), alone: '
                         '%.2f CPU ms' % row['seeding_ms'])
        if row['case'].startswith('jpeg_loader'):
            stages = ''
            if 'stages_ms' in row:
                stages = ('; in a 1-worker loader timing its stages, %.2f ms: %s in its '
                          'worker, plumbing %.2f ms' % (
                              row['split_cpu_ms'],
                              ', '.join('%s %.2f' % item for item in row['stages_ms'].items()),
                              row['plumbing_ms']))
            lines.append('%s: images/s %s; CPU per image, 1 worker %.2f ms, decode alone %.2f '
                         'ms (%.2fx the decode)%s'
                         % (row['case'], ', '.join('%s %.1f' % item
                                                   for item in row['images_per_s'].items()),
                            row['one_worker_cpu_ms'], row['decode_cpu_ms'],
                            row['ratios']['one worker/decode'], stages))
        if row['case'] == 'shards':
            lines.append('shards: images/s %s; raw reads %.0f records/s vs copying the shards '
                         '%.0f; opening %d shards %.1f ms'
                         % (', '.join('%s %.1f' % item for item in row['images_per_s'].items()),
                            row['records_per_s']['read_raw'], row['records_per_s']['copy'],
                            row['open_shards'], row['open_ms']))
        if row['case'] == 'resume':
            ms = row['medians_ms']
            lines.append('resume: load_state_dict + first batch %.3f ms at the first batch, '
                         '%.3f ms at the last; state_dict() %.4f ms, %d bytes of JSON'
                         % (ms['first batch'], ms['last batch'], ms['state_dict'],
                            row['state_bytes']))
        if row['case'].startswith('batch_targets'):
            lines.append('%s: %.1f MB of targets for %d boxes; ms gluonbatch in a worker %.3f'
                         % (row['case'], row['out_bytes'] / 1e6, row['boxes'],
                            row['medians_ms']['gluonbatch in a worker']))
    if any(row['case'].startswith('transforms_') for row in rows):
        lines.append('transforms: ms per sample of each train preset with its targets on '
                     'decoded 500x375 JPEGs (seeded alike); floor = decode + one resize + one '
                     'normalize; the loader cases time batches of a 2-worker DataLoader, '
                     '"batch targets": presets without targets + the batchify computing the '
                     "batch's targets")
    if any(row['case'].startswith('jpeg_loader') for row in rows):
        lines.append("jpeg_loader: gluonbatch and floor (decode alone) = gluonbatch.DataLoader, "
                     "seeded; gluoncv = its dataset, preset and script batchify on MXNet's "
                     'DataLoader; CPU per image = a 1-worker gluonbatch.DataLoader, every '
                     'process and thread counted; stages = thread CPU of each step in the '
                     "worker of a third 1-worker loader, plumbing = the rest of that "
                     "loader's CPU")
    if any(row['case'].startswith('batch_targets') for row in rows):
        lines.append("batch_targets: ms for one batch's training targets of the boxes the "
                     'presets give: gluonbatch = the batchify\'s targets() into fresh shared '
                     "memory (in a worker: into recycled memory), gluoncv = the sum "
                     "of its preset's per-sample target generation; floor = one memset of the "
                     "targets' bytes into a buffer mapped beforehand")
    return lines


#: How the report names the phases of a curation row's ``host_steal``.
_STEAL_PHASES = {'in_process': 'in-process rounds', 'clusters': 'cluster rounds',
                 'rounds': 'timed rounds', 'first_reads': 'first reads'}


def steal_summary(row):
    """The share of CPU time the host took in each phase of a curation ``row``, as text
    (``'timed rounds 3%, first reads 1%'``), or None where none was recorded.

    >>> steal_summary({'host_steal': {'rounds': 0.031, 'first_reads': None}})
    'timed rounds 3%'
    """
    return ', '.join('%s %.0f%%' % (_STEAL_PHASES.get(name, name), 100 * share)
                     for name, share in row.get('host_steal', {}).items()
                     if share is not None) or None


def _curation_lines(row):
    """The preamble's lines for a curation case (no gluoncv contender)."""
    per_s = row['records_per_s']
    lines = ['%s: records/s on 2 Dask workers (the gluonbatch column) %.0f, 1 worker %.0f, '
             'threads %.0f, one process %.0f; floor %s %.0f'
             % (row['case'], per_s['gluonbatch'], per_s['dask_1_worker'], per_s['threads'],
                per_s['single_process'], row['floor_is'], per_s['floor'])]
    stolen = steal_summary(row)
    if stolen:
        lines.append('%s: CPU time the host took from this machine (steal) while timing: %s'
                     % (row['case'], stolen))
    if 'driver_peak_mb' in row:
        peak = row['driver_peak_mb']
        lines.append('%s: driver peak MB: threads %.0f (a quarter of the data %.0f), client '
                     'of the 2-worker cluster %.0f, eager pandas %.0f; one partition %.1f MB'
                     % (row['case'], peak['threads'], peak['threads_quarter'],
                        peak['cluster'], peak['eager'], row['partition_mb']))
    if 'first_record_ms' in row:
        first, reads = row['first_record_ms'], row['read_ms_per_record']
        lines.append('%s: open + first record, each in a fresh process (median of %d): '
                     '%.1f ms with .idx; without, %.1f ms beside %.1f ms for the tar scan of '
                     'its shard alone' % (row['case'], row['fresh_processes'], first['with_idx'],
                                          first['without_idx'], first['scan_tar']))
        lines.append('%s: ms per read after opening, shard loads included (%d reads per fresh '
                     'process): random positions %.3f, consecutive %.3f'
                     % (row['case'], row['reads_per_process'], reads['random'],
                        reads['sequential']))
    return lines


def format_report(facts, rows, quick):
    """The printed report: machine facts, a table of medians, a table of ratios and goals.

    ``facts`` is :func:`machine_facts`' dict, ``rows`` the cases' rows (each numbered),
    ``quick`` whether the run was the smoke mode.
    """
    lines = _preamble(facts, rows, quick) + ['']
    header = '%-3s %-42s %6s %8s %11s %11s %11s' % ('#', 'case', 'rounds', 'out MB',
                                                       'gluonbatch', 'gluoncv', 'floor')
    lines += [header, '-' * len(header)]
    for row in rows:
        ms = row['medians_ms']
        lines.append('%-3d %-42s %6d %8.2f %s' % (
            row['number'], row['title'], row['rounds'], row['out_bytes'] / 1e6,
            ' '.join('%11.3f' % ms[name] if name in ms else '%11s' % '-'
                     for name in ('gluonbatch', 'gluoncv', 'floor'))))
    lines.append('')
    header = '%-3s %-32s %12s %14s  %s' % ('#', 'metric', 'measured', 'goal', 'result')
    lines += [header, '-' * len(header)]
    for row in rows:
        for check in row['checks']:
            result = {True: 'PASS', False: 'MISS', None: 'info'}[check['passed']]
            lines.append('%-3d %-32s %12s %14s  %s' % (row['number'], check['metric'],
                                                      format_value(check), format_goal(check),
                                                      result))
    missed = sum(check['passed'] is False for row in rows for check in row['checks'])
    total = sum(check['passed'] is not None for row in rows for check in row['checks'])
    lines += ['', '%d of %d goals met' % (total - missed, total)]
    return '\n'.join(lines)


def json_ready(facts, rows, quick, seed):
    """The results as plain JSON data (goals become ``{"op": ..., "bound": ...}``).

    >>> row = {'case': 'c', 'checks': [{'goal': ('<=', 2)}, {'goal': None}]}
    >>> json_ready({}, [row], True, 0)['cases'][0]['checks']
    [{'goal': {'op': '<=', 'bound': 2}}, {'goal': None}]
    """
    cases = []
    for row in rows:
        row = dict(row, checks=[dict(check) for check in row['checks']])
        for check in row['checks']:
            if check['goal'] is not None:
                check['goal'] = {'op': check['goal'][0], 'bound': check['goal'][1]}
        cases.append(row)
    return {'machine': facts, 'quick': quick, 'seed': seed, 'cases': cases}


def write_json(results, path):
    """Write :func:`json_ready`'s ``results`` to ``path`` (indented, one trailing newline)."""
    with open(path, 'w', encoding='utf-8') as handle:
        json.dump(results, handle, indent=1)
        handle.write('\n')
