"""Client configs: one dataclass per backend type, chosen by the YAML key ``type``.

LeRobot style: a registry maps ``type`` to its config class, and :func:`make_vlm` builds the
backend (importing torch or httpx only then, so the CLI starts fast). Every field is checked when
the config loads, with the valid values in the message.

Token budget: ``max_new_tokens`` defaults to 4096, which holds a full graph of every shipped
ontology in the constrained JSON form (:func:`sgvla.vlm.constraints.full_graph_tokens`: 3897 for
LIBERO-Spatial's 7 objects, 1619 for the SO101 tabletop). Loading a config for an ontology whose full
graph needs more than ``max_new_tokens`` logs a warning with the number needed; it is not refused,
because that number is an upper bound that holds for any byte-level tokenizer (a real one packs several
bytes into most tokens and needs fewer, so a smaller budget can be right for a given model), and small budgets are
legitimate for quick runs and tiny test models. What is exact is the per-answer check: an answer cut
at the limit is flagged ``truncated`` in every record and table, and keeps its complete triplets.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sgvla.core.config import ConfigError, from_mapping, load_yaml
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import Ontology
from sgvla.vlm.constraints import CONSTRAINTS, full_graph_tokens
from sgvla.vlm.prompts import PromptTemplate

log = logging.getLogger(__name__)
CLIENTS_DIR = CONFIG_DIR / "vlm" / "clients"
CLIENT_TYPES: dict[str, type[ClientConfig]] = {}
DEVICES = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DTYPES = ("auto", "float32", "float16", "bfloat16")
ATTENTION = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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
    max_new_tokens: int = 4096  # holds a full graph of every shipped ontology (see the module docstring)
    constraint: str = "none"
    type: ClassVar[str] = ""

    def __post_init__(self) -> None:
        if not self.model.strip("/ "):
            raise ValueError("model is empty; give a hub id, a local directory or a served model name")
        if self.constraint not in CONSTRAINTS:
            raise ValueError(f"constraint {self.constraint!r} unknown; choose from {list(CONSTRAINTS)}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        self.name = self.name or Path(self.model.rstrip("/")).name

    def check_budget(self, ontology: Ontology, where: str = "") -> bool:
        """Warn when ``max_new_tokens`` may not hold a full graph of ``ontology``; True when it does."""
        needed = full_graph_tokens(ontology.objects)
        if self.max_new_tokens >= needed:
            return True
        log.warning("%smax_new_tokens %d may not hold a full graph of %s (%d objects): that takes up to %d tokens "
                    "in the constrained JSON form; answers cut at the limit are flagged `truncated` and keep their "
                    "complete triplets", f"{where}: " if where else "", self.max_new_tokens, ontology.name,
                    len(ontology.objects), needed)
        return False

    def check_environment(self) -> None:
        """Raise ConfigError for what the machine lacks to build this client (API keys); nothing is loaded."""

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
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not DEVICES.match(self.device):
            raise ValueError(f"device {self.device!r} unknown; choose auto, cpu, mps, cuda or cuda:N")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype {self.dtype!r} unknown; choose from {list(DTYPES)}")
        if self.attn_implementation is not None and self.attn_implementation not in ATTENTION \
                and "/" not in self.attn_implementation:
            raise ValueError(f"attn_implementation {self.attn_implementation!r} unknown; choose from "
                             f"{list(ATTENTION)} or a kernels hub id (owner/name)")

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
            raise ValueError("constraint 'grammar' is for local models; servers take 'json_schema' or 'none'")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url {self.base_url!r} must start with http:// or https://")
        bounds = {"concurrency": (self.concurrency, 1), "max_retries": (self.max_retries, 0),
                  "backoff_s": (self.backoff_s, 0), "max_image_bytes": (self.max_image_bytes, 1)}
        for key, (value, low) in bounds.items():
            if value < low:
                raise ValueError(f"{key} must be >= {low}, got {value}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {self.timeout_s}")
        if self.api_key_env is not None and not ENV_NAME.match(self.api_key_env):
            raise ValueError(f"api_key_env {self.api_key_env!r} is not an environment variable name "
                             "(it names the variable holding the key, never the key itself)")

    def check_environment(self) -> None:
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ConfigError(f"client {self.name!r} needs an API key in the environment variable "
                              f"{self.api_key_env} (its api_key_env), which is not set; export it first")

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


def load_client_config(name_or_path: str | Path, overrides: dict[str, Any] | None = None,
                       ontology: Ontology | None = None) -> ClientConfig:
    """``config/vlm/clients/<name>.yaml`` or a YAML path, with ``key=value`` overrides applied; with an
    ontology, warns when ``max_new_tokens`` may not hold its full graph (see the module docstring)."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = CLIENTS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in CLIENTS_DIR.glob("*.yaml"))
            raise ConfigError(f"unknown VLM client {str(name_or_path)!r}; give a YAML path or one of {known}")
    data = load_yaml(path)
    data.update(overrides or {})
    config = client_config_from_mapping(data, str(path))
    if ontology is not None:
        config.check_budget(ontology, str(path))
    return config


def make_vlm(config: ClientConfig, prompt: PromptTemplate, ontology: Ontology):
    from sgvla.vlm.client import SceneGraphVLM
    return SceneGraphVLM(config.build(), prompt, ontology, constraint=config.constraint, name=config.name)
