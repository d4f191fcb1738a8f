"""The benchmark table (what ``make bench`` and ``gluonbatch bench`` run); see --help."""
import sys

from gluonbatch.benchmark import main

if __name__ == '__main__':
    sys.exit(main())
