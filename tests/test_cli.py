"""The ``gluonbatch`` command's messages: counts in words, errors on one line with exit code
2 for a wrong command line, each command's usage and ``--help``, and progress that suits a
log file."""
import os

from gluonbatch import cli
from gluonbatch.webdataset import make_example_dataset


def test_counts_of_one_are_singular(tmp_path, capsys):
    data = make_example_dataset(str(tmp_path / 'data'), num_shards=1, samples_per_shard=1)
    assert cli.main(['wds', 'index', os.path.join(data, '00000.tar')]) == 0
    assert capsys.readouterr().out.endswith('00000.idx: 1 sample\n')
    assert cli.main(['wds', 'inspect', data]) == 0
    out = capsys.readouterr().out
    assert '1 shard (1 with .idx), 1 record,' in out and '\nfirst 1 record:\n' in out
