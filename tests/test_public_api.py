"""Every public import path works: each public module imports and has every name of its
``__all__``, and no module of the package warns with a ``DeprecationWarning`` when imported.

``PUBLIC`` is the public API: every public module (those whose path has no ``_`` part) and
the names of its ``__all__``.
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
    'gluonbatch.cli.info': ['add_parser', 'run', 'part_version', 'report', 'OPTIONAL_PARTS'],
    'gluonbatch.cli.show': ['add_parser', 'run'],
    'gluonbatch.cli.wds': ['add_parser', 'run'],
    'gluonbatch.collate': ['Collate', 'default_collate'],
    'gluonbatch.dataloader': ['default_batchify_fn', 'default_mp_batchify_fn',
        'default_pad_batchify_fn', 'default_mp_pad_batchify_fn', 'tsn_mp_batchify_fn',
        'DetectionDataLoader', 'RandomTransformDataLoader'],
    'gluonbatch.examples': [],
    'gluonbatch.examples.center_net': ['TRAIN_FIELDS', 'VAL_FIELDS', 'DEFAULT_NETWORK',
        'gluoncv_batchify', 'target_boxes', 'build', 'train_steps', 'main'],
    'gluonbatch.examples.picture': ['draw_detection_batch'],
    'gluonbatch.examples.rcnn': ['TRAIN_FIELDS', 'VAL_FIELDS', 'DEFAULT_NETWORKS',
        'aspect_ratios', 'build', 'train_steps', 'main', 'main_faster', 'main_mask'],
    'gluonbatch.examples.runner': ['loader_parser', 'detection_dataset', 'time_loader',
        'describe_batch', 'print_summary', 'compare_with_gluoncv', 'run_example'],
    'gluonbatch.examples.show': ['LOADERS', 'show_batch'],
    'gluonbatch.examples.ssd': ['TRAIN_FIELDS', 'VAL_FIELDS', 'build', 'train_steps', 'main'],
    'gluonbatch.examples.synthetic': ['SyntheticDetection', 'CLASSES'],
    'gluonbatch.examples.yolo': ['TRAIN_FIELDS', 'VAL_FIELDS', 'gluoncv_batchify', 'build',
        'train_steps', 'main'],
    'gluonbatch.memory': ['MODES', 'SharedMemoryError', 'set_memory', 'get_memory',
        'use_memory', 'use_shared_memory', 'set_recycling', 'get_recycling', 'use_recycling',
        'recycling_unavailable', 'recycling_stats'],
    'gluonbatch.samplers.split': ['SplitSampler'],
    'gluonbatch.devices': ['split_to_devices', 'DeviceLoader'],
    'gluonbatch.transforms': ['presets'],
    'gluonbatch.transforms.affine': ['COMPILED_WARP', 'get_border', 'get_affine_transform',
        'warp_image', 'warp_boxes'],
    'gluonbatch.transforms.boxes': ['translate', 'crop', 'resize', 'flip'],
    'gluonbatch.transforms.color': ['GRAY', 'identity', 'brightness', 'contrast', 'saturation',
        'hue', 'compose', 'invert', 'apply', 'normalize', 'distort'],
    'gluonbatch.transforms.crops': ['crop_overlap', 'covers', 'canvas_crop', 'fill_shift',
        'resize_crop'],
    'gluonbatch.transforms.draws': ['ColorDistort', 'Expand', 'Crop', 'SSDDraw',
        'CROP_CONSTRAINTS', 'draw_color_distort', 'draw_expand', 'draw_crop', 'draw_interp',
        'draw_flip', 'draw_ssd'],
    'gluonbatch.transforms.evaluation': ['BICUBIC', 'MXNET_DTYPES', 'resize_short_within_size',
        'transform_images', 'load_images'],
    'gluonbatch.transforms.jitter': ['GRAY_WEIGHTS', 'EIG_VAL', 'EIG_VEC', 'JitterParams',
        'draw_jitter', 'jitter_matrix', 'color_matrix', 'gray_mean'],
    'gluonbatch.transforms.pixels': ['INTERPOLATIONS', 'BILINEAR', 'AREA', 'val_interp',
        'resize', 'affine_chw', 'affine_hwc', 'normalize_lut', 'lut_chw', 'Normalizer'],
    'gluonbatch.transforms.polygons': ['check', 'resize', 'flip', 'to_masks'],
    'gluonbatch.transforms.presets': ['Preset', 'Generators', 'global_generators'],
    'gluonbatch.transforms.presets.protocol': ['Preset', 'Draw', 'Generators',
        'global_generators'],
    'gluonbatch.transforms.presets.center_net': ['CenterNetDraw',
        'CenterNetDefaultTrainTransform', 'CenterNetDefaultValTransform',
        'get_post_transform'],
    'gluonbatch.transforms.presets.rcnn': ['RCNNDraw', 'resize_short_within_size',
        'FasterRCNNDefaultTrainTransform', 'FasterRCNNDefaultValTransform',
        'MaskRCNNDefaultTrainTransform', 'MaskRCNNDefaultValTransform'],
    'gluonbatch.transforms.presets.rcnn_eval': ['FasterRCNNDefaultValTransform',
        'MaskRCNNDefaultValTransform', 'transform_test', 'load_test'],
    'gluonbatch.transforms.presets.ssd': ['SSDAugmentation', 'SSDDefaultTrainTransform',
        'SSDDefaultValTransform'],
    'gluonbatch.transforms.presets.yolo': ['YOLO3DefaultTrainTransform',
        'YOLO3DefaultValTransform'],
    'gluonbatch.shards': ['ShardDataset', 'write_index', 'INDEX_VERSION', 'IMAGE_EXTENSIONS',
        'verify', 'Problem', 'Report'],
    'gluonbatch.curation': ['ImageTextPairDataset', 'make_example_dataset', 'ImageEmbedder',
        'GluonImageEmbedder', 'ExportedImageEmbedder', 'ImageClassifier',
        'EmbeddingClassifier', 'ExportedEmbeddingClassifier'],
    'gluonbatch.detection': ['from_voc', 'from_coco', 'DetectionShards', 'make_voc_example',
        'make_coco_example', 'VOCDetection', 'COCODetection', 'COCOInstance'],
    'gluonbatch.samplers': ['SplitSampler', 'RankSampler', 'rank_positions',
        'SeededBatchSampler', 'SeededBucketSampler', 'KeyBatch', 'ShardWindowSampler'],
    'gluonbatch.samplers.ranks': ['LAST_PARTS', 'rank_length', 'rank_positions',
        'RankSampler'],
    'gluonbatch.seeded': ['SeededDataset', 'SampleKey'],
    'gluonbatch.curation.metadata_writer': ['save_metadata', 'write_parquet', 'arrow_table'],
    'gluonbatch.shards.writer': ['ShardWriter', 'commit_shards'],
    'gluonbatch.shards.commit': ['staging', 'Stage', 'recover', 'reading', 'FORWARD',
        'BACK'],
    'gluonbatch.shards.copier': ['RecordCopier'],
    'gluonbatch.curation.image_text': ['ImageTextPairDataset'],
    'gluonbatch.shards.decode': ['decode_image', 'decode_record'],
    'gluonbatch.curation.example': ['make_example_dataset'],
    'gluonbatch.shards.index': ['INDEX_VERSION', 'write_index', 'read_index',
        'parse_index_line', 'group_members', 'format_index'],
    'gluonbatch.shards.json_ids': ['with_json_ids', 'JsonIds'],
    'gluonbatch.curation.metadata': ['count_records', 'read_parquet', 'lazy_metadata',
        'pandas_dtypes'],
    'gluonbatch.shards.parquet': ['open_parquet', 'read_table', 'reads_as_str',
        'parquet_id_rows', 'sorted_ids'],
    'gluonbatch.shards.reader': ['RecordReader', 'shard_records', 'header_mismatch',
        'LOOKUPS_PER_SHARD'],
    'gluonbatch.shards.record_arrays': ['MemberArrays', 'byte_matrix', 'bytes_rows',
        'as_strings', 'unicode_rows', 'index_members', 'scanned_members'],
    'gluonbatch.shards.record_lookup': ['IndexLookup'],
    'gluonbatch.shards.records': ['IMAGE_EXTENSIONS', 'Fields', 'RecordTable', 'ShardRecords',
        'exact_fields', 'vectorized_fields', 'record_slots', 'header_starts', 'record_spans'],
    'gluonbatch.curation.reshard': ['reshard'],
    'gluonbatch.shards.files': ['SHARD_FILE', 'Shard', 'find_shards', 'shard_files',
        'stem_order', 'examples', 'temporary_name', 'replacing', 'remove_quietly'],
    'gluonbatch.curation.stages': ['ImageEmbedder', 'GluonImageEmbedder',
        'ExportedImageEmbedder', 'ImageClassifier', 'EmbeddingClassifier',
        'ExportedEmbeddingClassifier'],
    'gluonbatch.shards.tar': ['BLOCK', 'padded', 'split_member_name', 'scan_tar',
        'check_headers', 'member_header'],
    'gluonbatch.shards.ustar': ['NAME_BYTES', 'HeaderBlocks', 'name_fields',
        'plain_headers_match', 'ranges_to_indices'],
}

def _import_quietly(module):
    return importlib.import_module(module)


@pytest.mark.parametrize('module', sorted(PUBLIC))
def test_every_public_module_imports_with_its_names(module):
    imported = _import_quietly(module)
    missing = [name for name in PUBLIC[module] if not hasattr(imported, name)]
    assert not missing, '%s lacks %s' % (module, missing)
    assert set(PUBLIC[module]) <= set(getattr(imported, '__all__', ())), module


#: Modules renamed without an alias: nothing answers at the old path.
RENAMED = {'gluonbatch.transforms.windows': 'gluonbatch.transforms.crops',
           'gluonbatch.transforms.inference': 'gluonbatch.transforms.evaluation',
           'gluonbatch._core.inference': 'gluonbatch._core.shape_inference'}


@pytest.mark.parametrize('old', sorted(RENAMED))
def test_a_renamed_module_is_gone_from_its_old_path(old):
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)
    assert importlib.import_module(RENAMED[old]).__name__ == RENAMED[old]


def test_the_crop_names_have_no_alias_under_their_old_names():
    crops = _import_quietly('gluonbatch.transforms.crops')
    crop = _import_quietly('gluonbatch.transforms.draws').Crop(0, 0, 4, 3, True)
    assert crop.crop_box == (0, 0, 4, 3)
    old = ['window_overlap', 'canvas_window', 'resize_window']
    assert [name for name in old if hasattr(crops, name)] == []
    assert not hasattr(crop, 'box_window')


# In a fresh interpreter: the libraries the package uses imported first (their own warnings
# are theirs), then every module of the package, recording the deprecations each import
# emits; the first import of a module is the one that would warn.
NO_DEPRECATIONS = textwrap.dedent('''
    import importlib, json, pkgutil, warnings
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        for library in ('mxnet', 'cv2', 'gluoncv', 'pandas', 'pyarrow', 'dask.dataframe',
                        'distributed', 'matplotlib.pyplot', 'PIL.Image', 'tqdm'):
            importlib.import_module(library)
    warned = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        import gluonbatch
        names = sorted(info.name for info in pkgutil.walk_packages(gluonbatch.__path__,
                                                                    'gluonbatch.'))
        for name in ['gluonbatch'] + names:
            importlib.import_module(name)
            found = [str(w.message) for w in caught
                     if issubclass(w.category, DeprecationWarning)]
            if found:
                warned[name] = found
            del caught[:]
    print(json.dumps({'modules': len(names), 'warned': warned}))
''')


def test_no_module_warns_deprecation_when_imported():
    result = subprocess.run([sys.executable, '-c', NO_DEPRECATIONS], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.splitlines()[-1])
    assert report['modules'] > 100 and report['warned'] == {}


NO_OPENCV = textwrap.dedent('''
    import sys
    sys.modules['cv2'] = None  # import cv2 fails, as without OpenCV
    import gluonbatch, gluonbatch.batchify, gluonbatch.dataloader, gluonbatch.targets
    import gluonbatch.memory, gluonbatch.collate, gluonbatch.devices
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
