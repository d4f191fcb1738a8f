"""``python -m gluonbatch``: the ``gluonbatch`` command (same arguments, output and exit
code; its help reads ``usage: gluonbatch``)."""
import sys

from .cli import main

if __name__ == '__main__':
    sys.exit(main())
