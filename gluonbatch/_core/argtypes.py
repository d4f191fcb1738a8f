"""argparse value types: the check policy for numbers given on the command line (the
``gluonbatch`` command, the example loaders and the benchmark)."""
import argparse

__all__ = ['positive_int', 'non_negative_int']


def _whole_number(text, minimum, wrong):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a whole number' % text) from None
    if value < minimum:
        raise argparse.ArgumentTypeError('%d is %s' % (value, wrong))
    return value


def positive_int(text):
    """An int >= 1, for argparse ``type=``.

    >>> positive_int('3')
    3
    """
    return _whole_number(text, 1, 'not positive')


def non_negative_int(text):
    """An int >= 0, for argparse ``type=``.

    >>> non_negative_int('0')
    0
    """
    return _whole_number(text, 0, 'negative')
