"""`sgvla vlm-bench` end to end: tiny local model and HTTP path, resumability, scoring."""

import json


from sgvla.cli import main


def client_yaml(path, **fields):
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    return str(path)


def bench(data, out, *clients, extra=()):
    args = ["vlm-bench", str(data), "--out", str(out), "--frames-per-episode", "2", "--no-progress", "--examples", "2"]
    for c in clients:
        args += ["--client", c]
    assert main([*args, *extra]) == 0
    return json.loads((out / "timing.json").read_text())


def test_local_and_http_models_in_one_run(tmp_path, libero_dir, tiny_model_dir, model_server, capsys):
    local = client_yaml(tmp_path / "local.yaml", type="transformers", name="tiny-local", model=tiny_model_dir,
                        max_new_tokens=8, batch_size=8)
    http = client_yaml(tmp_path / "http.yaml", type="openai", name="tiny-http", model="tiny-qwen",
                       base_url=model_server, max_new_tokens=8, concurrency=2)
    out = tmp_path / "out"
    timing = bench(libero_dir, out, local, http)
    frames = 2 * 2 * 2 * 2  # files x demos x frames x views
    assert timing["frames"] == 2 * frames and timing["queried"] == 2 * frames
    main_table = (out / "main.md").read_text()
    assert "| Model | agentview mF1 | eye_in_hand mF1 |" in main_table
    assert "| tiny-local |" in main_table and "| tiny-http |" in main_table
    assert main_table in capsys.readouterr().out
    for name in ("diagnostics", "per_relation", "per_object_recall", "per_task"):
        assert (out / f"{name}.md").is_file() and (out / f"{name}.csv").is_file()
    assert "coverage" in (out / "diagnostics.md").read_text() and "T7" in (out / "per_task.md").read_text()
    assert len(list(out.glob("*.png"))) == 4
    for model in ("tiny-local", "tiny-http"):
        assert len(list((out / "examples" / model).glob("*/*.png"))) == 4
    records = [json.loads(line) for line in next((out / "answers").glob("tiny-local__*")).read_text().splitlines()]
    assert len(records) == frames and {r["prompt_version"] for r in records} == {"1"}
    assert all(r["error"] is None and isinstance(r["raw"], str) for r in records)

    again = bench(libero_dir, out, local, http)  # resumed: nothing is asked again, no model is loaded
    assert again["queried"] == 0 and "model_load" not in again["phases_s"]
    assert (out / "main.md").read_text() == main_table


def test_exact_answers_score_one_and_failures_are_retried(tmp_path, fixed_dir, stub):
    out = tmp_path / "out"
    slow = client_yaml(tmp_path / "s.yaml", type="openai", name="stub", model="m", base_url=stub.url("slow"))
    bench(fixed_dir, out, slow, extra=["timeout_s=0.2", "--examples", "0", "max_retries=0"])  # client overrides
    scores = json.loads((out / "scores.json").read_text())[0]
    assert scores["errors"] == {"agentview": 4, "robot0_eye_in_hand": 4}
    assert scores["scores"]["agentview"]["mean_task_f1"] == 0.0

    ok = client_yaml(tmp_path / "s.yaml", type="openai", name="stub", model="m", base_url=stub.url("ok"))
    timing = bench(fixed_dir, out, ok)
    assert timing["queried"] == 8  # the failed frames, asked again
    scores = json.loads((out / "scores.json").read_text())[0]
    assert scores["errors"] == {"agentview": 0, "robot0_eye_in_hand": 0}
    for view in ("agentview", "robot0_eye_in_hand"):
        s = scores["scores"][view]
        assert s["mean_task_f1"] == 1.0 and s["coverage"] == 1.0 and s["direction_consistency"] == 1.0
        assert set(s["per_task_f1"]) == {"7", "8"}


def test_bowl_swap_is_forgiven(tmp_path, fixed_dir, fixed_graph, stub, monkeypatch):
    swap = {"akita_black_bowl_1": "akita_black_bowl_2", "akita_black_bowl_2": "akita_black_bowl_1"}
    swapped = "\n".join(f"({swap.get(s, s)}, {r}, {swap.get(o, o)})" for s, r, o in fixed_graph)
    monkeypatch.setattr(stub, "answer", swapped)
    ok = client_yaml(tmp_path / "s.yaml", type="openai", name="stub", model="m", base_url=stub.url("ok"))
    bench(fixed_dir, tmp_path / "out", ok)
    s = json.loads((tmp_path / "out" / "scores.json").read_text())[0]["scores"]["agentview"]
    assert s["mean_task_f1"] == 1.0 and s["swapped_frames"] == 4
    assert len(list((tmp_path / "out" / "examples" / "stub" / "agentview").glob("*.png"))) == 2


def test_cut_answers_keep_their_triplets_and_are_counted(tmp_path, fixed_dir, stub):
    cut = client_yaml(tmp_path / "c.yaml", type="openai", name="cut", model="m", base_url=stub.url("cut"))
    bench(fixed_dir, tmp_path / "out", cut, extra=["--examples", "0"])
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())[0]
    assert scores["truncated"] == {"agentview": 4, "robot0_eye_in_hand": 4} and scores["errors"]["agentview"] == 0
    assert scores["scores"]["agentview"]["micro"]["recall"] == 0.75  # 3 of the 4 triplets survive the cut
    answers = next((tmp_path / "out" / "answers").glob("cut__*"))
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    assert all(r["truncated"] and len(r["triplets"]) == 3 for r in records)
    diagnostics = (tmp_path / "out" / "diagnostics.md").read_text().splitlines()
    assert "| truncated |" in diagnostics[0] and diagnostics[2].startswith("| cut | agentview | 4 | 0 | 4 | 0 | 0 |")


def test_entries_that_are_no_triplet_are_dropped_and_counted(tmp_path, fixed_dir, stub, capsys):
    partial = client_yaml(tmp_path / "p.yaml", type="openai", name="partial", model="m", base_url=stub.url("partial"))
    bench(fixed_dir, tmp_path / "out", partial, extra=["--examples", "0"])
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())[0]
    assert scores["rejected_entries"] == {"agentview": 8, "robot0_eye_in_hand": 8}  # 2 per answer, 4 frames
    assert scores["answers_with_rejections"] == {"agentview": 4, "robot0_eye_in_hand": 4}
    assert scores["scores"]["agentview"]["mean_task_f1"] == 1.0  # the valid triplets are scored
    diagnostics = (tmp_path / "out" / "diagnostics.md").read_text().splitlines()
    assert "| rejected entries | answers with rejections |" in diagnostics[0]
    assert diagnostics[2].startswith("| partial | agentview | 4 | 0 | 0 | 8 | 4 |")
    assert "partial: 16 answer entries in 8 answer(s) were no valid triplet of the ontology" in capsys.readouterr().out


def test_cli_errors_are_messages(tmp_path, libero_dir, capsys, monkeypatch):
    c = client_yaml(tmp_path / "c.yaml", type="openai", model="m")
    assert main(["vlm-bench", str(libero_dir), "--client", c, "--client", c, "--out", str(tmp_path)]) == 2
    assert "distinct names" in capsys.readouterr().err
    assert main(["vlm-bench", str(tmp_path / "nothing"), "--client", c, "--out", str(tmp_path)]) == 2
    assert "no HDF5 file" in capsys.readouterr().err
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    assert main(["vlm-bench", str(libero_dir), "--client", "gemini", "--out", str(tmp_path)]) == 2
    assert "needs an API key in the environment variable GEMINI_API_KEY" in capsys.readouterr().err
    assert main(["vlm-bench", str(libero_dir), "--client", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown VLM client 'nope'; give a YAML path or one of ['gemini'," in capsys.readouterr().err
    assert main(["vlm-bench", str(libero_dir), "--client", c, "colour=red", "--out", str(tmp_path)]) == 2
    assert "unknown key(s) colour" in capsys.readouterr().err
    assert main(["vlm-bench", str(libero_dir), "--client", c, "max_new_tokens:=8"]) == 2
    assert "write max_new_tokens=8" in capsys.readouterr().err
