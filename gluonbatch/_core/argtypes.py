"""argparse value types: the check policy for numbers given on the command line (the
``gluonbatch`` command, the example loaders and the benchmark)."""
import argparse

__all__ = ['positive_int', 'non_negative_int', 'positive_float']


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


def positive_float(text):
    """A finite float > 0, for argparse ``type=``.

    >>> positive_float('1e-3')
    0.001
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError('%r is not a number' % text) from None
    if not 0 < value < float('inf'):
        raise argparse.ArgumentTypeError('%s is not a positive finite number' % text)
    return value
