"""Smoke test of the benchmark: it runs in quick mode and writes well-formed JSON.

No wall-clock assertions: timings depend on the machine; only the shape of the results is
checked.
"""
import json
import math

from gluonbatch import benchmark

CASES = ['pad_labels', 'pad_images', 'stack_numpy', 'stack_ndarray', 'rcnn_c4', 'rcnn_fpn',
         'loader', 'webdataset', 'memory']
CONTENDERS = {'gluonbatch', 'gluoncv', 'floor'}


def test_quick_run_writes_results_for_every_case(tmp_path, capsys):
    out = tmp_path / 'bench.json'
    assert benchmark.main(['--quick', '--json', str(out)]) == 0
    report = capsys.readouterr().out
    assert 'goals met' in report

    results = json.loads(out.read_text())
    assert results['quick'] is True
    assert {'cpu_count', 'mxnet', 'numpy', 'gluoncv'} <= set(results['machine'])
    assert [case['case'] for case in results['cases']] == CASES
    for case in results['cases']:
        assert set(case['medians_ms']) == CONTENDERS
        assert all(ms > 0 and math.isfinite(ms) for ms in case['medians_ms'].values())
        assert all(len(times) == case['rounds'] for times in case['times_ms'].values())
        assert all(r > 0 and math.isfinite(r) for r in case['ratios'].values())
        assert case['checks']
        for check in case['checks']:
            assert math.isfinite(check['value'])
            if check['goal'] is None:
                assert check['passed'] is None
            else:
                assert check['goal']['op'] in ('>=', '<=')
                assert isinstance(check['passed'], bool)
        if case['case'].startswith('stack'):
            assert set(case['host_temporaries_pct']) == CONTENDERS
        if case['case'] == 'loader':  # information only: epochs of a 2-worker DataLoader
            assert set(case['batches_per_s']) == CONTENDERS
            assert all(check['goal'] is None for check in case['checks'])
        if case['case'] == 'webdataset':  # per record; one goal: random vs sequential reads
            assert set(case['records_per_s']) == CONTENDERS
            assert set(case['raw_read_us_per_record']) == {'random', 'in_order', 'sequential',
                                                           'tarfile_stream'}
            assert case['reshard_mb_per_s'] > 0 and case['copyfile_mb_per_s'] > 0
            goals = [check for check in case['checks'] if check['goal'] is not None]
            assert [check['goal'] for check in goals] == [{'op': '<=', 'bound': 2}]
