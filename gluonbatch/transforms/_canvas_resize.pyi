import numpy as np

def resize(interp: int, lanes: int, src: np.ndarray, values: np.ndarray, x: int, y: int,
           width: int, height: int, fx: float, fy: float, out: np.ndarray) -> None: ...
