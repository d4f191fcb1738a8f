"""Smoke test of scripts/bench.py: it runs in quick mode and writes well-formed JSON.

No wall-clock assertions: timings depend on the machine; only the shape of the results is
checked.
"""
import importlib.util
import json
import math
import pathlib

BENCH = pathlib.Path(__file__).resolve().parents[1] / 'scripts' / 'bench.py'
CASES = ['pad_labels', 'pad_images', 'stack_numpy', 'stack_ndarray', 'rcnn_c4', 'rcnn_fpn']
CONTENDERS = {'gluonbatch', 'gluoncv', 'floor'}


def load_bench():
    """Import scripts/bench.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location('gluonbatch_bench', BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_results_for_every_case(tmp_path, capsys):
    out = tmp_path / 'bench.json'
    assert load_bench().main(['--quick', '--json', str(out)]) == 0
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
