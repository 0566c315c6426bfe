"""`sgvla make-tiny-vlm`: a tiny random Qwen2.5-VL and its client config, offline; a folder holding something else is
refused before anything is written (a real checkpoint there would be overwritten); its own folder is rewritten."""

import yaml

from sgvla.cli import main


def test_saves_a_model_and_its_client_and_refuses_a_foreign_folder(tmp_path, capsys):
    out = tmp_path / "tiny_vlm"
    assert main(["make-tiny-vlm", str(out)]) == 0
    client = yaml.safe_load((out / "client.yaml").read_text())
    assert client["type"] == "transformers" and client["model"] == str(out.absolute()) and client["device"] == "cpu"
    printed = capsys.readouterr()
    assert any(out.glob("*.safetensors")) and f"--client {out.absolute() / 'client.yaml'}" in printed.out
    assert "Writing model shards" not in printed.err + printed.out  # one line of what was made, no progress bar
    assert main(["make-tiny-vlm", str(out)]) == 0  # its own folder: made again

    foreign = tmp_path / "checkpoint"
    foreign.mkdir()
    (foreign / "model.safetensors").write_bytes(b"weights")
    assert main(["make-tiny-vlm", str(foreign)]) == 2
    assert "is not empty and holds no tiny VLM" in capsys.readouterr().err
    assert sorted(p.name for p in foreign.iterdir()) == ["model.safetensors"]
    assert (foreign / "model.safetensors").read_bytes() == b"weights"
