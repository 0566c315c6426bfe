"""Versioned prompt templates: what a VLM is asked, recorded with every answer it gives."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sgvla.core.config import ConfigError, from_mapping, load_yaml
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import RELATIONS

DEFAULT_PROMPT = CONFIG_DIR / "vlm" / "prompt_scene_graph.yaml"
# Short names accepted wherever a camera is named.
CAMERA_ALIASES = {"wrist": "robot0_eye_in_hand", "eye_in_hand": "robot0_eye_in_hand", "agent": "agentview"}
_FIELDS = ("camera", "task", "objects", "relations")


def canonical_camera(name: str) -> str:
    return CAMERA_ALIASES.get(name, name)


@dataclass(frozen=True)
class Prompt:
    system: str
    user: str


@dataclass(frozen=True)
class PromptTemplate:
    """System message and a user template with {camera} {task} {objects} {relations}."""

    name: str
    version: str
    system: str
    user: str
    cameras: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        try:
            self.user.format(**{k: "" for k in _FIELDS})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"user template: bad placeholder {exc}; allowed: {{{'}, {'.join(_FIELDS)}}}") from None
        if not self.cameras:
            raise ValueError("cameras: describe at least one camera")

    @property
    def sha(self) -> str:
        """Hash of every field: a template edited without a version bump still gets a new identity."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:12]

    @property
    def identity(self) -> dict[str, str]:
        return {"name": self.name, "version": self.version, "sha": self.sha}

    @property
    def label(self) -> str:
        return f"{self.name}-v{self.version}-{self.sha}"

    def render(self, task: str, camera: str, objects: tuple[str, ...],
               relations: tuple[str, ...] = RELATIONS) -> Prompt:
        camera = canonical_camera(camera)
        if camera not in self.cameras:
            raise ValueError(f"prompt {self.label}: no description for camera {camera!r}; has {sorted(self.cameras)}")
        user = self.user.format(camera=self.cameras[camera], task=task,
                                objects=", ".join(objects), relations=", ".join(relations))
        return Prompt(self.system, user)


def load_prompt(path: str | Path = DEFAULT_PROMPT) -> PromptTemplate:
    data = load_yaml(path)
    template = from_mapping(PromptTemplate, data, str(path))
    if not isinstance(data.get("version"), str):
        raise ConfigError(f"{path}.version: quote the version as a string, got {data.get('version')!r}")
    return template
