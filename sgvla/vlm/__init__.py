"""VLM scene graphs: query any VLM for triplets and benchmark it against ground truth.

One interface (:class:`SceneGraphVLM`) over local Hugging Face models and OpenAI-compatible
servers; versioned prompts; optional constrained decoding; the offline benchmark
(``sgvla vlm-bench``), the real-robot resource (``sgvla vlm-annotate``), a local server
(``sgvla vlm-serve``) and a non-blocking live worker for control loops.
"""

from sgvla.vlm.client import ChatRequest, Completion, GraphAnswer, GraphQuery, SceneGraphVLM
from sgvla.vlm.config import ClientConfig, OpenAIConfig, TransformersConfig, load_client_config, make_vlm
from sgvla.vlm.constraints import Constraint, make_constraint, triplet_grammar, triplet_schema
from sgvla.vlm.live import LatestFrameWorker, LiveGraph
from sgvla.vlm.prompts import PromptTemplate, load_prompt

__all__ = [
    "ChatRequest", "ClientConfig", "Completion", "Constraint", "GraphAnswer", "GraphQuery",
    "LatestFrameWorker", "LiveGraph", "OpenAIConfig", "PromptTemplate", "SceneGraphVLM", "TransformersConfig",
    "load_client_config", "load_prompt", "make_constraint", "make_vlm", "triplet_grammar",
    "triplet_schema",
]
