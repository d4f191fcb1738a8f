"""Every Python snippet of the README and the docs pages runs as written: a page's blocks
(README's ```python fences, the pages' ``.. code-block:: python`` blocks and ``>>>``
examples) run in order in one namespace, in an empty working directory, as a reader
copying them into one interpreter would run them. ``>>>`` examples must print what they
show.

Two things are explicit here rather than on the pages. ``SCRIPT_NAMES``: a snippet that
shows lines of the reader's own training script (the migration's one-line changes) uses
that script's dataset, network or batch size; they are made here, small, before the
block. ``NOT_RUN``: the few blocks that cannot run on a test machine, each with its
reason. Pages that build detection networks run in the slow tier.
"""
import doctest
import glob
import os
import re
import textwrap

import mxnet as mx
import pytest

from gluonbatch import memory

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A few detection samples, as a gluoncv detection dataset gives them: (HWC uint8 image,
# boxes and classes).
_DETECTION_DATA = '''
import mxnet as mx
import numpy as np
_rng = np.random.RandomState(0)
dataset = train_dataset = mx.gluon.data.SimpleDataset([
    (mx.nd.array(_rng.randint(0, 256, (48 + 8 * i, 64, 3)), dtype='uint8'),
     np.array([[4, 4, 30, 30, i % 3, 0], [10, 8, 40, 36, (i + 1) % 3, 0]], 'float32'))
    for i in range(8)])
batch_size, num_workers, width, height, num_class = 4, 0, 300, 300, 3
'''

# The script's transform: images of one size, for Stack
_TRANSFORM = ('train_transform = lambda image, label: '
              '(mx.image.imresize(image, 64, 64).transpose((2, 0, 1)), label)\n')

# An SSD network's anchors, (1, N, 4) corners (a preset only keeps them until it is called)
_ANCHORS = ('anchors = mx.nd.array(np.random.RandomState(0).uniform(0, 1, (1, 64, 4)))\n'
            'anchors = mx.nd.concat(mx.nd.minimum(anchors[:, :, :2], anchors[:, :, 2:]), '
            'mx.nd.maximum(anchors[:, :, :2], anchors[:, :, 2:]), dim=2)\n')

# A gluoncv training script's options and its network and trainer, small
_SCRIPT_ARGS = ('import argparse\n'
                "args = argparse.Namespace(seed=233, save_prefix='yolo3', resume='', "
                'start_epoch=0, epochs=2, save_steps=2)\n')
_NET_AND_TRAINER = ('from mxnet import gluon\n'
                    'net = gluon.nn.Dense(2, in_units=4)\n'
                    'net.initialize()\n'
                    "trainer = gluon.Trainer(net.collect_params(), 'sgd', "
                    "{'learning_rate': 0.1})\n")
# The training loaders of the script: gluonbatch's seeded RandomTransformDataLoader, and
# MXNet's DataLoader over a SeededDataset with its SeededBatchSampler
_SEEDED_LOADERS = '''
from gluonbatch.batchify import Tuple, Stack, Pad
from gluonbatch.dataloader import RandomTransformDataLoader
from gluonbatch.samplers import SeededBatchSampler
from gluonbatch.seeded import SeededDataset
batchify_fn = Tuple(Stack(), Pad(pad_val=-1))
resized = [lambda image, label, size=size: (
    mx.image.imresize(image, size, size).transpose((2, 0, 1)), label) for size in (32, 64)]
train_data = RandomTransformDataLoader(resized, dataset, batch_size=batch_size, shuffle=True,
                                       batchify_fn=batchify_fn, seed=args.seed)
'''
_SEEDED_MXNET_LOADER = '''
train_sampler = SeededBatchSampler(len(dataset), batch_size, seed=args.seed)
train_data = mx.gluon.data.DataLoader(SeededDataset(dataset.transform(resized[0])),
                                      batch_sampler=train_sampler, batchify_fn=batchify_fn)
'''

# A train preset and one sample of the reader's own
_PRESET_SAMPLE = ('import numpy as np\n'
                  'from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform\n'
                  'preset = SSDDefaultTrainTransform(96, 64)\n'
                  'image = np.full((60, 80, 3), 128, np.uint8)\n'
                  'label = np.array([[10., 10., 50., 40., 1.]])\n')

#: (page, text of the block) -> the code that makes the names the block takes from the
#: reader's own script
SCRIPT_NAMES = {
    ('README.md', 'dataset.transform(train_transform)'):
        _DETECTION_DATA + _TRANSFORM,
    ('docs/migration.rst', 'dataset.transform(train_transform)'):
        _DETECTION_DATA + _TRANSFORM + _SCRIPT_ARGS,
    ('README.md', 'SSDDefaultTrainTransform(300, 300, anchors)'): _ANCHORS,
    ('docs/transforms.rst', 'SSDDefaultTrainTransform(300, 300, anchors)'):
        _DETECTION_DATA + _ANCHORS,
    ('docs/transforms.rst', 'SSDDefaultTrainTransform(300, 300, deferred=True)'):
        _ANCHORS,
    ('docs/transforms.rst', 'preset.draw(image.shape, label, generators)'): _PRESET_SAMPLE,
    ('docs/batch_targets.rst', 'SSDTrainBatchify(anchors)'):
        _DETECTION_DATA + "net = zoo_net('ssd_300_vgg16_atrous_voc')\n",
    ('docs/batch_targets.rst', 'YOLO3TrainBatchify(net'):
        "net, mixup = zoo_net('yolo3_darknet53_voc'), False\n",
    ('docs/batch_targets.rst', 'NormalizedStack(mean, std)'):
        'mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)\n',
    ('docs/migration.rst', 'SSDTrainBatchify(anchors)'):
        "anchors = zoo_ssd_anchors('ssd_300_vgg16_atrous_voc', 300, 300)\n",
    ('docs/migration.rst', 'YOLO3TrainBatchify(net'):
        "import argparse\nargs = argparse.Namespace(mixup=False)\n"
        "net = zoo_net('yolo3_darknet53_voc')\n",
    ('docs/migration.rst', 'CenterNetTrainBatchify(num_class'):
        "net = zoo_net('center_net_resnet18_v1b_voc')\n",
    ('docs/migration.rst', 'DeviceLoader(loader, ctx_list)'):
        'ctx_list = [mx.cpu(0), mx.cpu(1)]\n',
    ('docs/reproducible.rst', '# train_ssd.py, get_dataloader'):
        _DETECTION_DATA + _TRANSFORM + _SCRIPT_ARGS
        + 'from mxnet import gluon\nbatchify_fn = Tuple(Stack(), Pad(pad_val=-1))\n',
    ('docs/reproducible.rst', '# train_yolo3.py, get_dataloader'):
        _DETECTION_DATA + _SCRIPT_ARGS + 'batchify_fn = Tuple(Stack(), Pad(pad_val=-1))\n'
        'from gluonbatch.transforms.presets.yolo import YOLO3DefaultTrainTransform\n'
        'transform_fns = [YOLO3DefaultTrainTransform(x * 32, x * 32) for x in (2, 3)]\n',
    ('docs/reproducible.rst', '# train_faster_rcnn.py, get_dataloader'):
        _DETECTION_DATA + _TRANSFORM + _SCRIPT_ARGS
        + 'from mxnet import gluon\nbatchify_fn = Tuple(Stack(), Pad(pad_val=-1))\n'
        'train_dataset.get_im_aspect_ratio = lambda: [64 / (48 + 8 * i) for i in range(8)]\n'
        'num_parts, part_index = 1, 0\n',
    ('docs/reproducible.rst', 'train_data.load_state_dict(loader_state)'):
        _DETECTION_DATA + _SCRIPT_ARGS + _NET_AND_TRAINER + _SEEDED_LOADERS,
    ('docs/reproducible.rst', 'train_sampler.load_state_dict(sampler_state)'):
        _SEEDED_MXNET_LOADER,
}

#: (page, text of the block) -> why it is not run
NOT_RUN = {
    ('README.md', 'ctx_list = [mx.gpu(i) for i in range(4)]'): 'needs four GPUs',
    ('docs/scaling.rst', 'ctx_list = [mx.gpu(i) for i in range(4)]'): 'needs four GPUs',
    ('docs/curation.rst', "Client('scheduler-address:8786')"):
        'needs a Dask scheduler at that address',
}

#: pages whose snippets build detection networks: the slow tier
SLOW_PAGES = {'docs/batch_targets.rst', 'docs/migration.rst'}


def markdown_blocks(text):
    """``(line, code)`` of every ```python fence of a Markdown page."""
    for match in re.finditer(r'^```python\n(.*?)^```', text, re.M | re.S):
        yield text[:match.start()].count('\n') + 1, match.group(1)


def rst_blocks(text):
    """``(line, code)`` of every ``.. code-block:: python`` block and every ``>>>``
    paragraph (a doctest block) of a reStructuredText page, in page order."""
    lines = text.split('\n')
    number = 0
    while number < len(lines):
        line = lines[number]
        if re.match(r'^\s*\.\. code-block:: python\s*$', line):
            indent = len(line) - len(line.lstrip())
            body, number = [], number + 1
            while number < len(lines) and (not lines[number].strip() or (
                    len(lines[number]) - len(lines[number].lstrip()) > indent)):
                body.append(lines[number])
                number += 1
            yield number - len(body), textwrap.dedent('\n'.join(body)).strip('\n') + '\n'
        elif line.lstrip().startswith('>>>'):
            start, body = number, []
            while number < len(lines) and lines[number].strip():
                body.append(lines[number])
                number += 1
            yield start + 1, textwrap.dedent('\n'.join(body)) + '\n'
        else:
            number += 1


def page_blocks(page):
    with open(os.path.join(ROOT, page), encoding='utf-8') as handle:
        text = handle.read()
    return list(markdown_blocks(text) if page.endswith('.md') else rst_blocks(text))


def _keyed(table, page, code):
    found = [value for (where, marker), value in table.items()
             if where == page and marker in code]
    assert len(found) <= 1, 'more than one entry matches a block of %s' % page
    return found[0] if found else None


PAGES = ['README.md'] + sorted(os.path.relpath(path, ROOT)
                               for path in glob.glob(os.path.join(ROOT, 'docs', '*.rst')))


def _run_page(page, namespace):
    """Run the blocks of ``page`` in ``namespace``; returns how many ran."""
    ran = 0
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS)
    for line, code in page_blocks(page):
        if _keyed(NOT_RUN, page, code):
            continue
        given = _keyed(SCRIPT_NAMES, page, code)
        if given:
            exec(compile(given, '<names of the script, %s:%d>' % (page, line), 'exec'),
                 namespace)
        where = '%s:%d' % (page, line)
        if code.lstrip().startswith('>>>'):
            test = parser.get_doctest(code, namespace, where, page, line)
            runner.run(test, clear_globs=False)
            assert not runner.failures, 'the >>> example at %s differs (see above)' % where
        else:
            try:
                exec(compile(code, where, 'exec'), namespace)
            except Exception as err:
                err.add_note('in the snippet at %s' % where)
                raise
        ran += 1
    return ran


@pytest.fixture
def page_namespace(tmp_path, monkeypatch, request):
    """An empty working directory and a fresh namespace; MXNet's numpy mode and
    gluonbatch's memory setting are back to what they were afterwards."""
    monkeypatch.chdir(tmp_path)
    setting = memory.get_memory()
    namespace = {'__name__': '__docs__'}
    if request.node.get_closest_marker('slow'):
        namespace['zoo_net'] = request.getfixturevalue('zoo_net')
        namespace['zoo_ssd_anchors'] = request.getfixturevalue('zoo_ssd_anchors')
    try:
        yield namespace
    finally:
        mx.npx.reset_np()
        memory.set_memory(setting)
        namespace.clear()  # loaders' worker pools end with them


@pytest.mark.parametrize('page', [page for page in PAGES if page not in SLOW_PAGES])
def test_snippets_of_a_page_run_as_written(page, page_namespace):
    blocks = page_blocks(page)
    skipped = sum(bool(_keyed(NOT_RUN, page, code)) for _, code in blocks)
    assert _run_page(page, page_namespace) == len(blocks) - skipped


@pytest.mark.slow  # the pages that build detection networks
@pytest.mark.parametrize('page', sorted(SLOW_PAGES))
def test_snippets_of_a_network_page_run_as_written(page, page_namespace):
    assert _run_page(page, page_namespace) == len(page_blocks(page))


def test_the_lists_name_real_blocks():
    """Every entry of NOT_RUN and SCRIPT_NAMES matches a block of its page, and every page
    has at least one block that runs."""
    for table in (NOT_RUN, SCRIPT_NAMES):
        for page, marker in table:
            assert any(marker in code for _, code in page_blocks(page)), (page, marker)
    extracted = {page: page_blocks(page) for page in PAGES}
    assert len(extracted['README.md']) >= 5 and len(extracted['docs/curation.rst']) >= 3
    assert all(code.strip() for blocks in extracted.values() for _, code in blocks)
