"""Local Hugging Face VLMs (``AutoModelForImageTextToText`` + ``AutoProcessor``): greedy, batched.

Any chat VLM whose processor has a chat template works: Qwen2.5-VL, Qwen3-VL, InternVL,
SmolVLM, Gemma. Constrained decoding masks logits with an xgrammar matcher per sequence. The client
``type: transformers`` (:class:`TransformersConfig`); torch and transformers load only when a backend is built.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sgvla.vlm.client import ChatRequest, Completion
from sgvla.vlm.client_config import ClientConfig
from sgvla.vlm.constraints import Constraint

DEVICES = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
DTYPES = ("auto", "float32", "float16", "bfloat16")
ATTENTION = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention")


@ClientConfig.register("transformers")
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

    def build(self) -> TransformersBackend:
        return TransformersBackend(self)


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def messages(request: ChatRequest) -> list[dict]:
    """OpenAI-style chat with the images first, as the VLM papers' prompts place them."""
    user = [{"type": "image"} for _ in request.images] + [{"type": "text", "text": request.user}]
    chat = [{"role": "user", "content": user}]
    if request.system:
        chat.insert(0, {"role": "system", "content": [{"type": "text", "text": request.system}]})
    return chat


class TransformersBackend:
    def __init__(self, config: TransformersConfig) -> None:
        import torch
        from transformers import AutoModelForImageTextToText, AutoProcessor

        self.config = config
        self.model_id = config.name
        self.device = _device(config.device)
        try:
            self.processor = AutoProcessor.from_pretrained(config.model, **config.processor_kwargs)
            self.model = AutoModelForImageTextToText.from_pretrained(
                config.model, dtype=config.dtype, attn_implementation=config.attn_implementation
            ).to(self.device).eval()
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"cannot load VLM {config.model!r}: {exc}") from exc
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.generation = self.model.generation_config
        self.generation.update(do_sample=False, temperature=None, top_p=None, top_k=None,
                               max_new_tokens=config.max_new_tokens,
                               pad_token_id=self.tokenizer.pad_token_id)
        eos = self.generation.eos_token_id
        self.stop_ids = set(eos if isinstance(eos, list) else [eos]) - {None}
        self._torch = torch
        self._compiler = None
        self._grammars: dict[Constraint, object] = {}

    def _compiled(self, constraint: Constraint):
        """The constraint compiled for this tokenizer, once per distinct vocabulary."""
        if constraint not in self._grammars:
            import xgrammar as xgr

            if self._compiler is None:
                info = xgr.TokenizerInfo.from_huggingface(
                    self.tokenizer, vocab_size=self.model.get_output_embeddings().weight.shape[0],
                    stop_token_ids=sorted(self.stop_ids) or None,
                )
                self._compiler = xgr.GrammarCompiler(info)
            if constraint.kind == "grammar":
                compiled = self._compiler.compile_grammar(constraint.spec)
            else:
                compiled = self._compiler.compile_json_schema(constraint.spec, any_whitespace=False)
            self._grammars[constraint] = compiled
        return self._grammars[constraint]

    def complete(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        out: list[Completion] = []
        size = self.config.batch_size
        for i in range(0, len(requests), size):
            out += self._batch(requests[i : i + size])
        return out

    def _batch(self, batch: Sequence[ChatRequest]) -> list[Completion]:
        from PIL import Image

        start = time.perf_counter()
        try:
            texts = [self.processor.apply_chat_template(messages(r), add_generation_prompt=True, tokenize=False)
                     for r in batch]
            images = [[Image.fromarray(np.ascontiguousarray(im)) for im in r.images] for r in batch]
            inputs = self.processor(text=texts, images=images if any(images) else None,
                                    padding=True, return_tensors="pt").to(self.device)
            kwargs = {}
            if batch[0].constraint is not None:
                from xgrammar.contrib.hf import LogitsProcessor

                kwargs["logits_processor"] = [LogitsProcessor([self._compiled(r.constraint) for r in batch])]
            limit = max(r.max_new_tokens or self.config.max_new_tokens for r in batch)
            with self._torch.inference_mode():
                output = self.model.generate(**inputs, generation_config=self.generation, max_new_tokens=limit,
                                             **kwargs)
        except (RuntimeError, ValueError, TypeError) as exc:
            elapsed = (time.perf_counter() - start) / len(batch)
            return [Completion("", elapsed, error=f"generation failed: {type(exc).__name__}: {exc}") for _ in batch]
        elapsed = (time.perf_counter() - start) / len(batch)
        prompt_len = inputs["input_ids"].shape[1]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        results = []
        for row, n_prompt in zip(output[:, prompt_len:].tolist(), prompt_tokens):
            stop = next((k for k, t in enumerate(row) if t in self.stop_ids), None)
            tokens = row if stop is None else row[: stop + 1]
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            results.append(Completion(text, elapsed, int(n_prompt), len(tokens),
                                      "length" if stop is None else "stop"))
        return results

    def close(self) -> None:
        self.model = None
