"""Run gluonbatch's yolo example loader; `python scripts/yolo_loader.py --help`."""
import sys

from gluonbatch.examples.yolo import main

if __name__ == '__main__':
    sys.exit(main())
