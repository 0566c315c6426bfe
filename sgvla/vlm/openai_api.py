"""Any OpenAI-compatible chat server: vLLM, Ollama, llama.cpp, ``transformers serve``,
``sgvla vlm-serve``, Gemini's OpenAI endpoint.

Requests run concurrently up to a limit; connection failures, timeouts and overload answers
(408/429/5xx) are retried with exponential backoff. Whatever still fails becomes an error on
that frame's completion, so one bad frame never stops a benchmark run. The client ``type: openai``
(:class:`OpenAIConfig`); httpx loads only when a backend is built.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sgvla.core.config import ConfigError
from sgvla.vlm.client import ChatRequest, Completion
from sgvla.vlm.client_config import ClientConfig

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@ClientConfig.register("openai")
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

    def build(self) -> OpenAIBackend:
        return OpenAIBackend(self)


class ImageTooLarge(ValueError):
    pass


def image_data_url(image: np.ndarray, max_bytes: int) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buffer, format="PNG")
    data = buffer.getvalue()
    if len(data) > max_bytes:
        raise ImageTooLarge(f"image too large: {image.shape[1]}x{image.shape[0]} encodes to {len(data)} bytes "
                            f"> max_image_bytes {max_bytes}")
    return "data:image/png;base64," + base64.b64encode(data).decode()


def chat_payload(config: OpenAIConfig, request: ChatRequest) -> dict:
    content = [{"type": "image_url", "image_url": {"url": image_data_url(im, config.max_image_bytes)}}
               for im in request.images]
    content.append({"type": "text", "text": request.user})
    chat = [{"role": "user", "content": content}]
    if request.system:
        chat.insert(0, {"role": "system", "content": request.system})
    payload = {"model": config.model, "messages": chat, "max_tokens": request.max_new_tokens or config.max_new_tokens,
               "temperature": 0.0, **config.extra_body}
    if request.constraint is not None:
        if request.constraint.kind != "json_schema":
            raise ValueError(f"servers take json_schema constraints, not {request.constraint.kind!r}")
        payload["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "scene_graph", "strict": True, "schema": json.loads(request.constraint.spec)}}
    return payload


class OpenAIBackend:
    def __init__(self, config: OpenAIConfig) -> None:
        import httpx

        self.config = config
        self.model_id = config.name
        config.check_environment()
        headers = {"Authorization": f"Bearer {os.environ[config.api_key_env]}"} if config.api_key_env else {}
        self._httpx = httpx
        self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.client = httpx.Client(headers=headers, timeout=httpx.Timeout(config.timeout_s),
                                   limits=httpx.Limits(max_connections=config.concurrency))

    def complete(self, requests: Sequence[ChatRequest]) -> list[Completion]:
        if len(requests) <= 1 or self.config.concurrency == 1:
            return [self._one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(requests))) as pool:
            return list(pool.map(self._one, requests))

    def _one(self, request: ChatRequest) -> Completion:
        start = time.perf_counter()
        try:
            payload = chat_payload(self.config, request)
        except ValueError as exc:
            return Completion("", 0.0, error=str(exc), attempts=0)
        error = ""
        for attempt in range(1, self.config.max_retries + 2):
            if attempt > 1:
                time.sleep(min(self.config.backoff_s * 2 ** (attempt - 2), MAX_BACKOFF_S))
            try:
                response = self.client.post(self.url, json=payload)
            except self._httpx.TimeoutException:
                error = f"timed out after {self.config.timeout_s:g} s ({self.url})"
                continue
            except self._httpx.TransportError as exc:
                error = f"cannot reach {self.url}: {type(exc).__name__}: {exc}"
                continue
            if response.status_code in RETRY_STATUS:
                error = f"HTTP {response.status_code} from {self.url}: {response.text[:200]}"
                continue
            elapsed = time.perf_counter() - start
            if response.status_code >= 400:
                return Completion("", elapsed, error=f"HTTP {response.status_code} from {self.url}: "
                                  f"{response.text[:300]}", attempts=attempt)
            return _completion(response, elapsed, attempt)
        return Completion("", time.perf_counter() - start,
                          error=f"{error} (gave up after {self.config.max_retries + 1} tries)",
                          attempts=self.config.max_retries + 1)

    def close(self) -> None:
        self.client.close()


def _completion(response, elapsed: float, attempts: int) -> Completion:
    try:
        body = response.json()
        choice = body["choices"][0]
        text = choice["message"]["content"] or ""
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        return Completion("", elapsed, error=f"malformed response ({type(exc).__name__}: {exc}): "
                          f"{response.text[:200]!r}", attempts=attempts)
    usage = body.get("usage") or {}
    return Completion(text, elapsed, usage.get("prompt_tokens"), usage.get("completion_tokens"),
                      choice.get("finish_reason"), attempts=attempts)
