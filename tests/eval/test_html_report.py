"""report.html (sgvla.eval.html_report), written by every report: every matched block and arm, the prompt with its
triplets marked and the budget's cut struck through, the decision, the control, the operator's verdicts, videos by
relative path, record text escaped, nothing loaded from a network; a partial merge says so at the top; and headless
Chromium renders it, filtered from the URL's fragment, with no request leaving file://."""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import time
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import cv2
import numpy as np
import pytest

import sgvla.plugins  # noqa: F401
from sgvla.cli import main
from sgvla.core.episode import EpisodeKey, EpisodeRecord
from sgvla.eval.report import write_report
from sgvla.eval.shards import Merged, write_merged
from sgvla.eval.video import PANEL_WIDTH, EpisodeVideo
from sgvla.scene_graph.ontology import Ontology
from sgvla.scene_graph.serialize import compose_prompt, format_prompt_context, triplet_spans
from sgvla.scene_graph.triplet import Graph

from .plans import small_config

MODES = ("standard", "scene_graph", "filler")
TASK = "pick up the black bowl and place it on the plate"
SCREENSHOT = Path("/tmp/sgvla_report_screenshot.png")


def graph_prompt(n: int) -> str:
    """A scene_graph prompt as the engine composes it, with `n` triplets about the manipulated bowl."""
    others = ["plate_1", "cookies_1", "flat_stove_1", "wooden_cabinet_1", "akita_black_bowl_2", "ramekin_1"]
    graph = Graph.of([("akita_black_bowl_1", "is_left_of", o) for o in others[:n]])
    ontology = Ontology("test", ("akita_black_bowl_1", *others), "akita_black_bowl_1")
    return compose_prompt(TASK, format_prompt_context(graph, "agentview", ontology))


def record(policy: str, task_id: int, mode: str, seed: int, success: bool, **extra) -> dict:
    """An episode's record as the engine writes it (`EpisodeRecord.to_json`); `extra` overrides its fields or adds
    what a runner adds (the arm's verdicts)."""
    prompt = {"standard": TASK, "scene_graph": graph_prompt(3),
              "filler": f"{TASK}\nCurrent simulator semantic context:\nalways with even and reason"}.get(mode, "")
    fields = dict(steps=120 if success else 280, max_steps=280, wall_time_s=1.0, task=TASK, prompt=prompt,
                  graph_triplets=12, triplets_in_prompt=3 if mode == "scene_graph" else 0,
                  progress=1.0 if success else 0.4, stages={"reached": 30, **({"placed": 120} if success else {})},
                  failure_class="" if success else "wrong_object",
                  failure_reason="" if success else "placed the other bowl",
                  decision={"target": "akita_black_bowl_1", "grounding_source": "scene_graph"},
                  control={"kind": "filler", "tokens": 26} if mode == "filler" else {})
    known = {f.name for f in dataclasses.fields(EpisodeRecord)}
    fields.update({k: v for k, v in extra.items() if k in known})
    fields["extra"] = {k: v for k, v in extra.items() if k not in known}
    return EpisodeRecord(policy, task_id, "ambiguous_prompt", mode, seed, success, **fields).to_json()


def run_records() -> list[dict]:
    """2 tasks x 2 seeds (4 blocks) x 2 policies x 3 modes: 24 arms. prompt_grounded's sg succeeds where std fails in
    task 0 (both seeds) and task 1 seed 0; expert succeeds everywhere."""
    out = []
    for task in (0, 1):
        for seed in (0, 1):
            for mode in MODES:
                out.append(record("expert", task, mode, seed, True))
                won = mode == "scene_graph" or (mode != "filler" and (task, seed) == (1, 1))
                out.append(record("prompt_grounded", task, mode, seed, won))
    return out


class Page(HTMLParser):
    """What a test reads from the page: elements with their classes and attributes, and every src/href."""

    def __init__(self, text: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.links: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        self.links += [attrs[k] for k in ("src", "href") if attrs.get(k)]

    def having(self, tag: str, cls: str) -> list[dict]:
        return [a for t, a in self.elements if t == tag and cls in (a.get("class") or "").split()]


def test_every_block_and_arm_with_the_reports_numbers(tmp_path):
    records = run_records()
    paths = write_report(tmp_path, records)
    text = paths["html"].read_text()
    page = Page(text)
    assert len(page.having("section", "block")) == 4 and len(page.having("article", "arm")) == 24
    groups = page.having("div", "group")
    outcomes = {(g["data-policy"], g["data-outcome"]) for g in groups}
    assert outcomes == {("expert", "both"), ("prompt_grounded", "sg_only"), ("prompt_grounded", "both")}
    assert sum(g["data-outcome"] == "sg_only" for g in groups) == 3
    # the pooled comparisons are comparisons.csv's rows, one table row each, with the Holm p
    csv_rows = paths["comparisons"].read_text().splitlines()[1:]
    table = text[text.index('id="comparisons"'):]
    assert table[:table.index("</table>")].count("<tr>") == 1 + len(csv_rows)
    assert "sg vs std" in table and "sg vs filler" in table
    # plots inline, nothing from a network: every link is a data: URI, a fragment or a relative path
    assert sum(link.startswith("data:image/png;base64,") for link in page.links) == 2
    assert not [link for link in page.links if re.match(r"[a-z]+://", link)], page.links
    assert "http://" not in text and "https://" not in text
    # each arm's facts: the failure class, the stages in the order reached, the decision and the control
    assert "wrong_object" in text and "reached @30, placed @120" in text
    assert "Grounding decision" in text and "What the control showed" in text


def strip(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment))


def test_the_prompt_marks_the_triplets_and_strikes_what_the_budget_cut(tmp_path):
    prompt = graph_prompt(5)
    kept = record("p", 0, "scene_graph", 0, True, prompt=prompt, triplets_in_prompt=5)
    cut = record("p", 0, "scene_graph", 1, True, prompt=prompt, triplets_in_prompt=5, prompt_tokens=100,
                 prompt_budget=60, triplets_kept=2, prompt_truncated=True)
    text = write_report(tmp_path, [kept, cut])["html"].read_text()
    pres = re.findall(r'<pre class="prompt">(.*?)</pre>', text, re.S)
    assert [strip(p) for p in pres] == [prompt, prompt]  # every character, once, in order
    whole, truncated = pres
    assert whole.count('<mark class="triplet">') == 5 and "cut" not in whole
    assert truncated.count('<mark class="triplet">') >= 5  # a triplet the cut goes through is marked in two parts
    cut_text = strip("".join(re.findall(r'<s class="cut">(.*?)</s>', truncated, re.S)))
    assert cut_text and prompt.endswith(cut_text)  # what is struck through is the end of the prompt
    cut_at = len(prompt) - len(cut_text)
    assert [end <= cut_at for _, end in triplet_spans(prompt)] == [True, True, False, False, False]  # 2 kept whole
    assert "truncated: 2 of 5 triplet(s) kept whole" in text and "100 tokens of a budget of 60" in text


def test_record_text_is_escaped_and_the_operators_verdicts_are_shown(tmp_path):
    evil = '<script>alert("x")</script>'
    history = [{"verdict": "failure", "note": evil, "source": "topic", "after_s": 0.0, "status": "replaced"},
               {"verdict": "success", "note": "", "source": "keyboard", "after_s": 1.2, "status": "stands"},
               {"verdict": "failure", "note": "late", "source": "topic", "after_s": 9.0, "status": "refused"}]
    arm = {"verdict": "success", "verdict_source": "keyboard", "operator_note": evil, "stopped_by": "verdict",
           "verdict_history": history}
    records = [record("so101 \"arm\"", 0, m, 0, True, task=evil, **arm) for m in ("standard", "scene_graph")]
    text = write_report(tmp_path, records)["html"].read_text()
    assert evil not in text and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in text
    assert text.count("<script>") == 1  # the page's own filter script only
    assert 'data-policy="so101 &quot;arm&quot;"' in text
    page = Page(text)
    assert len(page.having("div", "verdicts")) == 2
    assert [len(page.having("tr", status)) for status in ("replaced", "stands", "refused")] == [2, 2, 2]


def test_videos_are_linked_relative_to_the_page(tmp_path):
    run = tmp_path / "run"
    (run / "videos").mkdir(parents=True)
    records = [record("expert", 0, m, 0, True, video=str(run / "videos" / f"expert_t0_{m}_s0.mp4")) for m in MODES]
    for r in records:
        Path(r["video"]).write_bytes(b"mp4")
    assert 'src="videos/expert_t0_standard_s0.mp4"' in write_report(run, records)["html"].read_text()
    elsewhere = write_report(tmp_path / "elsewhere", records, records_dir=run)["html"].read_text()
    assert 'src="../run/videos/expert_t0_filler_s0.mp4"' in elsewhere and "(not found)" not in elsewhere


def test_a_partial_merge_says_so_at_the_top_of_table_md_and_the_page(tmp_path, capsys):
    cfg = small_config(tmp_path / "plan", modes=["standard", "scene_graph"], tasks=[0], episodes=2)
    records = [record("prompt_grounded", 0, m, 0, m == "scene_graph") for m in ("standard", "scene_graph")]
    records = [{**r, "perturbation": cfg.perturbations} for r in records]
    lost = [EpisodeKey("prompt_grounded", 0, cfg.perturbations, m, 1) for m in ("standard", "scene_graph")]
    out = tmp_path / "merged"
    write_merged(out, Merged(cfg, None, records, [], [str(k) for k in lost], lost, 4))
    capsys.readouterr()
    assert main(["report", str(out)]) == 0
    printed = capsys.readouterr().out
    line = "Partial run: 2 of the plan's 4 episodes have no result and are not in this report"
    assert (out / "table.md").read_text().startswith(f"**{line}")
    assert line in printed.replace("\n", " ")
    page = Page((out / "report.html").read_text())
    assert page.elements and [a for t, a in page.elements if a.get("id") == "partial"]
    assert line in unescape((out / "report.html").read_text())
    # once the missing episodes have records (a shard rerun), the folder is no longer partial
    more = [{**record("prompt_grounded", 0, k.mode, 1, True), "perturbation": k.perturbation} for k in lost]
    with (out / "episodes.jsonl").open("a") as f:
        f.writelines(json.dumps(r) + "\n" for r in more)
    assert main(["report", str(out)]) == 0
    assert not (out / "table.md").read_text().startswith("**Partial") and 'id="partial"' not in (
        out / "report.html").read_text()


def chromium_command(*args: str) -> list[str]:
    """Debian's headless Chromium in a network namespace with loopback only, no name resolved and its own background
    services (network time, field trials, domain reliability) off: nothing can leave the machine, whatever the page
    or the browser asks, and what the net log shows is what the page asked for."""
    return ["unshare", "--net", "--map-root-user", shutil.which("chromium"), "--headless=new", "--disable-gpu",
            "--no-sandbox", "--no-first-run", "--disable-extensions", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--metrics-recording-only",
            "--disable-domain-reliability", "--disable-field-trial-config",
            "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
            "--host-resolver-rules=MAP * ~NOTFOUND", *args]


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(chromium_command(*args), capture_output=True, text=True, timeout=timeout)


def page_requests(net_log: Path) -> set[str]:
    """The URLs a page's documents asked for, from Chromium's net log: the browser's own background requests
    (update checks, network time; initiator "not an origin") left out, which could not leave the namespace anyway."""
    log = json.loads(net_log.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return {e["params"]["url"] for e in log["events"] if e["type"] == start and "url" in e.get("params", {})
            and e["params"].get("initiator") != "not an origin"}


needs_chromium = pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed "
                                    "(apt-get install chromium): the page is checked in a real browser only where one is")


@pytest.mark.integration
@needs_chromium
def test_headless_chromium_renders_the_page_filtered_with_no_request_off_disk(tmp_path):
    html = write_report(tmp_path / "run", run_records())["html"]
    profile, net_log = tmp_path / "profile", tmp_path / "net.json"
    common = [f"--user-data-dir={profile}", f"--log-net-log={net_log}", "--net-log-capture-mode=Everything"]
    done = chromium(*common, "--virtual-time-budget=5000", "--dump-dom", f"{html.as_uri()}#outcome=sg_only")
    assert done.returncode == 0, done.stderr[-3000:]
    dom = Page(done.stdout)
    main_ = [a for t, a in dom.elements if a.get("id") == "blocks"][0]
    assert (main_["data-blocks"], main_["data-arms"]) == ("4", "24")  # every block and arm is on the page
    shown = [a for t, a in dom.elements if a.get("id") == "shown"][0]
    # filtered: the 3 blocks where prompt_grounded's sg succeeded and std failed, prompt_grounded's 3 arms in each
    assert (shown["data-blocks"], shown["data-arms"]) == ("3", "9"), shown
    visible_groups = [a for a in dom.having("div", "group") if "hidden" not in a]
    assert {a["data-policy"] for a in visible_groups} == {"prompt_grounded"} and len(visible_groups) == 3
    assert not [link for link in dom.links if re.match(r"[a-z]+://", link)]
    # the net log: the page asked the network for nothing (file: and data: URLs load without it)
    urls = page_requests(net_log)
    assert all(u.startswith(("file://", "data:")) for u in urls), urls
    # and the check sees a request that would leave: a page with one image from the web
    web = tmp_path / "web.html"
    web.write_text('<html><body><img src="http://example.com/x.png"></body></html>')
    assert chromium(f"--user-data-dir={profile}", f"--log-net-log={net_log}", "--virtual-time-budget=2000",
                    "--dump-dom", web.as_uri()).returncode == 0
    assert "http://example.com/x.png" in page_requests(net_log)
    # a screenshot of the unfiltered page, kept for the reader
    shot = tmp_path / "report.png"
    done = chromium(f"--user-data-dir={profile}", "--window-size=1400,1800", "--virtual-time-budget=5000",
                    f"--screenshot={shot}", html.as_uri())
    assert done.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG"), done.stderr[-3000:]
    shutil.copyfile(shot, SCREENSHOT)


class DevTools:
    """Chromium (`chromium_command`) driven over its DevTools protocol on a pipe (``--remote-debugging-pipe``: the
    browser reads commands on its fd 3 and answers on fd 4, each a JSON message ending in NUL), for what
    ``--dump-dom`` cannot do: play a video and wait, in real time, for it to advance. A pipe needs no port, so the
    browser stays in its loopback-only namespace. Every request a page makes (its file: and media loads included,
    which the net log does not list) is seen as DevTools' Network.requestWillBeSent."""

    def __init__(self, *args: str, timeout: float = 120):  # a command's answer; above PLAY_EVERY_VIDEO's 3 x 20 s
        import fcntl

        def above_4(fd: int) -> int:  # the child's dup2 onto 3 and 4 must not clobber one of the two
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return high

        commands_in, self.commands = map(above_4, os.pipe())
        self.answers, answers_out = map(above_4, os.pipe())

        def onto_3_and_4():
            os.dup2(commands_in, 3)
            os.dup2(answers_out, 4)

        self.proc = subprocess.Popen(chromium_command("--remote-debugging-pipe", *args), preexec_fn=onto_3_and_4,
                                     close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        os.close(commands_in)
        os.close(answers_out)
        self.timeout, self.buffer, self.sent = timeout, b"", 0
        self.requests: list[str] = []  # the URLs pages asked for, in order

    def call(self, method: str, session: str | None = None, **params):
        """One command's result (its events are skipped); a protocol error fails the test."""
        import select

        self.sent += 1
        message = {"id": self.sent, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self.buffer:
                left = deadline - time.monotonic()
                assert left > 0 and select.select([self.answers], [], [], left)[0], f"{method}: no answer"
                chunk = os.read(self.answers, 1 << 16)
                assert chunk, f"chromium ended: {self.proc.stderr.read().decode()[-3000:]}"
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("method") == "Network.requestWillBeSent":
                self.requests.append(answer["params"]["request"]["url"])
            if answer.get("id") == self.sent:
                assert "error" not in answer, (method, answer["error"])
                return answer["result"]

    def evaluate(self, url: str, expression: str) -> tuple[object, list[str]]:
        """`expression`'s value (a promise awaited) in a new tab showing `url`, once the page has loaded, and the
        URLs of every request the tab made meanwhile."""
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Network.enable", session)
        self.requests = []
        self.call("Page.navigate", session, url=url)
        ready = "new Promise(r => document.readyState === 'complete' ? r() : addEventListener('load', () => r()))"
        self.call("Runtime.evaluate", session, expression=ready, awaitPromise=True)
        result = self.call("Runtime.evaluate", session, expression=expression, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"]["value"], self.requests

    def close(self):
        try:
            self.call("Browser.close")
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc.stderr.close()
            os.close(self.commands)
            os.close(self.answers)


# Each video of the page played, muted, until it has advanced half a second (or failed, ended, or 20 s went by).
PLAY_EVERY_VIDEO = """(async () => {
  const out = [];
  for (const v of document.querySelectorAll('video')) {
    v.muted = true;
    let refused = null;
    try { await v.play(); } catch (e) { refused = String(e); }
    const start = performance.now();
    while (!refused && v.currentTime < 0.5 && !v.error && !v.ended && performance.now() - start < 20000)
      await new Promise(r => setTimeout(r, 50));
    v.pause();
    out.push({src: v.currentSrc, readyState: v.readyState, duration: v.duration, currentTime: v.currentTime,
              width: v.videoWidth, height: v.videoHeight, error: v.error && v.error.code, refused});
  }
  return out;
})()"""


def episode_video(path: Path, frames: int, size: int = 64) -> EpisodeVideo:
    """A video written by sgvla's own writer (what `run_episode` records), of two cameras whose square moves."""
    video = EpisodeVideo(path, upright=lambda img: img)
    for i in range(frames):
        images = {}
        for camera in ("agentview", "wrist"):
            img = np.full((size, size, 3), 40, np.uint8)
            img[:, i % size: i % size + 8] = (250, 120, 0)
            images[camera] = img
        video.add(images, f"step {i}  scene_graph\n{TASK}")
    video.close()
    return video


@pytest.mark.integration
@needs_chromium
def test_the_episode_videos_play_in_headless_chromium_from_disk(tmp_path):
    run = tmp_path / "run"
    records = []
    for m, mode in enumerate(MODES):  # one block, three arms, each with its own video (2, 3 and 4 s at 20 fps)
        video = episode_video(run / "videos" / f"expert_t0_{mode}_s0.mp4", frames=40 + 20 * m)
        records.append(record("expert", 0, mode, 0, True, video=str(video.path), steps=video.frames))
    html = write_report(run, records)["html"]
    # the controls: what OpenCV's MP4 writer gave before (MPEG-4 Part 2, 'mp4v') does not play here, and a request
    # for the web is seen
    control = run / "videos" / "mp4v.mp4"
    writer = cv2.VideoWriter(str(control), cv2.VideoWriter_fourcc(*"mp4v"), 20.0, (64, 64))
    for i in range(40):
        writer.write(np.full((64, 64, 3), 6 * i, np.uint8))
    writer.release()
    (run / "control.html").write_text('<html><body><video src="videos/mp4v.mp4"></video>'
                                      '<img src="http://example.com/x.png"></body></html>')
    browser = DevTools(f"--user-data-dir={tmp_path / 'profile'}")
    try:
        played, asked = browser.evaluate(html.as_uri(), PLAY_EVERY_VIDEO)
        refused, control_asked = browser.evaluate((run / "control.html").as_uri(), PLAY_EVERY_VIDEO)
    finally:
        browser.close()
    assert [Path(v["src"]).name for v in played] == [f"expert_t0_{m}_s0.mp4" for m in MODES], played
    for v, seconds in zip(played, (2.0, 3.0, 4.0)):
        assert v["src"].startswith("file://") and v["error"] is None and v["refused"] is None, v
        assert v["readyState"] >= 2 and v["currentTime"] >= 0.5, v  # it has a frame and played on
        assert abs(v["duration"] - seconds) < 0.1 and (v["width"], v["height"]) == (2 * 64 + PANEL_WIDTH, 64), v
    # the page and its three videos, all from disk: nothing else was asked for
    assert all(u.startswith(("file://", "data:")) for u in asked), asked
    assert {u for u in asked if u.endswith(".mp4")} == {v["src"] for v in played}, asked
    assert refused[0]["error"] == 4 and refused[0]["currentTime"] == 0, refused  # MEDIA_ERR_SRC_NOT_SUPPORTED
    assert "http://example.com/x.png" in control_asked, control_asked
