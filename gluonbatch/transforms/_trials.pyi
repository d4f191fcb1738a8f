import random
from collections.abc import Sequence

Crop = tuple[int, int, int, int]

def run(rng: random.Random, width: int, height: int, min_scale: float, max_scale: float,
        max_aspect_ratio: float, passes: Sequence[tuple[int, float, float, float]],
        boxes: Sequence[float] | None, area_low: float, area_high: float,
        ) -> tuple[list[Crop | None], tuple[int, int] | None]: ...
