"""Shared test settings and fixtures."""
import os

import pytest
from hypothesis import settings

from helpers import make_dataset

# CI runs a fixed, reproducible set of examples; developers get fresh ones on every run.
settings.register_profile('ci', derandomize=True, print_blob=True)
settings.register_profile('dev', print_blob=True)
settings.load_profile('ci' if os.environ.get('CI') else 'dev')


@pytest.fixture
def data(tmp_path):
    """A WebDataset of three shards (3, 2 and 4 records) written by the test helpers:
    ``(directory, records)``."""
    path = str(tmp_path / 'data')
    return path, make_dataset(path)
