"""The control arms (filler, wrong_graph, shuffled_graph): the scene graph's shape without its facts.

Graphs are built by hand from LIBERO-Spatial-like layouts with the rule the prompt-grounded policy reads relations
by (so "true for the scene" means the same thing to the graph and to the policy); the token counts of a tokenizer
policy come from a small HF tokenizer trained here (offline)."""

import re
from collections import Counter
from itertools import permutations

import numpy as np
import pytest

import sgvla.plugins  # noqa: F401  (registers the suites and policies a plan names)
from sgvla.core.context import ContextInputs, ContextMode, context_mode
from sgvla.core.controls import SPATIAL_WORDS, fit_words, neutral_words
from sgvla.policies.grounding import PerceivedScene, ground_target, perceived_relation
from sgvla.scene_graph import RELATIONS, Graph, Ontology, Triplet, ViewGraph, load_ontology
from sgvla.scene_graph.ontology import display_name, words_of
from sgvla.scene_graph.serialize import CONTEXT_HEADER, STYLES

from .test_grounding import LANDMARKS  # the landmarks of LIBERO-Spatial-like layouts

ONT = load_ontology("libero_spatial")
TARGET, OTHER = "akita_black_bowl_1", "akita_black_bowl_2"
TASK = "pick up the black bowl and place it on the plate"  # the ambiguous prompt: only a graph can tell
# (target bowl, other bowl) positions, as LIBERO-Spatial's tasks place them.
LAYOUTS = {
    "between_vs_next_to_plate": ([0.0, 0.0, 0.90], [0.10, 0.22, 0.90]),
    "next_to_plate_vs_between": ([0.10, 0.22, 0.90], [0.0, 0.0, 0.90]),
    "on_stove_vs_between": ([0.20, -0.25, 0.95], [0.0, 0.0, 0.90]),
    "front_of_ramekin_vs_behind_cabinet": ([0.12, -0.18, 0.90], [-0.45, 0.31, 0.90]),
    "next_to_cookies_vs_on_stove": ([-0.15, 0.12, 0.90], [0.20, -0.25, 0.95]),
}
# Words that say where things are (beyond the relations' own): none may be in a filler.
SPATIAL = {"left", "right", "front", "behind", "back", "top", "bottom", "above", "below", "under", "over", "on",
           "in", "inside", "near", "next", "beside", "between", "center", "middle", "side", "up", "down", "here",
           "there", "where", "close", "far", "table", "from", "of", "is", "contains", "around", "across"}


def positions(layout: str) -> dict[str, np.ndarray]:
    target, other = LAYOUTS[layout]
    return {TARGET: np.array(target, float), OTHER: np.array(other, float), **LANDMARKS}


def view_of(layout: str) -> ViewGraph:
    """Every ordered pair's relation, as the prompt-grounded policy perceives it (no boxes)."""
    pos = positions(layout)
    triplets = [Triplet(a, perceived_relation(pos[a], pos[b], a, b, False), b)
                for a in pos for b in pos if a != b]
    return ViewGraph("agentview", Graph(tuple(triplets)), {})


def block(prompt: str) -> str:
    return prompt[len(TASK) + 1:]


def lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.startswith("(")}


def prompt_of(mode: str, view: ViewGraph, style: str = "reference", inputs: ContextInputs = ContextInputs(),
              ontology: Ontology = ONT):
    return context_mode(mode).context(TASK, view, "agentview", ontology, style, inputs)


# -- a tokenizer policy's counter, trained here ------------------------------------------------------------------

CORPUS = [
    "the robot will pick the bowl and place it on the plate when the task says so",
    "people often think that a simple idea is good and they want to know more about it",
    "current simulator semantic context scene graph view agentview target",
    "is_left_of is_right_of is_in_front_of is_behind is_on_top_of is_below_of is_inside contains",
    "akita black bowl plate ramekin cookies cabinet stove glazed rim porcelain wooden flat",
    "this year the family had money and time for music and history which made them happy",
] * 20


def _tokenizer(kind: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":  # a small vocabulary: many words are several tokens
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        trainer = trainers.WordPieceTrainer(vocab_size=120, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    else:
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["[UNK]", "[CLS]", "[SEP]"])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(CORPUS, trainer)
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]")


@pytest.fixture(scope="module", params=["wordpiece", "bpe"])
def count_tokens(request):
    tokenizer = _tokenizer(request.param)
    return lambda text: len(tokenizer(text)["input_ids"])


# -- filler --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("style", STYLES)
def test_filler_matches_the_graph_blocks_tokens(count_tokens, style):
    for layout in LAYOUTS:
        view = view_of(layout)
        graph_block = block(prompt_of("scene_graph", view, style).prompt)
        for seed in range(4):
            inputs = ContextInputs(seed=seed, count_tokens=count_tokens)
            ctx = prompt_of("filler", view, style, inputs)
            assert abs(count_tokens(block(ctx.prompt)) - count_tokens(graph_block)) <= 1
            assert ctx.control == {"kind": "filler", "tokens": count_tokens(block(ctx.prompt)),
                                   "matched_tokens": count_tokens(graph_block), "counter": "tokenizer"}
            assert ctx.triplets_in_prompt == 0 and ctx.prompt.startswith(f"{TASK}\n{CONTEXT_HEADER}\n")


@pytest.mark.parametrize("style", STYLES)
def test_filler_matches_the_graph_blocks_words_exactly(style):
    for layout in LAYOUTS:
        view = view_of(layout)
        graph_block = block(prompt_of("scene_graph", view, style).prompt)
        # No counter, or the engine's counter of a policy without a tokenizer (it gives None): words are counted.
        for inputs in (ContextInputs(seed=3), ContextInputs(seed=3, count_tokens=lambda t: None)):
            ctx = prompt_of("filler", view, style, inputs)
            assert len(block(ctx.prompt).split()) == len(graph_block.split())
            assert ctx.control["counter"] == "words" and ctx.control["tokens"] == ctx.control["matched_tokens"]


def test_filler_says_nothing_about_the_scene():
    names = [*ONT.objects, *map(display_name, ONT.objects), *ONT.aliases, *ONT.ambiguous, "target"]
    banned = {w for n in names for w in words_of(n)} | {w for r in RELATIONS for w in words_of(r)} | SPATIAL
    assert not banned & set(neutral_words(ONT)) and not SPATIAL_WORDS & set(neutral_words(ONT))
    for layout in LAYOUTS:
        ctx = prompt_of("filler", view_of(layout), inputs=ContextInputs(seed=7))
        body = block(ctx.prompt).removeprefix(CONTEXT_HEADER)
        assert body.strip() and not set(words_of(body)) & banned, body
        assert "(" not in body and ":" not in body


def test_filler_is_seeded_and_changes_only_with_the_blocks_length():
    view = view_of("between_vs_next_to_plate")
    a, b = (prompt_of("filler", view, inputs=ContextInputs(seed=s)).prompt for s in (1, 1))
    assert a == b and a != prompt_of("filler", view, inputs=ContextInputs(seed=2)).prompt
    # Another layout whose graph block is as long: the same words; a longer one extends them.
    other = view_of("on_stove_vs_between")
    same = [prompt_of(m, v, inputs=ContextInputs(seed=1)).prompt for m in ("scene_graph", "filler") for v in (view, other)]
    assert len(same[0].split()) == len(same[1].split()) and same[2] == same[3]
    longer = ViewGraph("agentview", Graph(view.graph.triplets + (Triplet(TARGET, "is_inside", "flat_stove_1"),)), {})
    extended = prompt_of("filler", longer, inputs=ContextInputs(seed=1)).prompt
    assert extended.startswith(a) and len(extended.split()) == len(a.split()) + 3


def test_fit_words_finds_the_largest_length_within_the_target():
    for per_word in (1, 2, 3):
        for target in range(0, 60, 7):
            calls = []
            count = lambda n: calls.append(n) or 5 + per_word * n  # noqa: E731
            n = fit_words(count, target)
            assert count(n) <= target or n == 0
            assert n == 0 and 5 >= target or count(n + 1) > target
            assert len(calls) <= 12


# -- wrong_graph ---------------------------------------------------------------------------------------------------

def scene(layout: str) -> PerceivedScene:
    pos = positions(layout)
    return PerceivedScene(np.stack([pos[TARGET], pos[OTHER]]), LANDMARKS, np.array([0.0, 0.0, 0.9]))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_wrong_graph_shows_no_true_triplet_and_misleads_the_grounding(layout):
    view = view_of(layout)
    truth = prompt_of("scene_graph", view)
    wrong = prompt_of("wrong_graph", view, inputs=ContextInputs(seed=0))
    assert wrong.triplets_in_prompt > 0 and lines(block(wrong.prompt))
    assert not lines(block(wrong.prompt)) & lines(block(truth.prompt))  # no line of the true graph
    control = wrong.control
    assert control["kind"] == "wrong_graph" and control["swapped"] == f"{TARGET}<->{OTHER}"
    assert control["shown"] == wrong.triplets_in_prompt == len(lines(block(wrong.prompt)))
    assert control["shown"] + control["dropped_true"] == len(view.graph.filter_subject(OTHER))
    # The policy picks the described bowl: the right one from the graph, the wrong one from the wrong graph.
    right = ground_target(truth.prompt, scene(layout), ONT, TASK, tie_break="first")
    misled = ground_target(wrong.prompt, scene(layout), ONT, TASK, tie_break="first")
    assert (right.index, right.source) == (0, "scene_graph")
    assert (misled.index, misled.source) == (1, "scene_graph"), misled


def test_wrong_graph_serializes_like_the_graph():
    view = view_of("between_vs_next_to_plate")
    for style in STYLES:
        wrong, truth = (block(prompt_of(m, view, style).prompt) for m in ("wrong_graph", "scene_graph"))
        head = lambda t: t.splitlines()[:3] if style == "reference" else t[:40]  # noqa: E731
        assert head(wrong) == head(truth) and wrong != truth


def test_wrong_graph_needs_a_look_alike_of_the_target():
    lone = Ontology("one_bowl", ("bowl_1", "plate_1"), "bowl_1")
    view = ViewGraph("agentview", Graph.of([("bowl_1", "is_left_of", "plate_1")]), {})
    with pytest.raises(ValueError, match="context mode 'wrong_graph' .*ontology 'one_bowl' has no interchangeable"):
        prompt_of("wrong_graph", view, ontology=lone)


# -- shuffled_graph ------------------------------------------------------------------------------------------------

def word_counts(text: str) -> Counter:
    return Counter(re.findall(r"\w+", text))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_shuffled_graph_keeps_the_words_and_changes_the_facts(layout):
    view = view_of(layout)
    for style in STYLES:
        truth = prompt_of("scene_graph", view, style)
        shuffled = prompt_of("shuffled_graph", view, style, ContextInputs(seed=5))
        assert word_counts(block(shuffled.prompt)) == word_counts(block(truth.prompt))
        assert shuffled.triplets_in_prompt == truth.triplets_in_prompt
    truth, shuffled = (lines(block(prompt_of(m, view, inputs=ContextInputs(seed=5)).prompt))
                       for m in ("scene_graph", "shuffled_graph"))
    control = prompt_of("shuffled_graph", view, inputs=ContextInputs(seed=5)).control
    assert control["kind"] == "shuffled_graph" and control["still_true"] == len(shuffled & truth)
    # The fewest true triplets any landmark permutation leaves (the other bowl stays: its class has one name here).
    shown = view.graph.filter_subject(TARGET)
    landmarks = sorted({t.object for t in shown} - {OTHER})
    fewest = min(sum(t in set(view.graph) for t in shown.rename(dict(zip(landmarks, p))))
                 for p in permutations(landmarks) if list(p) != landmarks)
    assert control["still_true"] == fewest < len(truth)
    assert control["permutation"] != "identity" and "akita" not in control["permutation"]
    assert all(re.fullmatch(r"\w+->\w+", part) for part in control["permutation"].split(", "))


def test_shuffled_graph_is_seeded():
    view = view_of("between_vs_next_to_plate")
    perm = lambda seed: prompt_of("shuffled_graph", view, inputs=ContextInputs(seed=seed)).control["permutation"]  # noqa: E731
    assert perm(3) == perm(3)
    assert len({perm(seed) for seed in range(12)}) > 1  # several permutations leave as few true triplets


# -- a served tokenizer policy: the first prompt is sized before the episode's reset ---------------------------------

class TokenCounting:
    """A `BatchPolicy` with a tokenizer and no actions to speak of: what a served learned policy is to the engine."""

    name = "counting"

    def __init__(self, count):
        self.count, self.resets = count, []

    def open_session(self):
        return {}

    def reset_session(self, session, prompt, seed):
        self.resets.append(prompt)

    def act_batch(self, sessions, steps):
        return [np.zeros(7) for _ in steps]

    def session_budget(self, session, prompt):
        from sgvla.core.protocols import PromptBudget

        return PromptBudget(self.count(prompt), None, 0, 0)

    def session_decision(self, session):
        return {}

    def close_session(self, session):
        pass

    def close(self):
        pass


class FixedSource:
    name = "fixed"

    def __init__(self, view):
        self.view = view

    def reset(self):
        pass

    def view_graph(self, view, observation, scene, task):
        return self.view

    def stats(self):
        return {}

    def close(self):
        pass


def test_a_served_policy_counts_the_first_prompt_before_its_reset(count_tokens):
    from types import SimpleNamespace

    from sgvla.core.episode import Episode, EpisodeKey
    from sgvla.core.protocols import Step
    from sgvla.policies.serving.remote import RemotePolicy
    from sgvla.policies.serving.server import PolicyServer

    served = TokenCounting(count_tokens)
    server = PolicyServer({"counting": lambda: served})
    try:
        policy = RemotePolicy("counting", SimpleNamespace(call=server.call, close=lambda: None))
        assert policy.prompt_budget(TASK).tokens == count_tokens(TASK)  # no session yet: a fresh one counts
        view = view_of("on_stove_vs_between")
        engine = Episode(EpisodeKey("counting", 0, "none", "filler", 4), policy, context_mode("filler"),
                         FixedSource(view), ONT, view="agentview", max_steps=1)
        step = Step(SimpleNamespace(raw={}))
        engine.start(TASK, step)
        engine.act(step)
        engine.observe(False, False)
        record = engine.record().to_json()
        graph_block = block(prompt_of("scene_graph", view).prompt)
        assert served.resets == [record["prompt"]] and record["control_counter"] == "tokenizer"
        assert record["control_matched_tokens"] == count_tokens(graph_block)
        assert abs(count_tokens(block(record["prompt"])) - count_tokens(graph_block)) <= 1
        with pytest.raises(KeyError, match="no session"):
            server.call("counting", "never-reset", "act", None)
    finally:
        server.close()


# -- registration and plans ----------------------------------------------------------------------------------------

CONTROLS = ("filler", "wrong_graph", "shuffled_graph")


def test_controls_are_registered_modes_that_a_plan_names(tmp_path):
    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig

    choices = ContextMode.choices()
    assert set(CONTROLS) <= set(choices)
    assert [choices[m].label for m in CONTROLS] == ["filler", "wrong", "shuf"]
    assert all(choices[m].control and choices[m].uses_graph and not choices[m].needs_boxes for m in CONTROLS)
    assert not any(choices[m].control for m in ("standard", "scene_graph", "scene_graph_full"))
    modes = ["standard", "scene_graph", *CONTROLS]
    cfg = from_mapping(EvalConfig, dict(name="t", suite={"type": "libero_spatial"}, policies=[{"type": "prompt_grounded"}],
                                        tasks=[0], perturbations="ambiguous_prompt", modes=modes, episodes=1,
                                        max_steps=3, output_dir=str(tmp_path)))
    assert list(cfg.modes) == modes


def test_the_paper_modes_are_unchanged_by_inputs():
    view = view_of("between_vs_next_to_plate")
    for mode in ("standard", "scene_graph", "scene_graph_full"):
        plain = prompt_of(mode, view)
        with_inputs = prompt_of(mode, view, inputs=ContextInputs(seed=9, count_tokens=len))
        assert plain == with_inputs and plain.control == {}


# -- in process, on LIBERO-Spatial -----------------------------------------------------------------------------------

@pytest.mark.sim
def test_one_episode_per_control_records_what_it_showed(tmp_path):
    from sgvla.eval.results import ResultsFile
    from sgvla.eval.runner import run_plan

    from .plans import small_config

    summary = run_plan(small_config(tmp_path, modes=["scene_graph", *CONTROLS], perturbations="ambiguous_prompt",
                                    max_steps=3), progress=False)
    records = {r["mode"]: r for r in ResultsFile(summary.path).records()}
    assert summary.complete and set(records) == {"scene_graph", *CONTROLS}
    sg, filler, wrong, shuffled = (records[m] for m in ("scene_graph", *CONTROLS))
    assert not any(k.startswith("control_") for k in sg)
    assert filler["control_kind"] == "filler" and filler["control_counter"] == "words"
    assert filler["control_tokens"] == filler["control_matched_tokens"] == len(block(sg["prompt"]).split())
    assert filler["triplets_in_prompt"] == 0 and filler["decision_grounding_source"] == "fallback"
    assert wrong["control_kind"] == "wrong_graph" and wrong["control_swapped"] == f"{TARGET}<->{OTHER}"
    assert wrong["triplets_in_prompt"] == wrong["control_shown"] > 0
    assert not lines(block(wrong["prompt"])) & lines(block(sg["prompt"]))
    assert sg["decision_grounding_correct"] is True and wrong["decision_grounding_correct"] is False
    assert shuffled["control_kind"] == "shuffled_graph" and shuffled["control_permutation"] != "identity"
    assert word_counts(block(shuffled["prompt"])) == word_counts(block(sg["prompt"]))
    assert shuffled["control_still_true"] < shuffled["triplets_in_prompt"] == sg["triplets_in_prompt"]


@pytest.mark.integration
def test_a_plan_sent_to_another_process_brings_its_control_modes(tmp_path):
    """Worker processes (spawned) and Ray actors get the plan pickled, its modes as names: unpickling it in a fresh
    interpreter registers the modules of its modes, so a control never reaches a worker as an unknown mode."""
    import pickle
    import subprocess
    import sys

    from sgvla.core.config import from_mapping
    from sgvla.eval.config import EvalConfig

    cfg = from_mapping(EvalConfig, {"modes": ["standard", "filler", "wrong_graph", "shuffled_graph"],
                                    "output_dir": str(tmp_path)})
    (tmp_path / "plan.pkl").write_bytes(pickle.dumps(cfg))
    fresh = subprocess.run([sys.executable, "-c", (
        "import pickle, sys; from sgvla.core.context import ContextMode; "
        "assert 'sgvla.core.controls' not in sys.modules; "
        f"cfg = pickle.loads(open({str(tmp_path / 'plan.pkl')!r}, 'rb').read()); "
        "print([ContextMode.choice(m).__name__ for m in cfg.modes])")], capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr
    assert fresh.stdout.split("\n")[-2] == "['Standard', 'Filler', 'WrongGraph', 'ShuffledGraph']"
