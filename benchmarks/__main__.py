"""``python -m benchmarks`` (what ``make bench`` runs): the benchmark table; ``--help``."""
import sys

from .runner import main

if __name__ == '__main__':
    sys.exit(main())
