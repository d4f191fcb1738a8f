"""Run gluonbatch's ssd example loader; `python scripts/ssd_loader.py --help`."""
import sys

from gluonbatch.examples.ssd import main

if __name__ == '__main__':
    sys.exit(main())
