"""The loops compiled at install run where they repeat Python's arithmetic, and a source
tree that was not built runs their Python definitions: the same results, after one
warning naming the command that builds them."""
import json
import os
import platform
import random
import subprocess
import sys

import numpy as np
import pytest

from gluonbatch.targets.iou import AnchorSet
from gluonbatch.transforms import crop_trials, draws

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_trials_run_compiled_for_cpythons_generator_and_plain_numbers():
    def compiled(rng, *scales):
        return crop_trials.CropTrials(rng, 640, 480, *scales).compiled

    assert compiled(random, 0.3, 1, 2) and compiled(random.Random(3), 0.3, 1.0, 2.0)

    class Subclassed(random.Random):
        """Its methods may be overridden: called as gluoncv calls them."""

    assert not compiled(Subclassed(3), 0.3, 1, 2)
    # numpy's float32 rounds its arithmetic to float32, a huge int a double cannot hold
    assert not compiled(random.Random(3), np.float32(0.3), 1, 2)
    assert not compiled(random.Random(3), 0.3, 1, 10 ** 400)


def test_ssd_boxes_of_finite_area_take_the_compiled_path():
    anchors = AnchorSet(np.array([[0, 0, 4, 4], [2, 2, 6, 6]], np.float32))
    assert anchors.finite(np.array([[[0, 0, 3, 3], [1, 1, 2, 2]]], np.float32))
    assert not anchors.finite(np.array([[[0, 0, np.nan, 3]]], np.float32))
    assert not anchors.finite(np.array([[[-3e38, 0, 3e38, 3e38]]], np.float32))  # area inf


# the extensions made unimportable before gluonbatch is: a source tree never built
NOT_BUILT = r'''
import sys
if sys.argv[1] == 'not built':
    sys.modules['gluonbatch.transforms._trials'] = None
    sys.modules['gluonbatch.transforms._canvas_resize'] = None
    sys.modules['gluonbatch.transforms._colour'] = None
    sys.modules['gluonbatch.transforms._warp'] = None
    sys.modules['gluonbatch.targets._ssd_match'] = None
import json, random, warnings
import numpy as np
with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter('always')
    from gluonbatch.targets.ssd import SSDTargets
    from gluonbatch.transforms import affine, canvas_resize, draws, jitter, pixels
    from gluonbatch.transforms.crops import resize_crop
rng = np.random.default_rng(5)
image = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
# nearest, area and Lanczos compiled where built, and linear and cubic from a crop built
# compiled; OpenCV's resizes of the float32 crop numpy builds where not
resized = [resize_crop(image, (3, 5, 140, 90), (40, 20), (41, 29), interp, (5.5, -3.0, 9.0))
           for interp in range(5)]
crops = []
for seed in range(40):
    boxes = rng.uniform(0, 200, (int(rng.integers(1, 5)), 2))
    label = np.concatenate([boxes, boxes + rng.uniform(5, 150, boxes.shape),
                            np.zeros((len(boxes), 1))], 1)
    random.seed(seed)
    np.random.seed(seed)
    crops.append(list(draws.draw_crop(label, (320, 240)))[:4] + [random.random()])
centres = np.array([[x + 8, y + 8, w, h] for x in range(0, 300, 16) for y in range(0, 300, 16)
                    for w, h in ((16, 16), (32, 24))], np.float32)
boxes = rng.uniform(0, 250, (4, 3, 2)).astype(np.float32)
boxes = np.concatenate([boxes, boxes + rng.uniform(4, 60, boxes.shape).astype(np.float32)], 2)
cls_targets, box_targets = SSDTargets(centres).compute(boxes, np.ones((4, 3), np.float32))
print(json.dumps({'warnings': [str(w.message) for w in record if 'not built' in str(w.message)],
                  'crops': crops, 'targets': [cls_targets.tolist(), box_targets.tolist()],
                  'compiled': [canvas_resize.applies(image, (140, 90), (41 / 140, 29 / 90), interp)
                               for interp in (0, 3, 4)],
                  'resized': [r.view(np.uint32).tolist() for r in resized],
                  'grey': jitter.gray_mean(image),
                  'warped': affine.warp_image(image, np.array([[1.37, 0, -3.2], [0, 1.37, 4.9]]),
                                              (40, 30)).tolist(),
                  'colour': [pixels.COMPILED_COLOUR, pixels.affine_chw(
                      image, np.arange(12.0).reshape(3, 4) / 7, True).view(np.uint32).tolist()]}))
'''


@pytest.mark.slow
def test_a_tree_not_built_warns_once_and_gives_the_same_results():
    runs = {}
    for how in ('built', 'not built'):
        done = subprocess.run([sys.executable, '-c', NOT_BUILT, how], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        runs[how] = json.loads(done.stdout.splitlines()[-1])
    assert runs['built']['warnings'] == []
    (warning,) = runs['not built']['warnings']
    assert 'pip install -e .' in warning
    assert runs['not built']['crops'] == runs['built']['crops']
    assert runs['not built']['targets'] == runs['built']['targets']
    if platform.machine() == 'x86_64':  # the pinned OpenCV build's paths, checked at import
        assert runs['built']['compiled'] == [True, True, True]
    assert runs['not built']['compiled'] == [False, False, False]
    assert runs['not built']['resized'] == runs['built']['resized']
    assert runs['not built']['grey'] == runs['built']['grey']
    assert runs['not built']['warped'] == runs['built']['warped']
    assert not runs['not built']['colour'][0]
    assert runs['not built']['colour'][1] == runs['built']['colour'][1]
