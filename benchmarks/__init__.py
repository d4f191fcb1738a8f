"""Benchmark gluonbatch against gluoncv and against "the floor"; ``make bench``.

The benchmarks live in the source tree, outside the ``gluonbatch`` package and its wheel:
they import gluoncv, pandas and Dask, which the package needs only as optional extras. Run
them from a checkout of the repository (its root is where ``benchmarks`` imports from).

How it measures
---------------
* **Contenders.** Every case times three callables on the same inputs: gluonbatch's
  batchify function, gluoncv's (``gluoncv.data.batchify``) and the *floor*. The floor is
  the least any batchify function returning a fresh ``cpu_shared`` NDArray must pay:
  creating that array and writing it once, ``mx.nd.array(src, ctx=cpu_shared(0))``, where
  ``src = np.ones(shape, dtype)`` is prepared outside the timed region (one array per
  output when a batch has several).
* **One timed call** is ``perf_counter`` around the call *and* ``wait_to_read()`` on every
  NDArray it returns (MXNet is asynchronous). The garbage collector is paused during the
  call; the result is dropped and ``mx.nd.waitall()`` lets MXNet finish freeing it before
  the next call starts, so no call pays for its predecessor's output.
* **Interleaved repeats.** One untimed warm-up call per contender (which also checks that
  gluonbatch and gluoncv return the same values), then ``rounds`` rounds; each round runs
  every contender once, in turn, starting from a different contender each round so no
  contender always runs right after the same one. ``gc.collect()`` runs between rounds.
  A contender's time is its median over rounds, so drifts in machine speed (turbo, other
  processes) hit all contenders alike. Every case times through this one loop,
  :func:`~benchmarks.harness.interleave`.
* **Host temporaries** (Stack cases) are measured in separate, untimed calls with
  ``tracemalloc``: peak traced memory during the call minus traced memory before it, as a
  percentage of the output's bytes. numpy reports its buffers to tracemalloc; the
  ``cpu_shared`` output is allocated by MXNet in C and is invisible to it, so the peak is
  exactly the host temporaries a call allocates through numpy/Python. Memory MXNet
  allocates internally (e.g. inside ``mx.nd.stack``) is not seen either.

* **The loader case** times whole epochs of the same ``mx.gluon.data.DataLoader`` (2 worker
  processes, detection-style samples) with each contender as its batchify function: one
  untimed warm-up epoch per contender, then ``rounds`` rounds of one epoch per contender,
  interleaved and rotated as above. A contender's time is its median milliseconds per
  batch (epoch time / batches), so ``gluoncv / gluonbatch`` is gluonbatch's batches/s over
  gluoncv's. Its floor is the same loader whose worker makes every batch as the floor
  above does, ``mx.nd.array(src, ctx=cpu_shared(0))`` per output of the batch's shape from
  a source prepared before the workers fork, and passes it back the same way.

* **The recycling cases** measure what recycled shared memory (:mod:`gluonbatch.memory`)
  buys in DataLoader workers. ``loader_recycled`` and ``rcnn_loader_recycled`` time epochs
  as the loader case does, 100 MB batches of ``Tuple(Stack(), Stack())`` and Faster R-CNN
  FPN batches (2 devices, samples transformed before the workers fork), with a fourth
  contender: the same gluonbatch loader whose workers were forked with recycling off.
  ``worker_batchify`` times, inside each of the 2 workers, gluonbatch's batchify writing into
  recycled memory, gluoncv's, the floor and a *warm copy* (the same samples copied into a
  buffer the worker has written before: what a batch costs once no page is fresh), through
  the same interleaved loop; the medians of the two workers' medians are reported.

* **The webdataset case** reads a sharded image-text dataset (``NNNNN.tar`` + ``.parquet``
  + ``.idx``, small JPEGs) with :class:`gluonbatch.curation.ImageTextPairDataset`. Its
  gluonbatch and gluoncv contenders are whole shuffled epochs of the same 2-worker
  DataLoader (random access, JPEG decode, then ``Tuple(Pad(axis=(0, 1)), List(), List())``
  of gluonbatch or gluoncv's ``Pad``); its floor is reading the same tar bytes front to back
  (1 MB reads). Times are per record. Raw record reads (no decode) in random order are
  compared with that sequential read per record (the goal: at most 2x), with the same reads
  in tar order and with a ``tarfile`` stream; resharding throughput with
  ``shutil.copyfile`` of the same tar bytes. Every file is in the page cache (just written).

* **The curation cases** have no gluoncv contender (gluoncv has no curation). Each times
  one Dask job on four schedulers: a ``distributed.LocalCluster`` of 2 single-threaded
  worker processes (the ``gluonbatch`` column), one of 1 worker, Dask's default threaded
  scheduler and its synchronous one (one process). The file system is synced before every
  timed run, untimed, and the share of the machine's CPU time that a virtual machine's
  host took meanwhile (``steal`` in ``/proc/stat``) is recorded and printed: timings taken
  under a large share vary with the host's other guests. ``curation_metadata``'s rounds,
  interleaved and rotated as above, run in two phases: the in-process schedulers and the
  floor first, with no cluster running (an idle LocalCluster's scheduler shares the
  benchmark's process and slows it), then the two clusters. ``curation_reshard`` runs all
  five contenders in the same rounds (7 by default), the clusters up and idle between their
  runs, each one-process run in a fresh process (after an untimed first run there on a
  dataset of a few batches), so all five are timed over the same minutes.
  ``curation_metadata`` adds a lazy filter column to 1,000,000 records of metadata in 100
  shards (parquet; each record's tar entry an empty member) and runs
  ``save_metadata``; its floor is pyarrow reading and writing each parquet file in one
  process. It also measures the driver's peak memory in fresh processes (resident memory
  after the imports against the peak while the pipeline runs), with the threaded
  scheduler, as the client of the 2-worker cluster, and for the eager way (one pandas
  DataFrame of all the metadata), beside one partition's size. ``curation_reshard`` runs
  ``to_webdataset`` on 100,000 records of small JPEGs in 10 shards, filtered on a lazy
  column; its floor is copying each shard file. Times are per run; records/s divide the
  records by them. Each process keeps the shard records it has read while the files keep
  their identity (path, size, inode, modification and change times), so before every
  timed round, untimed, each source ``.tar``, ``.idx`` and ``.parquet`` gets a new
  modification time and every round loads them as a first run does. Its goals: at least 60,000 records/s in
  one process (printed beside the copy floor's), 2 workers at least 1.7x and 1 worker at
  least 0.9x that. First reads are timed in fresh Python processes (``python -c``,
  ``gluonbatch.curation`` imported before the clock starts; medians over 5 processes;
  with ``--quick`` 1, a fork of a process that did the imports once; see
  ``benchmarks.cases_reshard.fresh_reads``): opening
  the dataset and reading a random record, at most 20 ms with the ``.idx`` files;
  without them at most 1.25x what ``scan_tar`` of that record's shard alone takes in the
  same process just before (so the page cache is as warm); and 200 reads at random
  positions after opening at most 3x the time per read of 200 consecutive ones from a
  random start (each in its own process, the shard loads they trigger included).

* **The seeded cases** (``benchmarks.cases_seeded``) measure what seeded loading
  costs. ``seeded_loader`` times epochs of the ``transforms_loader_ssd`` pipeline (SSD300,
  2 workers, batch 32) through gluonbatch's ``DetectionDataLoader`` and MXNet's DataLoader,
  each seeded and unseeded, in the same interleaved rounds, as CPU seconds of all the
  loader's processes per batch; a ratio is the median over rounds of the seeded epoch's
  time over the unseeded one's of the same round (goal: at most 1.02). The work seeding
  adds to a batch is also timed alone and reported as a percentage of an unseeded batch
  (goal: at most 2%), the precise measure where rounds vary by more than the goal.
  ``resume`` times ``load_state_dict`` and the first batch after it at the first and the
  last batch of a 10,000-sample epoch (goal: at most 1.1x), and ``state_dict()`` (goal:
  under 1 ms).

* **The shards case** (``benchmarks.cases_shards``) writes a VOC-like dataset of real
  500x375 JPEGs in gluoncv's layout, converts it to shards and times, in interleaved
  rounds, the SSD300 training loader (gluonbatch's preset and batch targets, 2 workers,
  batch 32) over :class:`~gluonbatch.detection.DetectionShards` in a
  :class:`~gluonbatch.samplers.ShardWindowSampler`'s order against the same loader over
  gluoncv's ``VOCDetection`` on the files (goal: at least as many images/s), decoding
  alone as the floor; every record read without decoding against copying the shard files
  (goal: at least half the copy's records/s); and opening a dataset of 1,000 shards and
  reading a record (goal: at most 1 s).

* **The JPEG cases** (``benchmarks.cases_jpeg``) time training from JPEG files written by
  the bench (VOC-like, 500x375): a 2-worker loader, batch 32, decode included:
  :class:`gluonbatch.DataLoader` over gluonbatch's JPEG path
  (:mod:`gluonbatch.detection.gluoncv_datasets`), gluoncv's pipeline on MXNet's
  DataLoader, and decoding alone as the floor; beside them the CPU per image of a
  1-worker :class:`gluonbatch.DataLoader` (every process) and of decoding alone, and for
  SSD300 the stages of the same work in one process. Goals: SSD300 at least 900 images/s
  and at most 2.0 ms of CPU per image. YOLOv3 and CenterNet report their numbers without a
  goal: theirs is relative to an earlier revision of gluonbatch, measured outside the bench.

The output is a report, not a test: goals are printed with PASS/MISS next to the measured
ratio, and the script exits 0 either way. ``--json PATH`` writes the results for plotting;
``--plot PATH`` draws them as a bar chart of the ratios to the floor
(:func:`~benchmarks.plot.plot_ratios`).

Usage, from the repository's root (``make bench`` runs the same)::

    python -m benchmarks [--repeats N] [--quick] [--seed S] [--only CASE] [--json PATH]
                         [--plot PATH]

The package: :mod:`~benchmarks.harness` (timing), :mod:`~benchmarks.rows` (a case's row:
contenders, floor, ratios, goals), the ``cases_*`` modules (the only ones that import
gluoncv), :mod:`~benchmarks.report` (tables, JSON), :mod:`~benchmarks.plot` (the chart) and
:mod:`~benchmarks.runner` (options and the run; ``__main__`` runs it), ``voc_like`` (the
VOC-like detection samples the cases time). Beside them,
:mod:`~benchmarks.script_losses` runs gluoncv's detection training scripts before and after
the swap to gluonbatch's batch-target batchify functions and compares their losses.
"""
