"""Shared test settings."""
import os

from hypothesis import settings

# CI runs a fixed, reproducible set of examples; developers get fresh ones on every run.
settings.register_profile('ci', derandomize=True, print_blob=True)
settings.register_profile('dev', print_blob=True)
settings.load_profile('ci' if os.environ.get('CI') else 'dev')
