"""Counts and type names in messages: ``1 record`` / ``2 records``, ``an int`` / ``a list``."""

__all__ = ['plural', 'with_article']


def plural(count, noun, plural_form=None):
    """``count`` and ``noun``, the noun in the plural unless ``count`` is 1.

    ``plural_form`` overrides the plural (default: ``noun + 's'``).

    >>> plural(1, 'record'), plural(3, 'record'), plural(0, 'shard')
    ('1 record', '3 records', '0 shards')
    >>> plural(2, 'parquet file'), plural(2, 'index', 'indexes')
    ('2 parquet files', '2 indexes')
    """
    return '%d %s' % (count, noun if count == 1 else plural_form or noun + 's')


def with_article(phrase):
    """``phrase`` after ``a``, or ``an`` before a vowel (type names in messages).

    >>> with_article('int'), with_article('list'), with_article('object')
    ('an int', 'a list', 'an object')
    """
    return ('an %s' if phrase[:1].lower() in 'aeiou' and phrase else 'a %s') % phrase
