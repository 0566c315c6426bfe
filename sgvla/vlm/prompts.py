"""Versioned prompt templates: what a VLM is asked, recorded with every answer it gives."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path

from sgvla.core.config import ConfigError, from_mapping, load_yaml
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import RELATIONS

DEFAULT_PROMPT = CONFIG_DIR / "vlm" / "prompt_scene_graph.yaml"
_FIELDS = ("camera", "task", "objects", "relations")


@cache
def default_prompt() -> PromptTemplate:
    return load_prompt(DEFAULT_PROMPT)


def canonical_camera(name: str, prompt: PromptTemplate | None = None) -> str:
    """The camera a prompt describes under `name`: `name` itself, or the described camera it is another name of
    (the prompt file's `aliases`: a rig's camera names, short names). `prompt`: the default prompt when None."""
    return (prompt or default_prompt()).camera(name)


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
    cameras: dict[str, str] = field(default_factory=dict)  # what the VLM is told of each view, by camera name
    aliases: dict[str, str] = field(default_factory=dict)  # other names of described cameras -> the described name
    labels: dict[str, str] = field(default_factory=dict)  # a described camera's label in tables; default: its name

    def __post_init__(self) -> None:
        try:
            self.user.format(**{k: "" for k in _FIELDS})
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"user template: bad placeholder {exc}; allowed: {{{'}, {'.join(_FIELDS)}}}") from None
        if not self.cameras:
            raise ValueError("cameras: describe at least one camera")
        for key, named in (("aliases", self.aliases.values()), ("labels", self.labels)):
            wrong = sorted(set(named) - set(self.cameras))
            if wrong:
                raise ValueError(f"{key}: {wrong} are not cameras the prompt describes; it describes "
                                 f"{sorted(self.cameras)}")

    @property
    def view_labels(self) -> dict[str, str]:
        """Every described camera's table label, in the file's order."""
        return {camera: self.labels.get(camera, camera) for camera in self.cameras}

    def camera(self, name: str) -> str:
        """The described camera `name` is (itself, or by an alias)."""
        return self.aliases.get(name, name)

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
        camera = self.camera(camera)
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
