"""Printable sheets of the configured markers at true scale, each with its placement guide (``sgvla markers``).

Pages are drawn as images at ``dpi`` dots per inch: a marker's black square is exactly ``size`` metres at that
resolution (rounded to whole dots: at 300 dpi within 0.09 mm), with a white margin of one cell to cut along. Each
marker is labelled with its object and id, and the page lists, per marker, where it goes on its object
(:func:`sgvla.so101.perception.fiducials.placement_text`). PNG pages carry their dpi, PDF pages their size in
inches, so both print at 100% scale.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from sgvla.so101.perception.fiducials import PLACEMENT_FRAME, MarkerConfig, placement_text

METRES_PER_INCH = 0.0254
PAPERS = {"a4": (0.210, 0.297), "letter": (0.2159, 0.2794)}  # metres
PAGE_MARGIN = 0.012  # metres of white around the page's content
GAP = 0.008  # metres between markers
FONT = cv2.FONT_HERSHEY_SIMPLEX
TEXT_HEIGHT = 0.0025  # metres: a cap height that reads at arm's length


@dataclass(frozen=True)
class SheetMarker:
    """Where one marker was drawn: page, the top-left pixel of its black square, its side in pixels."""

    page: int
    marker_id: int
    name: str
    x: int
    y: int
    side_px: int


def _px(metres: float, dpi: int) -> int:
    return int(round(metres / METRES_PER_INCH * dpi))


def _text(page: np.ndarray, text: str, x: int, y: int, dpi: int) -> None:
    scale = _px(TEXT_HEIGHT, dpi) / 22.0  # Hershey simplex caps are ~22 px tall at scale 1
    cv2.putText(page, text, (x, y), FONT, scale, 0, max(1, int(round(scale * 1.6))), cv2.LINE_AA)


def draw_sheets(config: MarkerConfig, dpi: int = 300, paper: str = "a4") -> tuple[list[np.ndarray], list[SheetMarker]]:
    """Gray pages (uint8, white paper) and where each marker landed. Markers flow left to right, then down, in
    the config's order; a page's placement guide lists its markers below them."""
    if paper not in PAPERS:
        raise ValueError(f"paper {paper!r} is not one of {list(PAPERS)}")
    if not 72 <= dpi <= 1200:
        raise ValueError(f"dpi must be between 72 and 1200, got {dpi}")
    width, height = (_px(v, dpi) for v in PAPERS[paper])
    margin, gap, line = _px(PAGE_MARGIN, dpi), _px(GAP, dpi), _px(TEXT_HEIGHT * 2.2, dpi)
    pages: list[np.ndarray] = []
    placed: list[SheetMarker] = []
    guides: list[list[str]] = []
    x = y = row_height = 0

    def new_page() -> None:
        nonlocal x, y, row_height
        pages.append(np.full((height, width), 255, np.uint8))
        guides.append([])
        x, y, row_height = margin, margin + line, 0
        _text(pages[-1], f"sgvla fiducials ({config.dictionary}), print at 100% scale ({dpi} dpi); "
                         f"source: {Path(config.source).name or 'config'}", margin, margin + line // 2, dpi)

    new_page()
    for name, obj in config.objects.items():
        for marker in obj.markers:
            side = _px(marker.size, dpi)
            pad = int(round(side / config.cells))
            image = cv2.copyMakeBorder(cv2.aruco.generateImageMarker(config.aruco_dictionary, marker.id, side),
                                       pad, pad, pad, pad, cv2.BORDER_CONSTANT, value=255)
            cv2.rectangle(image, (0, 0), (image.shape[1] - 1, image.shape[0] - 1), 160, 1)  # where to cut
            block_w, block_h = image.shape[1], image.shape[0] + line
            if x + block_w > width - margin:
                x, y, row_height = margin, y + row_height + gap, 0
            guide_room = line * (len(guides[-1]) + 3)
            if y + block_h + guide_room + line > height - margin:
                new_page()
            page = pages[-1]
            page[y:y + image.shape[0], x:x + image.shape[1]] = image
            _text(page, f"{name} #{marker.id} {marker.face}", x, y + image.shape[0] + line - line // 4, dpi)
            placed.append(SheetMarker(len(pages) - 1, marker.id, name, x + pad, y + pad, side))
            guides[-1].append(placement_text(name, marker))
            x += block_w + gap
            row_height = max(row_height, block_h)
    for page, lines in zip(pages, guides):
        lines = [PLACEMENT_FRAME, *lines]
        top = height - margin - line * len(lines)
        for i, text in enumerate(lines):
            _text(page, text, margin, top + i * line, dpi)
    return pages, placed


def write_sheets(config: MarkerConfig, out: str | Path, dpi: int = 300, paper: str = "a4") -> list[Path]:
    """``out`` .pdf: one PDF, a page per sheet; .png: one PNG per page (``name_2.png``... after the first)."""
    from PIL import Image

    out = Path(out)
    if out.suffix.lower() not in (".pdf", ".png"):
        raise ValueError(f"{out}: the sheet is written as .pdf or .png, not {out.suffix or 'no suffix'!r}")
    pages, _ = draw_sheets(config, dpi, paper)
    out.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(p) for p in pages]
    if out.suffix.lower() == ".pdf":
        images[0].save(out, "PDF", resolution=float(dpi), save_all=True, append_images=images[1:])
        return [out]
    paths = [out if i == 0 else out.with_name(f"{out.stem}_{i + 1}{out.suffix}") for i in range(len(images))]
    for image, path in zip(images, paths):
        image.save(path, dpi=(dpi, dpi))
    return paths
