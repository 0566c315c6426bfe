"""Per-episode MP4: the camera images side by side, upright, with the live prompt context drawn
beside them, so a reviewer sees what the policy saw and what the graph said at each step.

The videos are H.264 (libx264 through PyAV, 4:2:0, the MP4's index at the front) because report.html shows them
and a browser must play them: OpenCV's MP4 writer gives MPEG-4 Part 2 ('mp4v'), which no browser decodes (Debian's
Chromium showed an empty player, MEDIA_ERR_SRC_NOT_SUPPORTED). H.264 in MP4 plays in Chromium, Firefox and Safari
alike, and OpenCV and LeRobot's decoders read it back.
"""

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path

import cv2
import numpy as np

PANEL_WIDTH = 420
LINE = 14
CODEC = "libx264"
# veryfast, crf 23 (x264's default quality): measured on a 676x128 LIBERO frame of noise, 4.1 ms a frame and a sixth of
# the bytes of OpenCV's mp4v (1.3 ms); a simulator step takes longer than either.
CODEC_OPTIONS = {"preset": "veryfast", "crf": "23"}


def _text_panel(lines: list[str], height: int) -> np.ndarray:
    panel = np.full((height, PANEL_WIDTH, 3), 255, np.uint8)
    for i, line in enumerate(lines[: max(1, height // LINE - 1)]):
        cv2.putText(panel, line[:70], (6, LINE * (i + 1)), cv2.FONT_HERSHEY_SIMPLEX, 0.36, (20, 20, 20), 1,
                    cv2.LINE_AA)
    return panel


def even(frame: np.ndarray) -> np.ndarray:
    """`frame` padded with white to an even width and height: 4:2:0 video halves both for its colour planes."""
    h, w = frame.shape[:2]
    if h % 2 == 0 and w % 2 == 0:
        return frame
    return cv2.copyMakeBorder(frame, 0, h % 2, 0, w % 2, cv2.BORDER_CONSTANT, value=(255, 255, 255))


class EpisodeVideo:
    def __init__(self, path: Path, upright: Callable[[np.ndarray], np.ndarray], fps: float = 20.0):
        self.path = Path(path)
        self.upright = upright  # the suite's (SuiteConfig.upright): its backend may store images turned
        self.fps = fps
        self.container = None  # av's output container, opened at the first frame (whose size it takes)
        self.stream = None
        self.frames = 0

    def add(self, images: dict[str, np.ndarray], text: str) -> None:
        if not images:
            raise ValueError("no camera images to record: the episode runs without rendering")
        import av

        tiles = [np.ascontiguousarray(self.upright(img)) for img in images.values()]
        height = max(t.shape[0] for t in tiles)
        tiles = [cv2.resize(t, (t.shape[1] * height // t.shape[0], height)) for t in tiles]
        frame = even(np.hstack([*tiles, _text_panel(text.splitlines(), height)]))
        if self.container is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.container = av.open(str(self.path), "w", format="mp4", options={"movflags": "+faststart"})
            self.stream = self.container.add_stream(CODEC, rate=Fraction(self.fps).limit_denominator(1001),
                                                    options=CODEC_OPTIONS)
            self.stream.width, self.stream.height, self.stream.pix_fmt = frame.shape[1], frame.shape[0], "yuv420p"
        self.container.mux(self.stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        self.frames += 1

    def close(self) -> None:
        """Flush the encoder's delayed frames and write the file's index; idempotent."""
        if self.container is not None:
            container, self.container = self.container, None
            try:
                container.mux(self.stream.encode(None))
            finally:
                container.close()
