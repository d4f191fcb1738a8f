"""gluonbatch's internal machinery, one mechanism per module.

``checks`` (the one input-check policy), ``layout`` (shape and shard arithmetic), ``native``
(the only ctypes code: views of NDArray memory), ``imagenet`` (the ImageNet channel
statistics), ``alloc`` (the one allocator), ``samples`` (raw samples as host arrays),
``write`` (slot writing), ``tree`` (walking nested batches), ``pickling`` (the worker
reducer, installed explicitly) and ``process`` (per-process state, one at-fork mechanism)
and ``argtypes`` (the check policy for command-line numbers). Nothing here is public API.
"""
