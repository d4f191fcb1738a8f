"""``python -m gluonbatch.cli``: the ``gluonbatch`` command."""
import sys

from . import main

if __name__ == '__main__':
    sys.exit(main())
