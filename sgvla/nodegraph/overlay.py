"""A scene graph drawn on its camera image (OpenCV): object boxes with their ids, and the triplets of the
manipulated object (what the scene_graph context mode shows a policy) in a panel beside the image. Ids
keep their instance suffix (two black bowls stay apart)."""

from __future__ import annotations

import numpy as np

from sgvla.scene_graph import Ontology, ViewGraph

PANEL_WIDTH = 360
MIN_HEIGHT = 384
_COLORS = [(230, 25, 75), (60, 180, 75), (0, 130, 200), (245, 130, 48), (145, 30, 180), (70, 240, 240),
           (240, 50, 230), (210, 245, 60), (250, 190, 212), (0, 128, 128), (170, 110, 40), (128, 0, 0)]


def policy_frame_box(box, width: int, height: int) -> tuple[int, int, int, int]:
    """A box of the stored (bottom-up) image in the upright image the camera topics carry."""
    from sgvla.core.state import box_to_policy_frame

    return box_to_policy_frame(box, width, height)


def draw_overlay(image: np.ndarray, view_graph: ViewGraph, ontology: Ontology | None = None,
                 boxes_stored: bool = True, max_lines: int = 24) -> np.ndarray:
    """(H', W' + panel, 3) uint8 RGB: `image` (upright RGB) scaled to at least MIN_HEIGHT rows, the boxes of
    `view_graph` (given in the stored convention when `boxes_stored`), and its triplets as text."""
    import cv2

    h, w = image.shape[:2]
    scale = max(1, int(np.ceil(MIN_HEIGHT / h)))
    canvas = np.zeros((h * scale, w * scale + PANEL_WIDTH, 3), np.uint8)
    canvas[:, : w * scale] = cv2.resize(np.ascontiguousarray(image[..., :3]), (w * scale, h * scale),
                                        interpolation=cv2.INTER_NEAREST)
    for i, (name, box) in enumerate(sorted(view_graph.boxes.items())):
        x1, y1, x2, y2 = policy_frame_box(box, w, h) if boxes_stored else tuple(int(c) for c in box)
        color = _COLORS[i % len(_COLORS)]
        cv2.rectangle(canvas, (x1 * scale, y1 * scale), (x2 * scale - 1, y2 * scale - 1), color, 1)
        cv2.putText(canvas, name, (x1 * scale + 2, max(y1 * scale - 3, 10)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.35, color, 1, cv2.LINE_AA)
    graph = view_graph.graph
    subject = ontology.manipulated if ontology is not None else None
    shown = graph.filter_subject(subject) if subject and len(graph.filter_subject(subject)) else graph
    lines = [f"{view_graph.camera}: {len(graph)} triplets", *(f"{s} {r} {o}" for s, r, o in shown)]
    if len(lines) > max_lines:
        lines = lines[: max_lines - 1] + [f"... {len(lines) - max_lines + 1} more"]
    x0 = w * scale + 6
    for row, text in enumerate(lines):
        cv2.putText(canvas, text, (x0, 16 + 15 * row), cv2.FONT_HERSHEY_SIMPLEX, 0.38, (235, 235, 235), 1, cv2.LINE_AA)
    return canvas
