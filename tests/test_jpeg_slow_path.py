"""Without simplejpeg, gluonbatch decodes JPEGs through MXNet and says so once per process:
at the first JPEG simplejpeg would have decoded (not at import, nor for a PNG or a CMYK
JPEG, which MXNet decodes anyway), naming the ``jpeg`` install extra."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# simplejpeg made unimportable before gluonbatch is imported: what a machine without it sees
SCRIPT = r'''
import sys
sys.modules['simplejpeg'] = None
import io, json, warnings
from PIL import Image

def encoded(mode, fmt):
    out = io.BytesIO()
    Image.new(mode, (6, 4), 'white' if mode != 'CMYK' else (0, 0, 0, 0)).save(out, fmt)
    return out.getvalue()

with warnings.catch_warnings(record=True) as record:
    warnings.simplefilter('always')
    from gluonbatch.shards.decode import decode_image
    steps = []
    for ext, mode, fmt in [('png', 'RGB', 'PNG'), ('jpg', 'CMYK', 'JPEG'),
                           ('jpg', 'RGB', 'JPEG'), ('jpg', 'L', 'JPEG'),
                           ('jpg', 'RGB', 'JPEG')]:
        image = decode_image(ext, encoded(mode, fmt))
        steps.append([fmt + ' ' + mode, list(image.shape),
                      [str(w.message) for w in record if 'simplejpeg' in str(w.message)]])
print(json.dumps(steps))
'''


def test_the_first_jpeg_decoded_without_simplejpeg_warns_once_naming_the_extra():
    done = subprocess.run([sys.executable, '-c', SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    steps = json.loads(done.stdout)
    assert [shape for _, shape, _ in steps] == [[4, 6, 3]] * 5  # MXNet decoded them all
    said = [len(messages) for _, _, messages in steps]
    # not at import, the PNG or the CMYK JPEG; at the first RGB JPEG; never again
    assert said == [0, 0, 1, 1, 1]
    message = steps[-1][2][0]
    assert "pip install 'gluonbatch[jpeg]'" in message and 'MXNet' in message
