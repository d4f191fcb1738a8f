"""gluonbatch's internal machinery, one mechanism per module. Nothing here is public API, and
nothing here imports a gluonbatch module outside ``_core`` (the layers point one way).

- ``alloc``: the one allocator (fresh shared, recycled or plain memory, per the setting);
- ``argtypes``: the check policy for command-line numbers (argparse value types);
- ``assemble``: what every batchify function builds on: stack, pad per shard, per field;
- ``checks``: the one input-check policy;
- ``console``: whether output is a terminal, and the line a stage prints where it is not;
- ``deferred``: samples computed where they are written (straight into the batch);
- ``heap``: glibc's heap settings (its ``mallopt``, through ctypes);
- ``imagenet``: the ImageNet channel statistics, the presets' and batchifiers' defaults;
- ``inference``: output shapes of a traced network per input size, inferred once;
- ``inputs``: the checks of a detection sample's image and label and of mean / std;
- ``jpeg``: JPEG decoding by libjpeg-turbo with MXNet's pixels (MXNet for the rest);
- ``layout``: shape and shard arithmetic;
- ``memory_settings``: the memory and recycling settings (behind ``gluonbatch.memory``);
- ``native``: the ctypes code of MXNet's library: views of NDArray memory and its counts;
- ``pickling``: the worker reducer, installed on import and reversible;
- ``process``: per-process state, one at-fork mechanism, objects shipped to forks by token;
- ``recycle``: recycled shared-memory segments, and the check that MXNet allows them;
- ``samples``: raw samples as host arrays;
- ``scratch``: per-thread scratch arrays, reused from sample to sample;
- ``shard_layout``: how each field of a batch splits across devices;
- ``shm``: fresh shared memory that fails safely (``SharedMemoryError``);
- ``threads``: OpenCV, BLAS and OpenMP on one thread in a DataLoader worker;
- ``tree``: walking nested batches;
- ``wording``: counts and type names in messages (``1 record``, ``an int``);
- ``write``: writing samples into their slots of a batch.
"""
