"""Old import paths kept working: an alias module warns once, when it is imported.

An alias module re-exports the objects of the module that replaced it (the very same
objects) and calls :func:`warn_moved`; the warning names the new path and is attributed to
the code that imported the old one, so Python shows it there by default.

Examples
--------
>>> import warnings
>>> with warnings.catch_warnings(record=True) as caught:
...     warnings.simplefilter('always')
...     warn_moved('package.old', 'package.new')
>>> print(caught[0].category.__name__, caught[0].message)
DeprecationWarning package.old is deprecated: it moved to package.new, import that instead
"""
import warnings

__all__ = ['warn_moved']


def warn_moved(old, new):
    """Warn that module ``old``, being imported, moved to ``new`` (a ``DeprecationWarning``),
    or that the name ``old``, being read, did.

    Called at the top level of the alias module ``old``, or from the module ``__getattr__``
    that gives the moved name.
    """
    # level 3 is the importer of ``old`` (warnings skips the import machinery's frames),
    # or the code that read the name through ``__getattr__``
    warnings.warn('%s is deprecated: it moved to %s, import that instead' % (old, new),
                  DeprecationWarning, stacklevel=3)

