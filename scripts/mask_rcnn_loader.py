"""Run gluonbatch's mask_rcnn example loader; `python scripts/mask_rcnn_loader.py --help`."""
import sys

from gluonbatch.examples.rcnn import main_mask

if __name__ == '__main__':
    sys.exit(main_mask())
