"""Client configs: one dataclass per backend type, chosen by the YAML key ``type``.

LeRobot style: the clients are registered choices of the kind :class:`~sgvla.vlm.client_config.ClientConfig`
(:class:`sgvla.core.registry.Choice`); each client module registers its own config (``transformers`` in
:mod:`sgvla.vlm.hf`, ``openai`` in :mod:`sgvla.vlm.openai_api`) and this module imports them all. A client file
(``config/vlm/clients/*.yaml``) loads through :func:`sgvla.core.config.load_config` like every config of sgvla:
an unknown client or option fails when it loads, with the valid ones in the message, and ``key=value`` overrides
nest as a plan's do (``processor_kwargs.max_pixels=...``). :func:`make_vlm` builds the backend (importing torch or
httpx only then, so the CLI starts fast).

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

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sgvla.core.config import ConfigError, from_mapping, load_config
from sgvla.paths import CONFIG_DIR
from sgvla.scene_graph.ontology import Ontology
from sgvla.vlm.client_config import ClientConfig
# Every client module, here once: each registers its config on ClientConfig (a new client adds its import here).
from sgvla.vlm.hf import TransformersConfig  # transformers
from sgvla.vlm.openai_api import OpenAIConfig  # openai
from sgvla.vlm.prompts import PromptTemplate

__all__ = ["CLIENTS_DIR", "ClientConfig", "OpenAIConfig", "TransformersConfig", "client_config_from_mapping",
           "load_client_config", "make_vlm"]
CLIENTS_DIR = CONFIG_DIR / "vlm" / "clients"


def client_config_from_mapping(data: Mapping[str, Any], where: str = "client") -> ClientConfig:
    """The registered client that ``data["type"]`` names, with the rest as its options."""
    return from_mapping(ClientConfig, data, where)


def load_client_config(name_or_path: str | Path, overrides: Mapping[str, Any] | None = None,
                       ontology: Ontology | None = None) -> ClientConfig:
    """``config/vlm/clients/<name>.yaml`` or a YAML path, with ``key=value`` overrides applied (dotted keys nest:
    ``processor_kwargs.max_pixels=...``, as :func:`sgvla.core.config.load_config` applies them everywhere); with an
    ontology, warns when ``max_new_tokens`` may not hold its full graph (see the module docstring)."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        path = CLIENTS_DIR / f"{name_or_path}.yaml"
        if not path.is_file():
            known = sorted(p.stem for p in CLIENTS_DIR.glob("*.yaml"))
            raise ConfigError(f"unknown VLM client {str(name_or_path)!r}; give a YAML path or one of {known}")
    config = load_config(ClientConfig, path, overrides)
    if ontology is not None:
        config.check_budget(ontology, str(path))
    return config


def make_vlm(config: ClientConfig, prompt: PromptTemplate, ontology: Ontology):
    from sgvla.vlm.client import SceneGraphVLM
    return SceneGraphVLM(config.build(), prompt, ontology, constraint=config.constraint, name=config.name)
