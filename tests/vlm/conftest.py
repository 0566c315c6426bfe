"""Fixtures: a tiny random Qwen2.5-VL saved and reloaded like a real checkpoint, annotated
LIBERO-layout files, the model behind a real HTTP server, and a scriptable stub server for
the error paths. Everything binds 127.0.0.1 and nothing is downloaded."""

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

STOVE_TASK = "pick up the black bowl on the stove and place it on the plate"
PLATE_TASK = "pick up the black bowl next to the plate and place it on the plate"
FIXED_GRAPH = [("akita_black_bowl_1", "is_left_of", "plate_1"), ("plate_1", "is_right_of", "akita_black_bowl_1"),
               ("akita_black_bowl_2", "is_behind", "cookies_1"), ("cookies_1", "is_in_front_of", "akita_black_bowl_2")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def closed_port() -> int:
    """A loopback port nothing listens on."""
    return free_port()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    from sgvla.vlm.tiny import build_tiny_qwen2_5_vl

    return build_tiny_qwen2_5_vl(tmp_path_factory.mktemp("tiny_qwen2_5_vl"))


@pytest.fixture(scope="session")
def tiny_backend(tiny_model_dir):
    from sgvla.vlm.config import TransformersConfig

    backend = TransformersConfig(model=str(tiny_model_dir), name="tiny-qwen", max_new_tokens=32, batch_size=4).build()
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def libero_dir(tmp_path_factory):
    """Two annotated files (tasks 7 and 8), 2 demos of 6 frames each, random graphs."""
    from sgvla.vlm.tiny import write_annotated_libero_file

    folder = tmp_path_factory.mktemp("libero")
    write_annotated_libero_file(folder / "pick_up_the_black_bowl_on_the_stove_and_place_it_on_the_plate_demo.hdf5",
                                STOVE_TASK, seed=1)
    write_annotated_libero_file(folder / "next_to_plate.hdf5", PLATE_TASK, seed=2)
    return folder


@pytest.fixture(scope="session")
def fixed_graph():
    return FIXED_GRAPH


@pytest.fixture(scope="session")
def fixed_dir(tmp_path_factory):
    """Two annotated files (tasks 7 and 8), 1 demo of 3 frames each, FIXED_GRAPH in every frame."""
    from sgvla.vlm.tiny import write_annotated_libero_file

    folder = tmp_path_factory.mktemp("fixed")
    write_annotated_libero_file(folder / "a.hdf5", STOVE_TASK, demos=1, frames=3, graph=FIXED_GRAPH)
    write_annotated_libero_file(folder / "b.hdf5", PLATE_TASK, demos=1, frames=3, graph=FIXED_GRAPH)
    return folder


@pytest.fixture(scope="session")
def model_server(tiny_backend):
    """`sgvla vlm-serve`'s app around the tiny model, on a free loopback port in this process."""
    import uvicorn

    from sgvla.vlm.server import build_app

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(build_app(tiny_backend), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("vlm-serve app did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(10)


class Stub:
    """Answers chat completions by mode, the first path segment: ok, slow, malformed, empty,
    nochoices, flaky (503 on every other call), big (413), error500 (500), garbage (a reply without
    a triplet), stall (answers after 5 s), cut (the answer as JSON, cut 5 characters short, finish_reason
    "length"), gate (500 until `gate_open` is set), once<name> (ok the first time, 500 after), partial (the
    answer plus two lines that are no triplet of the ontology)."""

    def __init__(self) -> None:
        self.answer = "\n".join(f"({s}, {r}, {o})" for s, r, o in FIXED_GRAPH)
        self.calls: list[tuple[str, dict]] = []
        self.lock = threading.Lock()
        self.gate_open = False

    def url(self, mode: str) -> str:
        return f"http://127.0.0.1:{self.port}/{mode}/v1"


def completion(content: str, finish_reason: str) -> bytes:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                    "finish_reason": finish_reason}],
                       "usage": {"prompt_tokens": 10, "completion_tokens": 5}}).encode()


@pytest.fixture(scope="session")
def stub():
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status: int, body: bytes) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        def do_POST(self):
            mode = self.path.strip("/").split("/")[0]
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with state.lock:
                state.calls.append((mode, body))
                n = sum(m == mode for m, _ in state.calls)
            if mode == "slow":
                time.sleep(1.0)
            if mode == "stall":
                time.sleep(5.0)
            if mode == "error500" or (mode == "gate" and not state.gate_open) or (mode.startswith("once") and n > 1):
                return self.reply(500, b'{"error": {"message": "internal server error"}}')
            if mode == "garbage":
                return self.reply(200, completion("I am not sure what the image shows.", "stop"))
            if mode == "cut":
                items = [{"subject": s, "relation": r, "object": o} for s, r, o in FIXED_GRAPH]
                answer = json.dumps({"triplets": items})
                return self.reply(200, completion(answer[:-5], "length"))
            if mode == "malformed":
                return self.reply(200, b'{"choices": [ not json')
            if mode == "nochoices":
                return self.reply(200, b'{"object": "chat.completion"}')
            if mode == "big":
                return self.reply(413, b'{"error": {"message": "image too large"}}')
            if mode == "partial":
                extra = "\n(black_bowl_1, is_floating_over, plate_1)\n(unicorn_1, is_on, plate_1)"
                return self.reply(200, completion(state.answer + extra, "stop"))
            if mode == "flaky" and n % 2 == 1:
                return self.reply(503, b'{"error": {"message": "overloaded"}}')
            self.reply(200, completion("" if mode == "empty" else state.answer, "stop"))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()
