"""Decoding one record's members: the image, the caption and the metadata.

Examples
--------
>>> import io, json
>>> from PIL import Image
>>> picture = io.BytesIO()
>>> Image.new('RGB', (4, 3), (255, 0, 0)).save(picture, 'PNG')
>>> members = [('png', picture.getvalue()), ('txt', b'a red box'), ('json', b'{"key": "0"}')]
>>> image, caption, metadata = decode_record(members, (0, 1, 2), '0', lambda member=None: '0')
>>> image.shape, caption, metadata
((3, 4, 3), 'a red box', {'key': '0'})
"""
import io
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import mxnet as mx
import numpy as np

from .._core import jpeg
from .._core.alloc import in_numpy_mode
from .._core.typing import NDArray
from .._core.wording import with_article

__all__ = ['decode_image', 'decode_image_of', 'decode_record', 'caption_text', 'metadata_object',
           'unconfirmed_objects']


def decode_image(ext: str, data: bytes) -> NDArray:
    """An (H, W, 3) uint8 RGB NDArray (``mx.np.ndarray`` in numpy mode), the pixels
    ``mx.image.imdecode`` gives: JPEGs by libjpeg-turbo where
    :func:`~gluonbatch._core.jpeg.imdecode` can, WebP by Pillow, which MXNet 1.9.1 cannot
    decode, the rest by MXNet."""
    if ext != 'webp':
        return jpeg.imdecode(data)
    from PIL import Image

    with Image.open(io.BytesIO(data), formats=['WEBP']) as picture:
        image = mx.nd.array(np.asarray(picture.convert('RGB')), dtype=np.uint8)
    # like mx.image.imdecode, an mx.np.ndarray in MXNet's numpy mode
    return image.as_np_ndarray() if in_numpy_mode() else image


def decode_image_of(ext: str, data: bytes, where: Callable[[], str]) -> NDArray:
    """:func:`decode_image`, or a ValueError naming the member (``where()``) and why."""
    try:
        return decode_image(ext, data)
    except (mx.base.MXNetError, OSError, ValueError) as err:  # Pillow: OSError
        raise ValueError('cannot decode the image of %s: %s'
                         % (where(), str(err).strip().splitlines()[-1])) from None


def caption_text(data: bytes) -> str:
    """A ``.txt`` member's caption; ValueError ``'... is not UTF-8 text: ...'``.

    >>> caption_text(b'a cat')
    'a cat'
    """
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as err:
        raise ValueError('is not UTF-8 text: %s' % err) from None


def metadata_object(data: bytes) -> dict[str, Any]:
    """A ``.json`` member's metadata (a dict); ValueError saying what it is instead.

    >>> metadata_object(b'{"key": "0"}')
    {'key': '0'}
    >>> metadata_object(b'[1]')
    Traceback (most recent call last):
    ...
    ValueError: holds a list, not an object
    >>> metadata_object(b'1')
    Traceback (most recent call last):
    ...
    ValueError: holds an int, not an object
    """
    try:
        metadata = json.loads(data)
    except ValueError as err:
        raise ValueError('is not valid JSON: %s' % err) from None
    if not isinstance(metadata, dict):
        raise ValueError('holds %s, not an object' % with_article(type(metadata).__name__))
    return metadata


def decode_record(members: Sequence[tuple[str, bytes]], slots: tuple[int, int, int],
                  record_id: str, describe: Callable[..., str]
                  ) -> tuple[NDArray, str, dict[str, Any]]:
    """``(image, caption, metadata)`` of one record, or a ValueError naming it.

    Parameters
    ----------
    members : list of (str, bytes)
        The record's members as ``(extension, bytes)``.
    slots : (int, int, int)
        Positions of the image, the ``.txt`` and the ``.json`` member in ``members``.
    record_id : str
    describe : callable
        ``describe(member=None)`` names the record (and a member) in error messages.
    """
    image_slot, text_slot, json_slot = slots
    image_ext, image_bytes = members[image_slot]
    image = decode_image_of(image_ext, image_bytes,
                            lambda: describe('%s.%s' % (record_id, image_ext)))
    try:
        caption = caption_text(members[text_slot][1])
    except ValueError as err:
        raise ValueError('the caption of %s %s' % (describe(), err)) from None
    try:
        metadata = metadata_object(members[json_slot][1])
    except ValueError as err:
        raise ValueError('the .json member of %s %s' % (describe(), err)) from None
    return image, caption, metadata


_JSON, _JSON_SPACE = json.JSONDecoder(), re.compile(r'[ \t\n\r]*')  # json.loads' whitespace


def unconfirmed_objects(datas: Sequence[bytes | memoryview]) -> list[int]:
    """The positions of the members ``datas`` (bytes-like) not confirmed to be JSON
    objects as ``json.loads`` reads them. All of them are parsed from one text, their
    ASCII joined by newlines: each must be one object, with only whitespace around it in
    its own bytes. Others (not ASCII, say) are left to ``json.loads``.

    >>> unconfirmed_objects([b'{"a": 1}', b' {} ', b'{"b": [', b'1]}', b'[]', b'{}'])
    [2, 3, 4]
    """
    joined = b'\n'.join(datas)
    if not joined.isascii():
        return list(range(len(datas)))
    text, unconfirmed, start = joined.decode('ascii'), [], 0
    parse = _JSON.raw_decode

    def space(begin, stop):  # where the whitespace from begin on ends (it may be none)
        return _JSON_SPACE.match(text, begin, stop).end()
    for k, data in enumerate(datas):
        end = start + len(data)
        try:  # whitespace around the object is rare: looked for only where it is
            value, stop = parse(text, start if text[start:start + 1] == '{' else
                                space(start, end))
            if type(value) is not dict or stop > end or (
                    stop < end and space(stop, end) != end):
                unconfirmed.append(k)
        except ValueError:
            unconfirmed.append(k)
        start = end + 1
    return unconfirmed
