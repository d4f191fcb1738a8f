import numpy as np

def ssd_match(rows: np.ndarray, areas: np.ndarray, boxes: np.ndarray, valid: np.ndarray | None,
              bipartite_threshold: float, share_eps: float, iou_thresh: float, batch: int,
              boxes_per_sample: int, anchors: int, out: np.ndarray) -> None: ...
