import numpy as np

def ssd_match(rows: np.ndarray, areas: np.ndarray, boxes: np.ndarray, valid: np.ndarray | None,
              iou_thresh: float, batch: int, boxes_per_sample: int, anchors: int,
              out: np.ndarray) -> None: ...
