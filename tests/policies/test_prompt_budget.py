"""Prompt budgets through the real pi0 and pi05 preprocessors, and triplet spans of every context style.

PaliGemma's tokenizer cannot be downloaded here: the tiny BPE stands in for it (with a BOS token, as
PaliGemma's adds one), so counts differ from the real ones while the processors' rewriting and
truncation are LeRobot's own.
"""

import pytest
import torch

from sgvla.policies.lerobot_vla import PromptMeter, triplet_spans
from sgvla.policies.tiny import SPECIAL_TOKENS, build_tokenizer
from sgvla.scene_graph import Graph, format_prompt_context, load_ontology

PI_BUDGETS = {"pi0": 48, "pi05": 200}


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers.processors import TemplateProcessing

    tok = build_tokenizer()
    bos = SPECIAL_TOKENS["bos_token"]
    tok.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", special_tokens=[(bos, tok.convert_tokens_to_ids(bos))])
    return tok


@pytest.fixture
def pi_meter(tokenizer, monkeypatch):
    """The PromptMeter of LeRobot's own pi0 / pi05 preprocessor."""
    from lerobot.policies import make_pre_post_processors
    from lerobot.policies.pi0.configuration_pi0 import PI0Config
    from lerobot.policies.pi05.configuration_pi05 import PI05Config
    from lerobot.processor import tokenizer_processor

    class Auto:
        @staticmethod
        def from_pretrained(name, **kwargs):
            assert name == "google/paligemma-3b-pt-224"
            return tokenizer

    monkeypatch.setattr(tokenizer_processor, "AutoTokenizer", Auto)

    def make(kind: str) -> PromptMeter:
        config = {"pi0": PI0Config, "pi05": PI05Config}[kind](device="cpu")
        preprocessor, _ = make_pre_post_processors(config)
        return PromptMeter.of(preprocessor, torch.zeros(1, 8))

    return make


def kept_by_brute_force(meter: PromptMeter, prompt: str, rewrite) -> int:
    """Triplets whose rewritten text lies wholly inside the decoded tokens that survive truncation."""
    text = meter.tokenizer_input(prompt)
    tokenizer = meter.step.input_tokenizer
    ids = tokenizer(text, max_length=meter.step.max_length, truncation=True)["input_ids"]
    window = tokenizer.decode(ids, skip_special_tokens=True)
    assert text.startswith(window)
    kept, pos = 0, 0
    for start, end in triplet_spans(prompt):
        pos = text.index(rewrite(prompt[start:end]), pos) + (end - start)
        kept += pos <= len(window)
    return kept


@pytest.mark.parametrize("kind", ["pi0", "pi05"])
@pytest.mark.parametrize("style", ["reference", "compact", "json"])
@pytest.mark.parametrize("graph", ["filtered", "full"])
def test_triplets_kept_match_the_truncated_tokens(pi_meter, make_prompt, kind, style, graph):
    meter = pi_meter(kind)
    prompt = make_prompt(graph, style)
    budget = meter.budget(prompt)
    assert budget.budget == PI_BUDGETS[kind]
    assert budget.triplets_total == (6 if graph == "filtered" else 42)
    rewrite = (lambda t: t.replace("_", " ")) if kind == "pi05" else (lambda t: t)
    assert budget.triplets_kept == kept_by_brute_force(meter, prompt, rewrite)
    if graph == "full":
        assert budget.truncated and budget.triplets_kept < budget.triplets_total


def test_pi05_rewrites_the_prompt_and_a_long_graph_pushes_out_the_state(pi_meter, make_prompt):
    meter = pi_meter("pi05")
    text = meter.tokenizer_input(make_prompt("full"))
    assert text.startswith("Task: pick up the black bowl between the plate and the ramekin and place it on the plate"
                           " Current simulator semantic context: Scene graph: View: agentview (target akita black bowl,")
    assert text.endswith(", State: " + " ".join(["128"] * 8) + ";\nAction: ")  # zero state, 256 bins
    ids = meter.step.input_tokenizer(text, max_length=200, truncation=True)["input_ids"]
    assert "State:" not in meter.step.input_tokenizer.decode(ids)
    standard = meter.budget(make_prompt(None))
    assert not standard.truncated and standard.triplets_total == 0


def test_pi0_budget_counts_special_tokens(pi_meter, make_prompt, tokenizer):
    meter = pi_meter("pi0")
    prompt = make_prompt(None)
    assert meter.tokenizer_input(prompt) == prompt + "\n"
    assert meter.budget(prompt).tokens == len(tokenizer(prompt + "\n")["input_ids"]) == \
        len(tokenizer(prompt + "\n", add_special_tokens=False)["input_ids"]) + 1


def test_spans_cover_exactly_the_triplets_of_each_style():
    ontology = load_ontology("libero_spatial")
    graph = Graph.of([("akita_black_bowl_1", "is_left_of", "plate_1"),
                      ("akita_black_bowl_1", "is_behind", "cookies_1")])
    boxes = {"plate_1": [1, 2, 3, 4], "cookies_1": [5, 6, 7, 8]}
    expected = {
        "reference": ["(target_akita_black_bowl, is_behind, cookies)", "(target_akita_black_bowl, is_left_of, plate)"],
        "compact": ["target_akita_black_bowl is_behind cookies", "target_akita_black_bowl is_left_of plate"],
        "json": ['["target_akita_black_bowl", "is_behind", "cookies"]',
                 '["target_akita_black_bowl", "is_left_of", "plate"]'],
    }
    for style, triplets in expected.items():
        for with_boxes in (None, boxes):
            prompt = "task\n" + format_prompt_context(graph, "agentview", ontology, style=style, boxes=with_boxes)
            assert [prompt[a:b] for a, b in triplet_spans(prompt)] == triplets, (style, with_boxes)
        empty = "task\n" + format_prompt_context(Graph.of([]), "agentview", ontology, style=style, boxes=boxes)
        assert triplet_spans(empty) == []
    assert triplet_spans("(a, is_left_of, b)") == []  # no context block, no triplets
