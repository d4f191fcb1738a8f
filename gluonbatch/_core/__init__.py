"""gluonbatch's internal machinery: the allocator every batch goes through, the input-check
policy, writing samples into a batch, per-process state and the worker reducer. Nothing
here is public API, and nothing here imports a gluonbatch module outside ``_core`` (the
layers point one way).

Examples
--------
Every output is allocated unwritten and written once through a numpy view:

>>> import numpy as np
>>> from gluonbatch._core.alloc import allocate
>>> out, view = allocate((2, 3), np.float32)
>>> view[...] = 1
>>> out.shape, float(out.sum().asscalar())
((2, 3), 6.0)
"""
