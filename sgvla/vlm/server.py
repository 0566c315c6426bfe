"""``sgvla vlm-serve``: a local model behind a minimal OpenAI-compatible chat endpoint.

It runs the same :class:`TransformersBackend` as local benchmarking, so HTTP and local answers
of one model are comparable, and it honours ``response_format`` JSON schemas (through xgrammar)
as vLLM does. Loopback only: it refuses to bind any other address.
"""


import base64
import io
import ipaddress
import json
import threading
import time
import uuid

import numpy as np

from sgvla.vlm.client import ChatRequest
from sgvla.vlm.constraints import Constraint

MAX_IMAGE_BYTES = 8_000_000


class BadRequest(ValueError):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def check_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"vlm-serve binds loopback addresses only (127.0.0.1, ::1), not {host!r}")


def _image(url: str, max_bytes: int) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    head, sep, data = url.partition(";base64,")
    if not sep or not head.startswith("data:image/"):
        raise BadRequest("only base64 data: image URLs are accepted (this server fetches nothing)")
    if len(data) * 3 // 4 > max_bytes:
        raise BadRequest(f"image too large: about {len(data) * 3 // 4} bytes > {max_bytes}", status=413)
    try:
        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB"))
    except (ValueError, UnidentifiedImageError) as exc:
        raise BadRequest(f"unreadable image: {exc}") from None


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")


def to_request(body: dict, max_image_bytes: int = MAX_IMAGE_BYTES) -> ChatRequest:
    """An OpenAI chat body as a backend request: system text, user images and text, schema."""
    if body.get("stream"):
        raise BadRequest("streaming is not supported")
    system, user, images = [], [], []
    for message in body.get("messages") or []:
        content = message.get("content") or ""
        if message.get("role") == "system":
            system.append(_text(content))
            continue
        user.append(_text(content))
        if isinstance(content, list):
            images += [_image(p["image_url"]["url"], max_image_bytes) for p in content if p.get("type") == "image_url"]
    if not user:
        raise BadRequest("no user message")
    constraint = None
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        schema = (fmt.get("json_schema") or {}).get("schema")
        if not isinstance(schema, dict):
            raise BadRequest("response_format.json_schema.schema must be an object")
        constraint = Constraint("json_schema", json.dumps(schema, sort_keys=True))
    max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise BadRequest(f"max_tokens must be a positive integer, got {max_tokens!r}")
    return ChatRequest(tuple(images), "\n".join(system), "\n".join(user), constraint, max_tokens)


def build_app(backend, max_image_bytes: int = MAX_IMAGE_BYTES):
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse

    app = FastAPI(title="sgvla vlm-serve")
    lock = threading.Lock()  # one generate() at a time on the one model

    @app.get("/health")
    def health():
        return {"status": "ok", "model": backend.model_id}

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": backend.model_id, "object": "model", "owned_by": "sgvla"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = await request.json()
            if not isinstance(body, dict):
                raise BadRequest("body must be a JSON object")
            chat_request = to_request(body, max_image_bytes)
        except BadRequest as exc:
            return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, exc.status)
        except ValueError as exc:
            return JSONResponse({"error": {"message": f"invalid JSON: {exc}", "type": "invalid_request_error"}}, 400)
        from starlette.concurrency import run_in_threadpool

        def generate():
            with lock:
                return backend.complete([chat_request])[0]

        completion = await run_in_threadpool(generate)
        if completion.error:
            return JSONResponse({"error": {"message": completion.error, "type": "server_error"}}, 500)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
            "model": backend.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": completion.text},
                         "finish_reason": completion.finish_reason}],
            "usage": {"prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens,
                      "total_tokens": (completion.prompt_tokens or 0) + (completion.completion_tokens or 0)},
        }

    return app
