"""The kind *VLM client*: :class:`ClientConfig`, a registry of client configs (:class:`sgvla.core.registry.Choice`).

Each client module registers its config with its typed options and builds its backend::

    @ClientConfig.register("openai")        # sgvla/vlm/openai_api.py
    @dataclass
    class OpenAIConfig(ClientConfig):
        base_url: str = "http://127.0.0.1:8000/v1"
        def build(self): return OpenAIBackend(self)

This module imports no client; :mod:`sgvla.vlm.config` imports every client module and loads the YAML files
(``type: openai`` names the client), so an unknown client or option fails when the config loads, with the valid ones
in the message. Token budget: see :mod:`sgvla.vlm.config`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sgvla.core.registry import Choice
from sgvla.scene_graph.ontology import Ontology
from sgvla.vlm.constraints import CONSTRAINTS, full_graph_tokens

log = logging.getLogger("sgvla.vlm.config")  # where readers of the budget warning look (sgvla.vlm.config)


@dataclass
class ClientConfig(Choice, kind="VLM client"):
    model: str  # a hub id, a local directory or a served model name
    name: str = ""  # label in tables and records; defaults to the model's last path component
    max_new_tokens: int = 4096  # holds a full graph of every shipped ontology (see sgvla.vlm.config)
    constraint: str = "none"

    def __post_init__(self) -> None:
        if not self.type:
            raise TypeError(f"ClientConfig is the kind of VLM client; build a registered one: {sorted(self.choices())}")
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
        """The backend (a :class:`sgvla.vlm.client.Backend`); heavy libraries (torch, httpx) load only here."""
        raise NotImplementedError
