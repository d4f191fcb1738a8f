"""The errors of the target generators: each a ``ValueError`` (a bad value, the project's
rule) and also the exception gluoncv raises in the same place, so code written for gluoncv
still catches it.

>>> issubclass(ClassOutOfRange, ValueError) and issubclass(ClassOutOfRange, IndexError)
True
"""

__all__ = ['BoxOutsideGrid', 'ClassOutOfRange', 'CellOutOfRange']


class BoxOutsideGrid(ValueError, AssertionError):
    """A box of positive size whose centre cell is not on CenterNet's output grid. A
    ``ValueError``, and an ``AssertionError`` as gluoncv's
    ``assert center_x < self._output_width``."""


class ClassOutOfRange(ValueError, IndexError):
    """A box whose class id is not a class of the network. A ``ValueError``, and an
    ``IndexError`` as gluoncv's indexing by that id."""


class CellOutOfRange(ValueError, IndexError):
    """A box whose centre falls past the last cell of YOLOv3's output layers. A
    ``ValueError``, and an ``IndexError`` as gluoncv's indexing of that cell."""
