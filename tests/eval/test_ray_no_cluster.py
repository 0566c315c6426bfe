"""`executor: ray` with no cluster at `executor.address`: the run stops at once with what to do. Ray's driver would
retry an address with nothing behind it forever (a warning every few seconds), so the address is probed first. Nothing
here starts or reaches Ray: the probe only tries a TCP connection to a closed loopback port."""

import socket

import sgvla.plugins  # noqa: F401
from sgvla.cli import main
from sgvla.eval.ray_executor import unreachable


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the test uses it: nothing listens there


def test_unreachable_names_a_closed_address_and_leaves_auto_to_ray():
    port = closed_port()
    assert unreachable(f"127.0.0.1:{port}").startswith(f"nothing answers at 127.0.0.1:{port} (")
    assert unreachable(f"ray://127.0.0.1:{port}").startswith(f"nothing answers at 127.0.0.1:{port}")
    assert unreachable("auto") == ""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        assert unreachable(f"127.0.0.1:{listening.getsockname()[1]}") == ""


def test_sgvla_eval_on_ray_with_no_cluster_stops_with_what_to_do(tmp_path, capsys):
    port = closed_port()
    code = main(["eval", "--config", "config/eval/default.yaml", "--quiet", "tasks=[0]", "episodes=1",
                 "policies=[{type: prompt_grounded}]", "modes=[standard]", "executor=ray",
                 f"executor.address=127.0.0.1:{port}", "--out", str(tmp_path / "run")])
    out = " ".join(capsys.readouterr().out.split())
    assert code != 0, out
    assert (f"cannot reach a Ray cluster at executor.address=127.0.0.1:{port} (ConnectionError: nothing "
            "answers") in out, out
    assert "ray start --head" in out and "executor=local" in out, out
