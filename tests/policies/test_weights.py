"""A learned policy is evaluated only with the weights it was given (`sgvla.policies.weights`).

Every LeRobot type sgvla names (act, smolvla, pi0, pi05) is refused, with one line naming the file, when its
model.safetensors is truncated, missing, or holds a wrong shape, an extra or a missing key. The broken files are
crafted from the policy's own keys: for pi0/pi05 (2-4e9 parameters) as sparse files whose header is exact and whose
data is holes, so nothing full-size is built or read (the check reads the header and a meta-device model). A folder
without weights runs only with `random_weights: true`, and its records and report say so; records and the stored
plan carry the weights' provenance (the file's SHA-256)."""

import json
import shutil
import struct
from pathlib import Path

import pytest
import yaml

import sgvla.plugins  # noqa: F401  (plans name registered suites and policies)

from sgvla.policies.checkpoint import checkpoint_config
from sgvla.policies.registry import make_policy
from sgvla.policies.weights import WEIGHTS_FILE, WeightsError, check_weights, file_sha256, meta_model

KINDS = ("act", "smolvla", "pi0", "pi05")
DTYPES = {"torch.float32": ("F32", 4), "torch.bfloat16": ("BF16", 2), "torch.float16": ("F16", 2),
          "torch.int64": ("I64", 8), "torch.bool": ("BOOL", 1)}


@pytest.fixture(scope="module")
def folders(tiny_act_dir, tiny_smolvla_dir, weightless_pi_dirs) -> dict[str, Path]:
    return {"act": tiny_act_dir, "smolvla": tiny_smolvla_dir, **weightless_pi_dirs}


@pytest.fixture(scope="module")
def saved_shapes(folders) -> dict[str, dict]:
    """Each type's keys as its save_pretrained writes them: name -> (dtype, shape), from the meta-device model."""
    out = {}
    for kind, folder in folders.items():
        state = meta_model(checkpoint_config(str(folder), "cpu")).state_dict()
        out[kind] = {key: (str(t.dtype), tuple(t.shape)) for key, t in state.items()}
    return out


def write_sparse_safetensors(file: Path, tensors: dict[str, tuple[str, tuple]], cut: int = 0) -> None:
    """A safetensors file with an exact header and zero data (a hole: no disk, nothing read); `cut` bytes short."""
    header, offset = {}, 0
    for key, (dtype, shape) in tensors.items():
        name, size = DTYPES[dtype]
        n = size
        for d in shape:
            n *= d
        header[key] = {"dtype": name, "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(file, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset - cut)


def broken(folder: Path, out: Path, tensors: dict | None, cut: int = 0) -> Path:
    """`folder`'s config and processors, with `tensors` as its weights (None: no weights file)."""
    shutil.copytree(folder, out, ignore=shutil.ignore_patterns(WEIGHTS_FILE))
    if tensors is not None:
        write_sparse_safetensors(out / WEIGHTS_FILE, tensors, cut)
    return out


def cases(shapes: dict) -> dict[str, tuple[dict | None, int, str]]:
    """case -> (tensors, bytes cut, what the refusal says)."""
    first, (dtype, shape) = next((k, v) for k, v in shapes.items() if len(v[1]) == 2)
    wrong = {**shapes, first: (dtype, (shape[0] + 1, shape[1]))}
    fewer = {k: v for k, v in shapes.items() if k != first}
    return {
        "truncated": (shapes, 1000, "cannot be read: .*incomplete metadata, file not fully covered"),
        "missing": (None, 0, "missing: the checkpoint has no weights"),
        "wrong_shape": (wrong, 0, rf"1 mis-shaped \({first} \[{shape[0] + 1}, {shape[1]}\] in the file"),
        "extra_key": ({**shapes, "model.surplus.weight": ("torch.float32", (2, 2))}, 0, "1 unexpected keys"),
        "missing_key": (fewer, 0, rf"1 of the model's {len(shapes)} keys missing \({first}\)"),
    }


@pytest.mark.parametrize("case", ["truncated", "missing", "wrong_shape", "extra_key", "missing_key"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_broken_checkpoint_is_refused_in_one_line_naming_its_file(kind, case, folders, saved_shapes, tmp_path):
    tensors, cut, says = cases(saved_shapes[kind])[case]
    folder = broken(folders[kind], tmp_path / kind, tensors, cut)
    for given in (kind, "lerobot"):  # the policy's own type, and any LeRobot type
        with pytest.raises(WeightsError) as refused:
            make_policy(given, path=str(folder))
        line = str(refused.value)
        print(f"{kind} {case}: {line}")
        assert "\n" not in line and line.startswith(str(folder / WEIGHTS_FILE) + ": "), line
        assert __import__("re").search(says, line), line


@pytest.mark.parametrize("kind", ["pi0", "pi05"])
def test_an_exact_pi_header_passes_the_check(kind, folders, saved_shapes, tmp_path):
    """The crafted pi0/pi05 files are refused for what was broken, not for how they were made."""
    from sgvla.policies.weights import header_shapes, key_problems

    folder = broken(folders[kind], tmp_path / kind, saved_shapes[kind])
    model = meta_model(checkpoint_config(str(folder), "cpu"))
    assert key_problems(model, header_shapes(folder / WEIGHTS_FILE)) == ""


@pytest.mark.parametrize("kind", ["act", "smolvla"])
def test_a_saved_checkpoint_loads_with_its_provenance(kind, folders):
    policy = make_policy(kind, path=str(folders[kind]))
    assert policy.provenance.sha256 == file_sha256(folders[kind] / WEIGHTS_FILE) and not policy.provenance.random
    with pytest.raises(WeightsError, match="weights_sha256 0+ given, but its weights' SHA-256 is"):
        make_policy(kind, path=str(folders[kind]), weights_sha256="0" * 64)


def test_random_weights_need_a_folder_without_weights(folders, tmp_path):
    with pytest.raises(WeightsError, match="random_weights: true, but the checkpoint holds weights"):
        make_policy("act", path=str(folders["act"]), random_weights=True)
    weightless = broken(folders["act"], tmp_path / "act", None)
    policy = make_policy("act", path=str(weightless), random_weights=True)
    assert policy.provenance.random and policy.provenance.sha256 is None
    assert check_weights(str(weightless), policy.cfg, random_weights=True).record_facts()["random_weights"] is True


def test_sgvla_eval_refuses_a_broken_checkpoint_before_the_first_episode(folders, saved_shapes, tmp_path, capsys):
    from sgvla.cli import main

    folder = broken(folders["pi05"], tmp_path / "pi05", cases(saved_shapes["pi05"])["missing_key"][0])
    out = tmp_path / "run"
    code = main(["eval", "--config", "config/eval/default.yaml", "--out", str(out), "--quiet", "tasks=[0]", "episodes=1",
                 f"policies=[{{type: pi05, path: {folder}}}]"])
    printed = capsys.readouterr().out.strip()
    assert code == 2 and printed.count("\n") == 0, printed
    assert printed.startswith(f"sgvla eval: {folder / WEIGHTS_FILE}: does not match the pi05 policy"), printed
    assert not (out / "episodes.jsonl").exists()


@pytest.mark.sim
def test_records_and_report_carry_the_weights_provenance(folders, tmp_path):
    """One episode each of a saved ACT and of a random one (on purpose): the records say which weights ran, the stored
    plan pins the file's hash, the report marks the random arm."""
    from sgvla.eval.report import markdown_table
    from sgvla.eval.runner import run_plan

    from ..eval.plans import records_by_key, small_config

    weightless = broken(folders["act"], tmp_path / "random_act", None)
    policies = [{"type": "act", "path": str(folders["act"])},
                {"type": "act", "path": str(weightless), "random_weights": True, "name": "random_act"}]
    out = tmp_path / "run"
    cfg = small_config(out, policies=policies, modes=["standard"], perturbations="ambiguous_prompt", max_steps=3)
    assert run_plan(cfg, progress=False).complete
    records = {key.policy: r for key, r in records_by_key(out).items()}
    sha, saved = file_sha256(folders["act"] / WEIGHTS_FILE), cfg.policies[0].display_name
    assert records[saved]["weights_sha256"] == sha and records[saved]["random_weights"] is False
    assert records["random_act"]["random_weights"] is True and records["random_act"]["weights_sha256"] is None
    assert records["random_act"]["weights_source"] == str(weightless)
    stored = yaml.safe_load((out / "config.yaml").read_text())["policies"]
    assert [p["weights_sha256"] for p in stored] == [sha, None] and stored[1]["random_weights"] is True
    table = markdown_table(list(records.values()))
    assert "Random weights: random_act ran with randomly initialised weights" in table


def test_weights_saved_a_tensor_at_a_time_load_as_save_pretrained_writes_them(tmp_path):
    """`save_weights` (how the pi0/pi05 builders save 8-9 GiB without a second copy in memory) writes a file that
    LeRobot's loader reads back exactly and the check accepts."""
    import torch
    from safetensors.torch import load_file

    from sgvla.policies.tiny import build_tiny_act, save_weights

    folder = build_tiny_act(tmp_path / "act")
    policy = make_policy("act", path=str(folder))
    state = {k: v.to(torch.bfloat16) if v.is_floating_point() and "bias" in k else v
             for k, v in policy.policy.state_dict().items()}  # two dtypes in one file
    save_weights(state, folder / WEIGHTS_FILE)
    loaded = load_file(folder / WEIGHTS_FILE)
    assert loaded.keys() == state.keys() and all(torch.equal(loaded[k], state[k]) for k in state)
    assert check_weights(str(folder), policy.cfg).sha256 == file_sha256(folder / WEIGHTS_FILE)
