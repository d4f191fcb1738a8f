import numpy as np

def area_resize(src: np.ndarray, values: np.ndarray, x: int, y: int, width: int, height: int,
                fx: float, fy: float, out: np.ndarray) -> None: ...
