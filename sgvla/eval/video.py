"""Per-episode MP4: the camera images side by side, upright, with the live prompt context drawn
beside them, so a reviewer sees what the policy saw and what the graph said at each step."""

from collections.abc import Callable
from pathlib import Path

import cv2
import numpy as np

PANEL_WIDTH = 420
LINE = 14


def _text_panel(lines: list[str], height: int) -> np.ndarray:
    panel = np.full((height, PANEL_WIDTH, 3), 255, np.uint8)
    for i, line in enumerate(lines[: max(1, height // LINE - 1)]):
        cv2.putText(panel, line[:70], (6, LINE * (i + 1)), cv2.FONT_HERSHEY_SIMPLEX, 0.36, (20, 20, 20), 1,
                    cv2.LINE_AA)
    return panel


class EpisodeVideo:
    def __init__(self, path: Path, upright: Callable[[np.ndarray], np.ndarray], fps: float = 20.0):
        self.path = Path(path)
        self.upright = upright  # the suite's (SuiteConfig.upright): its backend may store images turned
        self.fps = fps
        self.writer: cv2.VideoWriter | None = None
        self.frames = 0

    def add(self, images: dict[str, np.ndarray], text: str) -> None:
        if not images:
            raise ValueError("no camera images to record: the episode runs without rendering")
        tiles = [np.ascontiguousarray(self.upright(img)) for img in images.values()]
        height = max(t.shape[0] for t in tiles)
        tiles = [cv2.resize(t, (t.shape[1] * height // t.shape[0], height)) for t in tiles]
        frame = np.hstack([*tiles, _text_panel(text.splitlines(), height)])
        if self.writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter_fourcc(*"mp4v"), self.fps,
                                          (frame.shape[1], frame.shape[0]))
        self.writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        if self.writer is not None:
            self.writer.release()
            self.writer = None
