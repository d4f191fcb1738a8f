"""gluonbatch: fast shared-memory batchify functions for MXNet Gluon computer vision."""
import os
import re

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def read(name):
    with open(os.path.join(HERE, name), encoding='utf-8') as handle:
        return handle.read()


# gluonbatch.transforms does its pixel work in OpenCV.
TRANSFORMS = ['opencv-python']
# JPEGs decoded by libjpeg-turbo, MXNet's pixels at about 2.5x its speed (MXNet decodes
# without it).
JPEG = ['simplejpeg']
EXAMPLES = ['gluoncv==0.10.5.post0', 'pycocotools', 'Pillow', 'tqdm', 'matplotlib'] + \
    TRANSFORMS + JPEG
# gluonbatch.shards and gluonbatch.detection: the shards' parquet through pyarrow, WebP
# images decoded by Pillow, a conversion's progress drawn by tqdm.
SHARDS = ['pyarrow', 'Pillow', 'tqdm'] + JPEG
# gluonbatch.curation: the metadata through pandas as a lazy Dask DataFrame (run by Dask's
# schedulers, a distributed cluster included), JPEGs written with Pillow.
CURATION = ['pandas', 'dask[dataframe]', 'distributed'] + SHARDS

# Compiled at install: the constrained crop's trial loop (gluonbatch.transforms.crop_trials),
# OpenCV's float32 resizes read from uint8 (gluonbatch.transforms.canvas_resize), the
# colour pass into CHW planes (gluonbatch.transforms.pixels), OpenCV's bilinear warp of
# uint8 images (gluonbatch.transforms.affine) and the SSD matching
# (gluonbatch.targets.ssd). Each repeats Python's, OpenCV's or MXNet's arithmetic bit for
# bit: no fast math, and no fused multiply-add but the colour pass's explicit ones, where
# OpenCV's own loop has them. Without traps for floating point exceptions (which nothing
# here enables), loops of selects vectorize; the values are the same.
EXACT = ['-O3', '-ffp-contract=off', '-fno-fast-math', '-fno-trapping-math']
EXTENSIONS = [
    Extension('gluonbatch.transforms._trials', ['gluonbatch/transforms/_trials.c'],
              extra_compile_args=EXACT),
    Extension('gluonbatch.transforms._canvas_resize',
              ['gluonbatch/transforms/_canvas_%s.c' % part
               for part in ('resize', 'row', 'nearest', 'area', 'lanczos')],
              depends=['gluonbatch/transforms/_canvas.h', 'gluonbatch/_core/_wide_loop.h'],
              extra_compile_args=EXACT),
    Extension('gluonbatch.transforms._colour', ['gluonbatch/transforms/_colour.c'],
              extra_compile_args=EXACT),
    Extension('gluonbatch.transforms._warp', ['gluonbatch/transforms/_warp.c'],
              extra_compile_args=EXACT),
    Extension('gluonbatch.targets._ssd_match', ['gluonbatch/targets/_ssd_match.c'],
              depends=['gluonbatch/_core/_wide_loop.h'], extra_compile_args=EXACT),
]

setup(
    name='gluonbatch',
    version=re.search(r"__version__ = '([^']+)'", read('gluonbatch/__init__.py')).group(1),
    description='Batchify functions for MXNet Gluon that write batches once into shared memory',
    long_description=read('README.md'),
    long_description_content_type='text/markdown',
    packages=find_packages(include=['gluonbatch', 'gluonbatch.*']),
    ext_modules=EXTENSIONS,
    python_requires='>=3.11',
    # threadpoolctl: the BLAS and OpenMP thread pools limited to one thread in the workers.
    install_requires=['mxnet>=1.9.1,<2', 'numpy>=1.23,<1.24', 'threadpoolctl>=3.1'],
    extras_require={
        # The example loaders use gluoncv's networks, transforms and losses; its Mask R-CNN
        # transform rasterises polygons with pycocotools.
        'examples': EXAMPLES,
        'transforms': TRANSFORMS,
        'jpeg': JPEG,
        'shards': SHARDS,
        'curation': CURATION,
        # gluoncv is also the reference the tests and benchmarks compare against,
        # and the webdataset library reads the shards resharding writes, in the tests;
        # mypy checks the package's annotations (tests/test_types.py); pytest-xdist runs
        # the suite in several processes (the Makefile's JOBS).
        'test': EXAMPLES + CURATION + ['pytest', 'pytest-xdist', 'hypothesis', 'webdataset',
                                      'mypy'],
        # `make docs`: Sphinx with its built-in theme (alabaster) and napoleon; the figures
        # are drawn with matplotlib, the API pages import the example and curation modules.
        'docs': EXAMPLES + CURATION + ['sphinx'],
    },
    entry_points={'console_scripts': ['gluonbatch = gluonbatch.cli:main']},
    classifiers=[
        'Programming Language :: Python :: 3.11',
        'License :: OSI Approved :: Apache Software License',
        'Topic :: Scientific/Engineering :: Artificial Intelligence',
    ],
)
