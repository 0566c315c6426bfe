"""Append-only JSONL of answers, keyed by frame: a rerun skips every frame already answered.

Lines are flushed as they are written, so a killed run loses at most the line being written
(a torn last line is ignored on reload). A query that failed (no answer: the server was down, the
model did not load, a timeout) is logged with its error but is no answer: it does not count as
finished, the next run asks again, and the benchmark leaves it out of the scores.

One cache holds the answers of one set of :func:`answer_settings` (the model and its revision, every
client setting that reaches generation, the constraint and the prompt's identity): its file is named by
their hash (:func:`settings_key`) and ``<file>.settings.json`` stores them, so two models' answers never
mix and a rerun with the same settings reuses its cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

# Client settings that cannot change an answer, only whether and how fast one comes (and the label, which names the
# cache file anyway): the same set `sgvla eval` allows to differ on resume, plus the image size guard.
HARMLESS = frozenset({"name", "concurrency", "timeout_s", "max_retries", "backoff_s", "api_key_env",
                      "max_image_bytes"})
_WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".json", ".model", ".txt", ".jinja", ".gguf")


def model_revision(config: Any) -> str | None:
    """What identifies the weights behind a local model beyond its path or id: for a local directory, a hash of its
    weight, config and tokenizer files (name, size, modification time; a retrained checkpoint in the same folder
    differs); for a hub id, the commit of the snapshot in the local Hugging Face cache. None for a served model
    (the server decides) or a hub id not cached here."""
    if config.type != "transformers":
        return None
    path = Path(config.model).expanduser()
    if path.is_dir():
        files = sorted((f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in path.iterdir()
                       if f.is_file() and f.suffix in _WEIGHT_FILES)
        return "dir:" + hashlib.sha256(json.dumps(files).encode()).hexdigest()[:12]
    hub = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")) / "hub")
    ref = hub.expanduser() / f"models--{config.model.replace('/', '--')}" / "refs" / "main"
    try:
        return "hub:" + ref.read_text().strip()
    except OSError:
        return None


def answer_settings(config: Any, prompt: Any) -> dict[str, Any]:
    """Everything that changes an answer: the client's type, model, revision and every option that reaches generation
    (max_new_tokens, constraint, dtype, device, batch_size, processor_kwargs, base_url, extra_body, ...; not those in
    `HARMLESS`), and the prompt's identity (name, version and a hash of its text)."""
    options = {k: v for k, v in dataclasses.asdict(config).items() if k not in HARMLESS}
    return {"type": config.type, **options, "revision": model_revision(config), "prompt": dict(prompt.identity)}


def settings_key(settings: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:10]


def settings_path(path: str | Path) -> Path:
    path = Path(path)
    return path.with_name(path.name + ".settings.json")


def setting_differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    """``key: old -> new`` for every setting that differs (nested ones as ``a.b``)."""
    diffs = []
    for key in [*new, *(k for k in old if k not in new)]:
        before, after = old.get(key, "(not set)"), new.get(key, "(not set)")
        if isinstance(before, dict) and isinstance(after, dict):
            diffs += setting_differences(before, after, f"{prefix}{key}.")
        elif before != after:
            diffs.append(f"{prefix}{key}: {before} -> {after}")
    return diffs


class AnswerCache:
    """Answers by frame key. With `settings`, they are stored beside the file (``<file>.settings.json``) and must
    match the stored ones: a cache of other settings is refused (`ValueError` naming the differences), never read."""

    def __init__(self, path: str | Path, settings: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.records: dict[str, dict] = {}
        if settings is not None:
            self._check_settings(settings)
        if self.path.is_file():
            self._load()
        self._file = None  # opened at the first answer: a run that asks nothing leaves no empty file

    def _load(self) -> None:
        torn = 0
        with self.path.open(encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                    self.records[record["key"]] = record
                except (ValueError, KeyError, TypeError):
                    torn += 1
        if torn:
            log.warning("%s: ignored %d unreadable line(s)", self.path, torn)

    def _check_settings(self, settings: dict[str, Any]) -> None:
        stored = settings_path(self.path)
        plain = json.loads(json.dumps(settings, default=str))
        if stored.is_file():
            diffs = setting_differences(json.loads(stored.read_text()), plain)
            if diffs:
                raise ValueError(f"{self.path}: its answers were made with other settings ({'; '.join(diffs)}); "
                                 "they are not reused")
        elif self.path.is_file():
            raise ValueError(f"{self.path}: answers without stored settings ({stored.name} is missing), so which "
                             "model made them is unknown; move the file away")
        else:
            stored.parent.mkdir(parents=True, exist_ok=True)
            stored.write_text(json.dumps(plain, indent=1, sort_keys=True) + "\n")

    def finished(self, key: str) -> bool:
        record = self.records.get(key)
        return record is not None and not record.get("error")

    def add(self, record: dict) -> None:
        self.records[record["key"]] = record
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torn_tail = self.path.is_file() and self.path.stat().st_size and not self.path.read_bytes().endswith(b"\n")
            self._file = self.path.open("a", encoding="utf-8")
            if torn_tail:
                self._file.write("\n")
        self._file.write(json.dumps(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> AnswerCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
