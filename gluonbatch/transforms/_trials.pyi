from collections.abc import Callable, Sequence

Crop = tuple[int, int, int, int]

def run(state: tuple[int, ...], width: int, height: int, min_scale: float, max_scale: float,
        max_aspect_ratio: float, passes: Sequence[tuple[int, float, float, float]],
        boxes: Sequence[float] | None, area_low: float, area_high: float,
        test: Callable[[int, int, int, int, float, float], bool] | None,
        ) -> tuple[tuple[int, ...], list[Crop | None], tuple[int, int] | None]: ...
