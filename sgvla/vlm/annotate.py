"""VLM scene graphs for sampled frames of a LeRobot dataset (e.g. SO101 teleoperation recordings), written beside
it in the versioned format of :mod:`sgvla.vlm.resource` (``sgvla vlm-annotate``). Resumable: frames already
answered are skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from sgvla.scene_graph.ontology import Ontology
from sgvla.vlm.bench import Timer, query_missing, slug
from sgvla.vlm.cache import AnswerCache
from sgvla.vlm.config import ClientConfig
from sgvla.vlm.frames import LeRobotSource, Sampling
from sgvla.vlm.prompts import PromptTemplate
from sgvla.vlm.resource import FOLDER, write_meta


@dataclass(frozen=True)
class Annotation:
    """What one model's pass over the dataset did."""

    model: str
    folder: Path  # holds meta.json, README.md and graphs.jsonl
    frames: int  # sampled frames (all answered now or before)
    queried: int  # asked in this pass
    failed: int  # frames whose answer is an error


def annotation_folder(dataset: str | Path, config: ClientConfig, prompt: PromptTemplate) -> Path:
    return Path(dataset) / FOLDER / f"{slug(config.name)}__{prompt.label}__{config.constraint}"


def annotate_dataset(dataset: str | Path, configs: Sequence[ClientConfig], prompt: PromptTemplate, ontology: Ontology,
                     sampling: Sampling, cameras: dict[str, str] | None = None, rotate: bool = False,
                     out: str | Path | None = None, chunk: int = 16, progress: bool = True) -> list[Annotation]:
    """Graphs of each model for the sampled frames of `cameras` (feature key -> view; None: every camera), into
    `out` or `annotation_folder(...)`."""
    source = LeRobotSource(dataset, cameras or None, rotate=rotate)
    frames = sampling.sample([source], source.cameras)
    done = []
    for config in configs:
        folder = Path(out) if out else annotation_folder(dataset, config, prompt)
        write_meta(folder, source.name, config, prompt, ontology, source.keys, asdict(sampling))
        with AnswerCache(folder / "graphs.jsonl") as cache:
            asked = query_missing(frames, {source.name: source}, config, prompt, ontology, cache, Timer(), chunk,
                                  progress)
            failed = sum(bool(cache.records[f.key].get("error")) for f in frames)
        done.append(Annotation(config.name, folder, len(frames), asked, failed))
    return done
