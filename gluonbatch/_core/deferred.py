"""Samples whose values are computed where they are written.

A preset's last pass over its image (a colour map, say) writes a new array, and a batchify
function then copies that array into its slot of the batch. A :class:`Deferred` sample
holds what the last pass needs instead, and runs it when it is written: straight into the
slot, so the image is written once. ``Stack`` and ``Pad`` write deferred samples into their
slots (:func:`~gluonbatch._core.write.write_slot`); anything else that meets one reads it
as an array (``numpy.asarray``), computed then.

Examples
--------
>>> import numpy as np
>>> class Ramp(Deferred):
...     shape, dtype = (3,), np.dtype(np.float32)
...     def write(self, out):
...         out[...] = np.arange(3)
>>> np.asarray(Ramp())
array([0., 1., 2.], dtype=float32)
"""
import abc

import numpy as np

__all__ = ['Deferred']


class Deferred(abc.ABC):
    """A sample computed when written: subclasses set ``shape`` and ``dtype`` and define
    ``write(out)``, which fills ``out`` (an array of ``shape`` and ``dtype``, perhaps not
    contiguous) and may be called any number of times, with the same result."""

    shape = ()
    dtype = np.dtype(np.float32)

    @property
    def ndim(self):
        """The number of dimensions, as an array's."""
        return len(self.shape)

    @abc.abstractmethod
    def write(self, out):
        """Fill ``out`` with the values."""

    def array(self, out=None):
        """The values written into ``out`` (an array of :attr:`shape` and :attr:`dtype`),
        or into a new array if ``None``; the array."""
        if out is None:
            out = np.empty(self.shape, self.dtype)
        self.write(out)
        return out

    def __array__(self, dtype=None):
        """The values as a new array (``numpy.asarray``, ``mx.nd.array``, gluoncv's
        ``Stack``)."""
        out = self.array()
        return out if dtype is None else out.astype(dtype, copy=False)

    # A sequence too, as arrays are: numpy reads a list of them as a batch of arrays (else
    # as a list of objects). Indexing computes the values each time: take np.asarray first.
    def __len__(self):
        if not self.shape:
            raise TypeError('len() of a 0-d deferred sample')
        return self.shape[0]

    def __getitem__(self, index):
        return np.asarray(self)[index]
