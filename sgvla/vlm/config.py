"""Client configs: one dataclass per backend type, chosen by the YAML key ``type``.

LeRobot style: a registry maps ``type`` to its config class, and :func:`make_vlm` builds the
backend (importing torch or httpx only then, so the CLI starts fast).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sgvla.core.config import ConfigError, from_mapping, load_yaml
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import Ontology
from sgvla.vlm.constraints import CONSTRAINTS
from sgvla.vlm.prompts import PromptTemplate

CLIENTS_DIR = CONFIG_DIR / "vlm" / "clients"
CLIENT_TYPES: dict[str, type[ClientConfig]] = {}


def register_client(name: str):
    def wrap(cls):
        cls.type = name
        CLIENT_TYPES[name] = cls
        return cls
    return wrap


@dataclass
class ClientConfig:
    model: str
    name: str = ""  # label in tables and records; defaults to the model's last path component
    max_new_tokens: int = 512
    constraint: str = "none"
    type: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if self.constraint not in CONSTRAINTS:
            raise ValueError(f"constraint {self.constraint!r} unknown; choose from {list(CONSTRAINTS)}")
        if self.max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1")
        self.name = self.name or Path(self.model.rstrip("/")).name

    def build(self):
        raise NotImplementedError


@register_client("transformers")
@dataclass
class TransformersConfig(ClientConfig):
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: str = "auto"
    batch_size: int = 4
    attn_implementation: str | None = None
    # Forwarded to AutoProcessor.from_pretrained (e.g. min_pixels / max_pixels for Qwen).
    processor_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.batch_size < 1:
            raise ValueError("batch_size must be >= 1")

    def build(self):
        from sgvla.vlm.hf import TransformersBackend
        return TransformersBackend(self)


@register_client("openai")
@dataclass
class OpenAIConfig(ClientConfig):
    base_url: str = "http://127.0.0.1:8000/v1"
    api_key_env: str | None = None  # name of the environment variable holding the key
    timeout_s: float = 120.0
    max_retries: int = 3
    backoff_s: float = 1.0
    concurrency: int = 4
    max_image_bytes: int = 8_000_000  # per encoded image; larger ones are refused before sending
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.constraint == "grammar":
            raise ValueError("constraint 'grammar' is for local models; servers take 'json_schema'")
        if self.concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("need concurrency >= 1, max_retries >= 0, timeout_s > 0")

    def build(self):
        from sgvla.vlm.openai_api import OpenAIBackend
        return OpenAIBackend(self)


def client_config_from_mapping(data: dict, where: str) -> ClientConfig:
    data = dict(data)
    kind = data.pop("type", None)
    if kind not in CLIENT_TYPES:
        raise ConfigError(f"{where}.type: expected one of {sorted(CLIENT_TYPES)}, got {kind!r}")
    if "model" not in data:
        raise ConfigError(f"{where}.model: missing (a hub id, a local directory or a served model name)")
    return from_mapping(CLIENT_TYPES[kind], data, where)


def load_client_config(name_or_path: str | Path, overrides: dict[str, Any] | None = None) -> ClientConfig:
    """``config/vlm/clients/<name>.yaml`` or a YAML path, with ``key=value`` overrides applied."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = CLIENTS_DIR / f"{name_or_path}.yaml"
    data = load_yaml(path)
    data.update(overrides or {})
    return client_config_from_mapping(data, str(path))


def make_vlm(config: ClientConfig, prompt: PromptTemplate, ontology: Ontology):
    from sgvla.vlm.client import SceneGraphVLM
    return SceneGraphVLM(config.build(), prompt, ontology, constraint=config.constraint, name=config.name)
