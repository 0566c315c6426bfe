"""`sgvla vlm-bench` end to end: tiny local model and HTTP path, resumability, scoring."""

import json


from sgvla.cli import main


def client_yaml(path, **fields):
    path.write_text("".join(f"{k}: {v}\n" for k, v in fields.items()))
    return str(path)


def bench(data, out, *clients, extra=(), code=0):
    args = ["vlm-bench", str(data), "--out", str(out), "--frames-per-episode", "2", "--no-progress", "--examples", "2"]
    for c in clients:
        args += ["--client", c]
    assert main([*args, *extra]) == code
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
    answers = next((out / "answers").glob("tiny-local__*.jsonl"))
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    assert len(records) == frames and {r["prompt_version"] for r in records} == {"1"}
    assert all(r["error"] is None and isinstance(r["raw"], str) for r in records)

    again = bench(libero_dir, out, local, http)  # resumed: nothing is asked again, no model is loaded
    assert again["queried"] == 0 and "model_load" not in again["phases_s"]
    assert (out / "main.md").read_text() == main_table


def test_failed_queries_are_not_scored_and_are_retried(tmp_path, fixed_dir, stub, monkeypatch, capsys):
    out = tmp_path / "out"
    gate = client_yaml(tmp_path / "s.yaml", type="openai", name="stub", model="m", base_url=stub.url("gate"))
    monkeypatch.setattr(stub, "gate_open", False)
    # client overrides; timeout_s and max_retries change no answer, so the cache is the same with or without them
    bench(fixed_dir, out, gate, extra=["timeout_s=5", "--examples", "0", "max_retries=0"], code=1)
    scores = json.loads((out / "scores.json").read_text())[0]
    assert scores["errors"] == {"agentview": 4, "robot0_eye_in_hand": 4} and scores["scores"] == {}
    assert scores["first_failure"].startswith("HTTP 500 from")
    captured = capsys.readouterr()
    assert "stub: 8 of 8 frame(s) have no answer and are not scored" in captured.out
    assert "8 frame(s) got no answer (their queries failed)" in captured.err and "Start the server at" in captured.err
    assert "| stub | n/a | n/a |" in (out / "main.md").read_text()

    monkeypatch.setattr(stub, "gate_open", True)
    timing = bench(fixed_dir, out, gate)
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
    answers = next((tmp_path / "out" / "answers").glob("cut__*.jsonl"))
    records = [json.loads(line) for line in answers.read_text().splitlines()]
    assert all(r["truncated"] and len(r["triplets"]) == 3 for r in records)
    assert all(r["dropped_by_reason"] == {"cut at the token limit": 1} for r in records)  # the element cut off
    diagnostics = (tmp_path / "out" / "diagnostics.md").read_text().splitlines()
    assert "| truncated |" in diagnostics[0] and diagnostics[2].startswith("| cut | agentview | 4 | 0 | 4 | 0 | 0 |")
    dropped = (tmp_path / "out" / "dropped_by_reason.md").read_text().splitlines()
    assert dropped[2] == "| cut | agentview | 4 | 12 | 12 | 4 | 0 | 0 | 0 | 0 | 0 | 0 | 4 |"


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
    assert scores["entries"] == {"agentview": 24, "robot0_eye_in_hand": 24}
    assert scores["kept_triplets"] == {"agentview": 16, "robot0_eye_in_hand": 16}
    assert scores["dropped_by_reason"]["agentview"] == {"unknown relation": 4, "unknown object": 4}
    dropped = (tmp_path / "out" / "dropped_by_reason.md").read_text().splitlines()
    assert dropped[0] == ("| Model | View | answers | entries | kept triplets | dropped | unknown object | ambiguous "
                          "object | unknown relation | subject equals object | not a triplet | several readings | "
                          "cut at the token limit |")
    assert dropped[2] == "| partial | agentview | 4 | 24 | 16 | 8 | 4 | 0 | 4 | 0 | 0 | 0 | 0 |"
    answers = next((tmp_path / "out" / "answers").glob("partial__*.jsonl"))
    record = json.loads(answers.read_text().splitlines()[0])  # per query
    assert record["entries"] == 6 and len(record["triplets"]) == 4
    assert record["dropped_by_reason"] == {"unknown relation": 1, "unknown object": 1}


def test_a_server_that_is_down_scores_nothing_and_exits_1(tmp_path, fixed_dir, closed_port, capsys):
    down = client_yaml(tmp_path / "d.yaml", type="openai", name="down", model="m",
                       base_url=f"http://127.0.0.1:{closed_port}/v1", max_retries=0)
    out = tmp_path / "out"
    bench(fixed_dir, out, down, extra=["--examples", "0"], code=1)
    captured = capsys.readouterr()
    assert f"cannot reach http://127.0.0.1:{closed_port}/v1/chat/completions" in captured.err
    assert f"Start the server at http://127.0.0.1:{closed_port}/v1" in captured.err
    assert "down: 8 of 8 frame(s) have no answer and are not scored" in captured.out
    scores = json.loads((out / "scores.json").read_text())[0]
    assert scores["scores"] == {} and scores["errors"] == {"agentview": 4, "robot0_eye_in_hand": 4}
    assert "mF1" in captured.out and "0.0000" not in captured.out  # no score for a frame without an answer
    diagnostics = (out / "diagnostics.md").read_text().splitlines()
    assert diagnostics[2].startswith("| down | agentview | 0 | 4 | 0 | 0 | 0 | n/a |")
    # the failures are logged but are no answers: nothing counts as answered
    records = [json.loads(line) for line in next((out / "answers").glob("down__*.jsonl")).read_text().splitlines()]
    assert len(records) == 8 and all(r["error"] for r in records)


def test_a_client_that_cannot_load_is_a_message_without_traceback(tmp_path, fixed_dir, capsys):
    missing = client_yaml(tmp_path / "t.yaml", type="transformers", name="gone", model=tmp_path / "no_such_model")
    out = tmp_path / "out"
    bench(fixed_dir, out, missing, extra=["--examples", "0"], code=1)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    message = captured.err.strip().splitlines()
    assert len(message) == 1  # one paragraph
    assert f"cannot load VLM client 'gone' (type transformers, model {tmp_path / 'no_such_model'})" in message[0]
    assert "Pass model=DIR" in message[0] and "sgvla vlm-serve" in message[0]
    scores = json.loads((out / "scores.json").read_text())[0]
    assert scores["scores"] == {} and scores["errors"] == {"agentview": 4, "robot0_eye_in_hand": 4}
    assert not list((out / "answers").glob("*.jsonl"))  # no answer file: nothing was asked


def test_answers_of_other_settings_are_never_reused(tmp_path, fixed_dir, stub, capsys):
    ok = client_yaml(tmp_path / "s.yaml", type="openai", name="stub", model="m", base_url=stub.url("ok"))
    out = tmp_path / "out"
    first = bench(fixed_dir, out, ok, extra=["model=/path/to/another/model", "max_new_tokens=64", "--examples", "0"])
    assert first["queried"] == 8
    capsys.readouterr()
    second = bench(fixed_dir, out, ok, extra=["--examples", "0"])  # the default model: its own answers
    assert second["queried"] == 8
    printed = capsys.readouterr().out
    assert "were made with other settings and are not reused (model: /path/to/another/model -> m; " \
           "max_new_tokens: 64 -> 4096)" in printed
    caches = sorted((out / "answers").glob("stub__*.jsonl"))
    assert len(caches) == 2
    settings = [json.loads((c.parent / (c.name + ".settings.json")).read_text()) for c in caches]
    assert sorted(s["model"] for s in settings) == ["/path/to/another/model", "m"]
    assert all({"max_new_tokens", "constraint", "prompt", "revision", "base_url", "extra_body"} <= set(s)
               for s in settings)
    for cache in caches:  # each cache holds one model's answers
        assert len({json.loads(line)["key"] for line in cache.read_text().splitlines()}) == 8
    assert bench(fixed_dir, out, ok, extra=["--examples", "0", "timeout_s=30"])["queried"] == 0  # same settings


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
