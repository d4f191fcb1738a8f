"""Messages count in the singular for one: '1 field', '1 device was', never '(s)'."""
import mxnet as mx
import numpy as np
import pytest

from gluonbatch import devices
from gluonbatch.batchify import Pad, Stack, Tuple
from gluonbatch.batchify.fields import NamedTuple


def test_one_field():
    with pytest.raises(ValueError, match=r'sample 1 has 1 field; Tuple expects 2$'):
        Tuple(Stack(), Stack())([(np.zeros(1), np.zeros(1)), (np.zeros(1),)])


def test_one_dimension():
    with pytest.raises(ValueError, match=r'sample 0 has 1 dimension; pad axis 3'):
        Pad(axis=3)([np.zeros(2)])


def test_one_device_was_given():
    pad = Pad(num_shards=2)
    batch = pad([np.zeros((2, 3), 'float32'), np.zeros((1, 3), 'float32')])
    with pytest.raises(ValueError, match=r'the batch has 2 device slices but only 1 device was '
                                         r'given'):
        devices.split_to_devices(batch, [mx.cpu(0)], layout=pad)


def test_one_function_for_two_fields():
    import collections
    point = collections.namedtuple('Point', 'x y')
    with pytest.raises(ValueError, match=r'^1 function given but Point has 2 fields'):
        NamedTuple(point, [Stack()])


def test_no_parenthesized_plurals_left_in_messages():
    import pathlib
    root = pathlib.Path(devices.__file__).parent
    found = [(str(path.relative_to(root)), number)
             for path in root.rglob('*.py')
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if '(s)' in line and ("'" in line or '"' in line) and 'help=' not in line]
    assert found == []
