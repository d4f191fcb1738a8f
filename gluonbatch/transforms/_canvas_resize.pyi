import numpy as np

Call = tuple[np.ndarray, np.ndarray, int, int, int, int, float, float, np.ndarray]

def area_resize(src: np.ndarray, values: np.ndarray, x: int, y: int, width: int, height: int,
                fx: float, fy: float, out: np.ndarray) -> None: ...
def lanczos_resize(lanes: int, call: Call) -> None: ...
