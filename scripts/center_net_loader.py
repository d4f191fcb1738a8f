"""Run gluonbatch's center_net example loader; `python scripts/center_net_loader.py --help`."""
import sys

from gluonbatch.examples.center_net import main

if __name__ == '__main__':
    sys.exit(main())
