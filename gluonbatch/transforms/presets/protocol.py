"""What every detection train preset is: a :class:`Preset`, its randomness drawn apart.

A train preset makes all its random choices in ``draw``, from the image's shape, its label
and the generators it is handed (a :class:`Generators`), in gluoncv's order, and returns
them as one *draw* (:class:`~gluonbatch.transforms.draws.SSDDraw`,
:class:`~gluonbatch.transforms.presets.rcnn.RCNNDraw`,
:class:`~gluonbatch.transforms.presets.center_net.CenterNetDraw`). ``apply`` makes the
sample that draw describes. Calling the preset, gluoncv's way, is ``draw`` then ``apply``
on numpy's and Python's global generators
(:func:`~gluonbatch.transforms.presets.global_generators`), so a run seeded with
``random.seed`` and ``np.random.seed`` sees gluoncv's samples, and seeded loading, which
reseeds those generators per sample, reaches every draw.

Examples
--------
>>> import numpy as np
>>> from gluonbatch.transforms.presets.ssd import SSDDefaultTrainTransform
>>> preset = SSDDefaultTrainTransform(96, 64)
>>> isinstance(preset, Preset)
True
>>> image = np.full((60, 80, 3), 128, np.uint8)
>>> label = np.array([[10., 10., 50., 40., 1.]])
>>> generators = Generators.seeded(0)
>>> drawn = preset.draw(image.shape, label, generators)
>>> img, boxes = preset.apply((image, label), drawn, generators)
>>> random.seed(0); np.random.seed(0)     # the same seed, the global generators
>>> called = preset(image, label)
>>> np.array_equal(img, called[0]) and np.array_equal(boxes, called[1])
True
"""
import dataclasses
import random
from typing import Any, Protocol, Sequence, Tuple, TypeVar, runtime_checkable

import numpy as np

from ..._core.checks import describe, is_int

__all__ = ['Preset', 'Draw', 'Generators', 'global_generators']

#: The type of a preset's draw, its random choices for one sample (:class:`~gluonbatch.transforms.draws.SSDDraw`,
#: :class:`~gluonbatch.transforms.presets.rcnn.RCNNDraw`, ...).
Draw = TypeVar('Draw')


@dataclasses.dataclass(frozen=True)
class Generators:
    """The two generators a preset draws from: gluoncv's presets call numpy's and Python's
    global ones, so these are a ``numpy.random.RandomState`` and a ``random.Random`` (a
    ``numpy.random.Generator`` makes other calls, other numbers).

    Parameters
    ----------
    numpy : numpy.random.RandomState
        What gluoncv draws with ``np.random`` (coins, flips, crop picks, RPN sampling).
    python : random.Random
        What gluoncv draws with ``random`` (crop trials, expansion, hue, R-CNN's short side).

    Raises
    ------
    TypeError
        Either is not of its type.

    Examples
    --------
    >>> generators = Generators.seeded(1)
    >>> random.seed(1); np.random.seed(1)
    >>> generators.python.random() == random.random()
    True
    >>> generators.numpy.randint(100) == np.random.randint(100)
    True
    """

    numpy: np.random.RandomState
    python: random.Random

    def __post_init__(self) -> None:
        if not isinstance(self.numpy, np.random.RandomState):
            raise TypeError('Generators.numpy must be a numpy.random.RandomState (what '
                            "gluoncv's np.random calls draw from), got %s"
                            % describe(self.numpy))
        if not isinstance(self.python, random.Random):
            raise TypeError('Generators.python must be a random.Random (what gluoncv\'s '
                            'random calls draw from), got %s' % describe(self.python))

    @classmethod
    def seeded(cls, seed: int) -> 'Generators':
        """New generators in the states ``np.random.seed(seed)`` and ``random.seed(seed)``
        put the global ones in."""
        return cls(np.random.RandomState(seed), random.Random(seed))


# numpy's module-level functions are this RandomState's methods, and Python's random
# module's are this Random's: drawing from them is drawing from the globals
_GLOBAL = Generators(np.random.mtrand._rand, random._inst)


def global_generators() -> Generators:
    """numpy's and Python's global generators, what ``np.random.uniform`` and
    ``random.uniform`` draw from: a preset's call draws from them.

    >>> generators = global_generators()
    >>> np.random.seed(3)
    >>> first = generators.numpy.uniform()
    >>> np.random.seed(3)
    >>> first == np.random.uniform()
    True
    """
    return _GLOBAL


@runtime_checkable
class Preset(Protocol[Draw]):
    """A detection train preset whose random choices are drawn apart from the pixel work.

    The SSD and YOLOv3 presets (:class:`~gluonbatch.transforms.presets.ssd.SSDAugmentation`
    and its subclasses), Faster and Mask R-CNN's and CenterNet's implement it. A call,
    ``preset(*sample)``, is ``preset.apply(sample, preset.draw(shape, label, g), g)`` with
    ``g`` the global generators (:func:`~gluonbatch.transforms.presets.global_generators`).
    """

    def draw(self, image_shape: Sequence[int], label: np.ndarray,
             generators: Generators) -> Draw:
        """Every random choice for a sample whose image has ``image_shape`` (``(height,
        width[, channels])``) and whose boxes are ``label`` (``(N, 5+)``; a preset whose
        draws do not depend on it checks it all the same), drawn from ``generators`` (a
        preset may also draw from generators it owns, CenterNet from its ``data_rng``) in
        gluoncv's order, as one draw.

        Raises
        ------
        TypeError
            ``image_shape`` is not a sequence of ints, ``label`` not an array of numbers,
            ``generators`` not :class:`Generators`.
        ValueError
            ``image_shape`` has fewer than 2 sides, or one below 1; ``label`` has the wrong
            shape; the image is too small for what was drawn (after the same draws as
            gluoncv's, where gluoncv fails).
        """

    def apply(self, sample: Sequence[Any], draw: Draw,
              generators: Generators) -> Tuple[Any, ...]:
        """The preset's output for ``sample`` (what a call takes, as a tuple: ``(image,
        label)``, Mask R-CNN's ``(image, label, segm)``), augmented as ``draw`` (from
        :meth:`draw`) says. Only what no shape or label can decide beforehand is drawn
        here, from ``generators``, after :meth:`draw`'s draws: R-CNN's RPN sampling, which
        depends on the network's anchors. Inputs are never modified.

        Raises
        ------
        TypeError
            ``sample`` is not a tuple or list of the preset's fields, or holds the wrong
            types; ``draw`` is not this preset's draw; ``generators`` not
            :class:`Generators`.
        ValueError
            ``sample`` has the wrong number of fields, or one of the wrong shape.
        """


def check_generators(generators: object) -> Generators:
    """``generators`` if it is a :class:`Generators`, else ``TypeError``."""
    if not isinstance(generators, Generators):
        raise TypeError('generators must be a gluonbatch.transforms.presets.Generators (a '
                        'numpy RandomState and a random.Random; global_generators() gives '
                        "numpy's and Python's global ones), got %s" % describe(generators))
    return generators


def check_image_shape(image_shape: object) -> Tuple[int, ...]:
    """``image_shape`` as a tuple of ints: ``(height, width[, ...])``, both at least 1."""
    if not isinstance(image_shape, (tuple, list)) or not all(is_int(side)
                                                             for side in image_shape):
        raise TypeError('image_shape must be a tuple of ints (height, width[, channels]), '
                        'got %r' % (image_shape,))
    if len(image_shape) < 2 or min(image_shape[:2]) < 1:
        raise ValueError('image_shape must be (height, width[, channels]) with sides of at '
                         'least 1, got %r' % (tuple(image_shape),))
    return tuple(int(side) for side in image_shape)


def check_draw(draw: object, kind: type, preset: object) -> None:
    """``TypeError`` unless ``draw`` is the ``kind`` of draw that ``preset`` makes."""
    if not isinstance(draw, kind):
        raise TypeError('draw must be the %s that %s.draw returns, got %s'
                        % (kind.__name__, type(preset).__name__, describe(draw)))


def unpack_sample(sample: object, fields: Sequence[str]) -> Tuple[Any, ...]:
    """``sample``'s fields, named ``fields`` in errors: a tuple or list of that many."""
    if not isinstance(sample, (tuple, list)):
        raise TypeError('sample must be a tuple (%s), got %s'
                        % (', '.join(fields), describe(sample)))
    if len(sample) != len(fields):
        raise ValueError('sample must be (%s): %d fields, got %d'
                         % (', '.join(fields), len(fields), len(sample)))
    return tuple(sample)
