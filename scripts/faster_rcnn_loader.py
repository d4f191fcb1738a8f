"""Run gluonbatch's faster_rcnn example loader; `python scripts/faster_rcnn_loader.py --help`."""
import sys

from gluonbatch.examples.rcnn import main_faster

if __name__ == '__main__':
    sys.exit(main_faster())
