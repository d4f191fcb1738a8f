"""Every public import path works: each public module imports and has every name of its
``__all__``, and the paths that moved still import, warn with a ``DeprecationWarning``
naming the new home and give the very same objects.

``PUBLIC`` is the public API as it stood before the package was rearranged: every public
module (those whose path has no ``_`` part) and the names of its ``__all__``, but the
benchmarks (``gluonbatch.bench``, ``gluonbatch.benchmark`` and the ``gluonbatch bench``
command, ``gluonbatch.cli.bench``), which left the installed package for the source tree's
``benchmarks``. A path in ``MOVED`` is an alias of its new home.
"""
import importlib
import json
import subprocess
import sys
import textwrap
import warnings

import pytest

PUBLIC = {
    'gluonbatch': ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
        'NormalizedStack', 'SSDTrainBatchify', 'YOLO3TrainBatchify', 'CenterNetTrainBatchify',
        'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify', 'Collate', 'default_collate',
        'dataloader', 'set_memory', 'get_memory', 'use_memory', 'SharedMemoryError',
        'BatchifyUsageError', '__version__'],
    'gluonbatch.batchify': ['Stack', 'Pad', 'Append', 'Tuple', 'List', 'Dict', 'NamedTuple',
        'ms_batchify_fn', 'dict_batchify_fn', 'FasterRCNNTrainBatchify',
        'MaskRCNNTrainBatchify', 'NormalizedStack', 'SSDTrainBatchify', 'YOLO3TrainBatchify',
        'CenterNetTrainBatchify'],
    'gluonbatch.batchify.arrays': ['Stack', 'Pad', 'Append'],
    'gluonbatch.batchify.detection': ['SSDTrainBatchify', 'YOLO3TrainBatchify',
        'CenterNetTrainBatchify'],
    'gluonbatch.batchify.fields': ['Tuple', 'List', 'Dict', 'NamedTuple'],
    'gluonbatch.batchify.gluoncv_fns': ['ms_batchify_fn', 'dict_batchify_fn'],
    'gluonbatch.batchify.images': ['NormalizedStack', 'IMAGENET_MEAN', 'IMAGENET_STD'],
    'gluonbatch.cli': ['main', 'build_parser'],
    'gluonbatch.cli.curate': ['add_actions', 'dask_options', 'computing_on', 'write_kept'],
    'gluonbatch.cli.demo': ['add_parser', 'run'],
    'gluonbatch.cli.show': ['add_parser', 'run'],
    'gluonbatch.cli.wds': ['add_parser', 'run'],
    'gluonbatch.collate': ['Collate', 'default_collate'],
    'gluonbatch.dataloader': ['default_batchify_fn', 'default_mp_batchify_fn',
        'default_pad_batchify_fn', 'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn',
        'DetectionDataLoader', 'RandomTransformDataLoader', 'split_to_devices',
        'ShardedLoader', 'SplitSampler'],
    'gluonbatch.examples': [],
    'gluonbatch.examples.center_net': [],
    'gluonbatch.examples.picture': ['draw_detection_batch'],
    'gluonbatch.examples.rcnn': [],
    'gluonbatch.examples.runner': ['loader_parser', 'detection_dataset', 'time_loader',
        'describe_batch', 'print_summary', 'compare_with_gluoncv', 'run_example'],
    'gluonbatch.examples.show': ['LOADERS', 'show_batch'],
    'gluonbatch.examples.ssd': [],
    'gluonbatch.examples.synthetic': ['SyntheticDetection', 'CLASSES'],
    'gluonbatch.examples.yolo': [],
    'gluonbatch.memory': ['MODES', 'SharedMemoryError', 'set_memory', 'get_memory',
        'use_memory', 'use_shared_memory', 'set_recycling', 'get_recycling', 'use_recycling',
        'recycling_unavailable', 'recycling_stats'],
    'gluonbatch.rcnn': ['FeatureShapes', 'FasterRCNNTrainBatchify', 'MaskRCNNTrainBatchify'],
    'gluonbatch.sampler': ['SplitSampler'],
    'gluonbatch.sharding': ['split_to_devices', 'ShardedLoader'],
    'gluonbatch.transforms': ['presets'],
    'gluonbatch.transforms.affine': ['get_border', 'get_affine_transform', 'warp_image',
        'warp_boxes'],
    'gluonbatch.transforms.boxes': ['translate', 'crop', 'resize', 'flip'],
    'gluonbatch.transforms.color': ['GRAY', 'identity', 'brightness', 'contrast', 'saturation',
        'hue', 'compose', 'invert', 'apply', 'normalize', 'distort'],
    'gluonbatch.transforms.draws': ['ColorDistort', 'Expand', 'Crop', 'SSDDraw',
        'CROP_CONSTRAINTS', 'draw_color_distort', 'draw_expand', 'draw_crop', 'draw_interp',
        'draw_flip', 'draw_ssd'],
    'gluonbatch.transforms.inputs': ['as_numpy', 'image_array', 'label_array',
        'channel_values'],
    'gluonbatch.transforms.jitter': ['GRAY_WEIGHTS', 'EIG_VAL', 'EIG_VEC', 'JitterParams',
        'draw_jitter', 'jitter_matrix', 'color_matrix', 'gray_mean'],
    'gluonbatch.transforms.pixels': ['INTERPOLATIONS', 'BILINEAR', 'AREA', 'val_interp',
        'window_overlap', 'canvas_window', 'fill_shift', 'resize', 'resize_window',
        'affine_chw', 'affine_hwc', 'normalize_lut', 'lut_chw', 'Normalizer'],
    'gluonbatch.transforms.polygons': ['check', 'resize', 'flip', 'to_masks'],
    'gluonbatch.transforms.presets': [],
    'gluonbatch.transforms.presets.center_net': ['CenterNetDraw',
        'CenterNetDefaultTrainTransform', 'CenterNetDefaultValTransform',
        'get_post_transform'],
    'gluonbatch.transforms.presets.rcnn': ['RCNNDraw', 'resize_short_within_size',
        'FasterRCNNDefaultTrainTransform', 'FasterRCNNDefaultValTransform',
        'MaskRCNNDefaultTrainTransform', 'MaskRCNNDefaultValTransform'],
    'gluonbatch.transforms.presets.ssd': ['SSDAugmentation', 'SSDDefaultTrainTransform',
        'SSDDefaultValTransform'],
    'gluonbatch.transforms.presets.yolo': ['YOLO3DefaultTrainTransform',
        'YOLO3DefaultValTransform'],
    'gluonbatch.transforms.scratch': ['MAX_BYTES', 'MAX_BUFFERS', 'empty', 'zeros'],
    'gluonbatch.transforms.targets': [],
    'gluonbatch.transforms.targets.center_net': ['CenterNetTargetGenerator',
        'center_net_targets', 'target_shapes', 'output_grid', 'check_scale_factor',
        'gaussian_radius', 'gaussian_patch', 'BoxOutsideGrid', 'ClassOutOfRange'],
    'gluonbatch.transforms.targets.errors': ['BoxOutsideGrid', 'ClassOutOfRange',
        'CellOutOfRange'],
    'gluonbatch.transforms.targets.iou': ['box_iou', 'box_areas', 'AnchorSet'],
    'gluonbatch.transforms.targets.labels': ['LabelBatch', 'label_batch'],
    'gluonbatch.transforms.targets.rpn': ['RPNTargetGenerator'],
    'gluonbatch.transforms.targets.rpn_anchors': ['AnchorLayout', 'RPNAnchors'],
    'gluonbatch.transforms.targets.ssd': ['SSDTargets', 'box_iou', 'ssd_match'],
    'gluonbatch.transforms.targets.yolo': ['YOLO3Targets', 'YOLO3Layout'],
    'gluonbatch.webdataset': ['ImageTextPairDataset', 'write_index', 'make_example_dataset',
        'IMAGE_EXTENSIONS', 'INDEX_VERSION', 'ImageEmbedder', 'GluonImageEmbedder',
        'ExportedImageEmbedder', 'ImageClassifier', 'EmbeddingClassifier',
        'ExportedEmbeddingClassifier'],
    'gluonbatch.webdataset.commit': ['staging', 'Stage', 'recover', 'reading', 'FORWARD',
        'BACK'],
    'gluonbatch.webdataset.copier': ['RecordCopier'],
    'gluonbatch.webdataset.dataset': ['ImageTextPairDataset'],
    'gluonbatch.webdataset.decode': ['decode_image', 'decode_record'],
    'gluonbatch.webdataset.example': [],
    'gluonbatch.webdataset.index': ['INDEX_VERSION', 'write_index', 'read_index',
        'parse_index_line', 'group_members', 'format_index'],
    'gluonbatch.webdataset.json_ids': ['with_json_ids', 'JsonIds'],
    'gluonbatch.webdataset.metadata': ['count_records', 'lazy_metadata', 'pandas_dtypes'],
    'gluonbatch.webdataset.parquet': ['open_parquet', 'read_parquet', 'reads_as_str',
        'parquet_id_rows', 'sorted_ids'],
    'gluonbatch.webdataset.reader': ['RecordReader', 'shard_records', 'header_mismatch',
        'LOOKUPS_PER_SHARD'],
    'gluonbatch.webdataset.record_arrays': ['MemberArrays', 'byte_matrix', 'bytes_rows',
        'as_strings', 'unicode_rows', 'index_members', 'scanned_members'],
    'gluonbatch.webdataset.record_lookup': ['IndexLookup'],
    'gluonbatch.webdataset.records': [],
    'gluonbatch.webdataset.reshard': ['reshard'],
    'gluonbatch.webdataset.shards': [],
    'gluonbatch.webdataset.stages': ['ImageEmbedder', 'GluonImageEmbedder',
        'ExportedImageEmbedder', 'ImageClassifier', 'EmbeddingClassifier',
        'ExportedEmbeddingClassifier'],
    'gluonbatch.webdataset.tar': ['BLOCK', 'padded', 'split_member_name', 'scan_tar',
        'check_headers', 'member_header'],
    'gluonbatch.webdataset.ustar': ['NAME_BYTES', 'HeaderBlocks', 'name_fields',
        'plain_headers_match', 'ranges_to_indices'],
    'gluonbatch.webdataset.writer': [],
}

#: Old import path -> the module it moved to.
MOVED = {
    'gluonbatch.rcnn': 'gluonbatch.batchify.rcnn',
    'gluonbatch.transforms.targets': 'gluonbatch.targets',
    **{'gluonbatch.transforms.targets.' + name: 'gluonbatch.targets.' + name
       for name in ('center_net', 'errors', 'iou', 'labels', 'rpn', 'rpn_anchors', 'ssd',
                    'yolo')},
    'gluonbatch.transforms.inputs': 'gluonbatch._core.inputs',
    'gluonbatch.transforms.scratch': 'gluonbatch._core.scratch',
}

#: (old module, name) -> the module a single name moved to.
MOVED_NAMES = {('gluonbatch.transforms.pixels', name): 'gluonbatch.transforms.windows'
               for name in ('window_overlap', 'covers', 'canvas_window', 'fill_shift',
                            'resize_window')}


def _import_quietly(module):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', DeprecationWarning)
        return importlib.import_module(module)


@pytest.mark.parametrize('module', sorted(PUBLIC))
def test_every_public_module_imports_with_its_names(module):
    imported = _import_quietly(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert not missing, '%s lacks %s' % (module, missing)
    kept = {name for name in PUBLIC[module] if (module, name) not in MOVED_NAMES}
    assert kept <= set(getattr(imported, '__all__', ())), module


@pytest.mark.parametrize('module, name', sorted(MOVED_NAMES))
def test_a_moved_name_gives_the_object_of_its_new_home_with_a_warning(module, name):
    new = MOVED_NAMES[module, name]
    with pytest.warns(DeprecationWarning, match='moved to %s' % new):
        old = getattr(importlib.import_module(module), name)
    assert old is getattr(importlib.import_module(new), name)
    assert name in importlib.import_module(new).__all__


@pytest.mark.parametrize('old', sorted(MOVED))
def test_a_moved_path_gives_the_objects_of_its_new_home(old):
    module, new = _import_quietly(old), importlib.import_module(MOVED[old])
    names = PUBLIC[old] or [name for name in vars(new) if not name.startswith('_')]
    assert names
    assert all(getattr(module, name) is getattr(new, name) for name in names), old


# In a fresh interpreter (an imported module is not imported again): the current paths
# import without a deprecation warning and without loading an old path; then each old path,
# imported afresh, warns once, naming its new home.
DEPRECATIONS = textwrap.dedent('''
    import importlib, json, sys, warnings
    moved, current = json.loads(sys.argv[1]), json.loads(sys.argv[2])

    def deprecations(caught):
        return [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)
                and 'gluonbatch' in str(w.message)]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for module in current:
            importlib.import_module(module)
        import gluonbatch
        gluonbatch.FasterRCNNTrainBatchify, gluonbatch.batchify.FasterRCNNTrainBatchify
    report = {'current': deprecations(caught), 'loaded': sorted(set(moved) & set(sys.modules))}
    for old in moved:
        for name in moved:
            sys.modules.pop(name, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            importlib.import_module(old)
        report[old] = deprecations(caught)
    print(json.dumps(report))
''')


def test_old_paths_warn_naming_their_new_home_and_current_ones_do_not():
    current = sorted(set(PUBLIC) - set(MOVED))
    result = subprocess.run([sys.executable, '-c', DEPRECATIONS, json.dumps(MOVED),
                             json.dumps(current)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report.pop('current') == [] and report.pop('loaded') == []
    for old, new in MOVED.items():
        assert len(report[old]) == 1, (old, report[old])
        # the warning names the module or its package, if the whole package moved
        warned = report[old][0]
        package = warned.split(' is deprecated: ')[0]
        assert old == package or old.startswith(package + '.'), (old, warned)
        assert 'moved to %s,' % MOVED[package] in warned, (old, warned)
        assert new == MOVED[package] + old[len(package):]


NO_OPENCV = textwrap.dedent('''
    import sys
    sys.modules['cv2'] = None  # import cv2 fails, as without OpenCV
    import gluonbatch, gluonbatch.batchify, gluonbatch.dataloader, gluonbatch.targets
    import gluonbatch.memory, gluonbatch.collate, gluonbatch.sharding
    print(gluonbatch.SSDTrainBatchify.__name__)
    try:
        import gluonbatch.transforms
    except ImportError as err:
        print('transforms:', err)
''')


def test_the_batchify_functions_and_targets_need_no_opencv():
    """Only the presets (``gluonbatch.transforms``) need OpenCV, an optional extra."""
    result = subprocess.run([sys.executable, '-c', NO_OPENCV], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-2:] == [
        'SSDTrainBatchify', "transforms: import of cv2 halted; None in sys.modules"]
