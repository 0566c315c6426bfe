"""Spatially-referring instructions (issue 42.3): programs generated from a scene's graph pick out their target alone,
families are balanced over a plan's episodes, the words read back to the program, prompt_grounded resolves a
program from the graph (scene_graph) and only guesses without one (standard), bad vocabularies and sets fail in one
line naming the file, records carry the family and program (on the real SO101 twin), and the report gives success
per family."""

import random
from collections import Counter

import numpy as np
import pytest
import yaml

import sgvla.plugins  # noqa: F401  (registers suites, policies, context modes)
from sgvla.core.perturbation_files import PerturbationError
from sgvla.core.referring import (ANY, FAMILY_KEY, PROGRAM_KEY, Hop, Program, ReferringError, TripletRelation,
                                  load_vocabulary, parse_vocabulary, select)
from sgvla.policies.grounding import PerceivedScene, ground_target, perceived_relation
from sgvla.scene_graph import Graph, Triplet, compose_prompt, format_prompt_context, load_ontology

ONT = load_ontology("libero_spatial")
VOCAB = load_vocabulary("spatial")
TARGET, OTHER = "akita_black_bowl_1", "akita_black_bowl_2"
POSITIONS = {  # x: in front (away from the robot), y: left; a LIBERO-like table
    TARGET: [0.0, 0.0, 0.9], OTHER: [0.1, 0.22, 0.9], "plate_1": [0.0, 0.2, 0.9],
    "glazed_rim_porcelain_ramekin_1": [0.0, -0.2, 0.9], "cookies_1": [-0.15, 0.0, 0.92],
    "flat_stove_1": [0.2, -0.25, 0.9], "wooden_cabinet_1": [-0.3, 0.3, 0.95]}


def truth_graph(positions: dict) -> Graph:
    """Every ordered pair's relation by the ground truth's world-frame rule (no pair stacked here)."""
    return Graph(tuple(Triplet(a, perceived_relation(np.array(pa), np.array(pb), a, b, False), b)
                       for a, pa in positions.items() for b, pb in positions.items() if a != b))


def scene_of(positions: dict = POSITIONS):
    return VOCAB.scene("libero_spatial", positions, truth_graph(positions), {k: np.array(v) for k, v in positions.items()})


def test_generated_programs_pick_out_the_target_alone():
    scene = scene_of()
    pools = {f: VOCAB.programs(scene, TARGET, f) for f in VOCAB.families}
    assert all(select(p, scene, VOCAB.families) == {TARGET} for pool in pools.values() for p in pool)
    assert all(p.hops == 2 for p in pools["two_hop"]) and pools["two_hop"]
    # Both bowls are left of the ramekin: that program means two objects and is never generated.
    both = Program("black bowl", Hop("left_of", "glazed_rim_porcelain_ramekin_1"))
    assert select(both, scene, VOCAB.families) == {TARGET, OTHER} and both not in pools["left_of"]
    # The target alone is right of the plate; the other bowl is in front of it.
    assert Program("black bowl", Hop("right_of", "plate_1")) in pools["right_of"]
    # An anchor expression must itself be unique: "the object that is right of the plate" is four objects.
    vague = Program(ANY, Hop("right_of", "plate_1"))
    assert len(select(vague, scene, VOCAB.families)) > 1
    assert not any(p.hop.anchor == vague for p in pools["two_hop"])


def test_nearest_and_farthest_drop_near_ties():
    # Both bowls 10 cm from the stove, to within 1 cm (the margin is 3 cm): "nearest to the stove" is no program.
    positions = {**POSITIONS, TARGET: [0.1, -0.25, 0.9], OTHER: [0.2, -0.14, 0.9]}
    scene = scene_of(positions)
    near = Program("black bowl", Hop("nearest_to", "flat_stove_1"))
    assert select(near, scene, VOCAB.families) == {TARGET, OTHER}
    assert near not in VOCAB.programs(scene, TARGET, "nearest_to")
    assert Program("black bowl", Hop("farthest_from", "flat_stove_1")) not in VOCAB.programs(scene, TARGET,
                                                                                             "farthest_from")
    # Apart by more than the margin: both programs exist, for the one bowl each picks.
    scene = scene_of()
    assert near in VOCAB.programs(scene, TARGET, "nearest_to")  # 32 cm vs 48 cm from the stove


def test_families_are_balanced_over_a_plans_episodes():
    families = list(VOCAB.families)
    # 10 tasks x 3 seeds: the episode at seed * 10 + task takes the family at that place, round the families.
    counts = Counter(VOCAB.family_for(seed * 10 + task, families) for task in range(10) for seed in range(3))
    assert set(counts) == set(families) and max(counts.values()) - min(counts.values()) <= 1
    # Where a scene lacks the episode's family, a seeded draw among those it has (the same for the same episode).
    assert [VOCAB.family_for(i, families[1:4]) for i in (1, 2, 3)] == families[1:4]
    drawn = [VOCAB.family_for(i, families[1:4]) for i in range(8, 200, 8)]  # their rotation family: families[0]
    assert set(drawn) == set(families[1:4]) and drawn == [VOCAB.family_for(i, families[1:4]) for i in range(8, 200, 8)]
    # In a scene, each episode's referral is of its family, a seeded draw within it, the same for the same seed.
    scene = scene_of()
    available = [f for f in families if VOCAB.programs(scene, TARGET, f)]
    got = [VOCAB.refer(scene, TARGET, "plate", i, seed=i % 3) for i in range(30)]
    assert all(r.family == VOCAB.family_for(i, available) for i, r in enumerate(got))
    assert VOCAB.refer(scene, TARGET, "plate", 7, seed=1) == got[7]
    assert {r.family for r in got} == set(available)


@pytest.mark.parametrize("ontology, place", [("libero_spatial", "plate"), ("so101_tabletop", "stove")])
def test_wording_round_trip(ontology, place):
    names = [o for o, n in VOCAB.nouns[ontology].items() if n != "black bowl"]
    programs = [Program("black bowl", Hop(f, a)) for f in VOCAB.one_hop for a in names]
    programs += [Program("black bowl", Hop(f, Program(ANY, Hop(g, a)))) for f in VOCAB.one_hop for g in VOCAB.one_hop
                 for a in names]
    for p in programs:
        assert VOCAB.parse(VOCAB.prompt(p, place), ontology) == (p, place), VOCAB.prompt(p, place)
    assert VOCAB.prompt(programs[-1], place).startswith("pick up the black bowl that is farthest from the object that")
    # The suites' own phrases are no programs: prompt_grounded's wording rules keep reading them.
    for prompt in ("pick up the black bowl on the stove and place it on the plate",
                   "pick up the black bowl between the plate and the ramekin and place it on the plate",
                   "pick up the black bowl left of the stove and place it on the stove",
                   "pick up the black bowl that is left of the lamp and place it on the plate"):
        assert VOCAB.parse(prompt, ontology) is None


def perceived(positions: dict = POSITIONS) -> tuple[PerceivedScene, list[str]]:
    names = sorted((TARGET, OTHER), key=lambda n: tuple(positions[n]))
    landmarks = {n: np.array(p) for n, p in positions.items() if n not in (TARGET, OTHER)}
    return PerceivedScene(np.array([positions[n] for n in names]), landmarks, np.zeros(3)), names


@pytest.mark.parametrize("program", [
    Program("black bowl", Hop("right_of", "plate_1")),
    Program("black bowl", Hop("nearest_to", "glazed_rim_porcelain_ramekin_1")),
    Program("black bowl", Hop("on", "plate_1")),
])
def test_prompt_grounded_resolves_from_the_graph_and_guesses_without(program):
    scene, names = perceived()
    graph = truth_graph(POSITIONS)
    instruction = VOCAB.prompt(program, "plate")
    truth = VOCAB.scene("libero_spatial", POSITIONS, graph, {k: np.array(v) for k, v in POSITIONS.items()})
    unique = select(program, truth, VOCAB.families) == {TARGET}
    # scene_graph: the injected (target-filtered) triplets evaluate the program; the target's node is the bowl
    # whose perceived position fits its triplets.
    context = format_prompt_context(graph, "agentview", ONT)
    g = ground_target(compose_prompt(instruction, context), scene, ONT, tie_break="first", vocabulary=VOCAB)
    if unique:
        assert (names[g.index], g.source) == (TARGET, "scene_graph") and g.evidence.startswith(f"program {program}")
    else:  # "on the plate" holds for no bowl: the graph does not pick the target out, the policy guesses
        assert g.source == "fallback" and "the graph does not pick out its target" in g.evidence
    # standard: the noun alone, a seeded guess among the black bowls (chance over seeds)
    picks = set()
    for seed in range(12):
        g = ground_target(instruction, scene, ONT, rng=random.Random(seed), vocabulary=VOCAB)
        assert g.source == "fallback" and g.evidence.startswith(f"program {program}: no scene graph to evaluate it on")
        picks.add(names[g.index])
    assert picks == {TARGET, OTHER}


def test_a_two_hop_program_needs_landmark_facts_a_filtered_graph_lacks():
    scene, names = perceived()
    graph = truth_graph(POSITIONS)
    truth = scene_of()
    program = next(p for p in VOCAB.programs(truth, TARGET, "two_hop")
                   if isinstance(VOCAB.families[p.hop.anchor.hop.relation].relation, TripletRelation))
    assert select(program.hop.anchor, truth, VOCAB.families) - {TARGET}  # the inner hop names a landmark
    instruction = VOCAB.prompt(program, "plate")
    filtered = format_prompt_context(graph, "agentview", ONT)
    g = ground_target(compose_prompt(instruction, filtered), scene, ONT, tie_break="first", vocabulary=VOCAB)
    assert g.source == "fallback"  # the inner hop relates landmarks: no triplet about them is injected
    # Without the vocabulary the policy reads no program: its wording rules find nothing either.
    g = ground_target(instruction, scene, ONT, tie_break="first")
    assert g.evidence == "instruction names no resolvable referent; first candidate"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["families"].update(up={"phrase": "above", "relation": {"type": "levitating"}}),
     "family 'up': unknown referring relation 'levitating'; choose from ['farthest', 'nearest', 'triplet']"),
    (lambda d: d["families"].update(up={"phrase": "above", "relation": {"type": "triplet", "relation": "over"}}),
     "family 'up': unknown relation 'over'"),
    (lambda d: d["families"].update(up={"relation": "nearest"}), "family 'up': a one-hop family has 'phrase'"),
    (lambda d: d.update(referent="{noun} {phrase}"), "key 'referent': must be a text holding {noun}, {phrase}, {anchor}"),
    (lambda d: d.update(colour="red"), "key 'colour': unknown key"),
])
def test_bad_vocabularies_fail_in_one_line(tmp_path, edit, message):
    from sgvla.core.referring import REFERRING_DIR

    data = yaml.safe_load((REFERRING_DIR / "spatial.yaml").read_text())
    edit(data)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ReferringError) as err:
        load_vocabulary(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value) and "\n" not in str(err.value)


def test_a_family_added_as_yaml_is_generated_and_read_back():
    from sgvla.core.referring import REFERRING_DIR

    data = yaml.safe_load((REFERRING_DIR / "spatial.yaml").read_text())
    data["families"]["close_to"] = {"phrase": "close to", "relation": {"type": "nearest", "margin": 0.01}}
    vocab = parse_vocabulary(data)
    scene = vocab.scene("libero_spatial", POSITIONS, truth_graph(POSITIONS),
                        {k: np.array(v) for k, v in POSITIONS.items()})
    programs = vocab.programs(scene, TARGET, "close_to")
    assert programs and all(vocab.parse(vocab.prompt(p, "plate"), "libero_spatial") == (p, "plate") for p in programs)


def test_sets_with_referring_load_and_refuse_a_task_prompt(tmp_path):
    from sgvla.libero.perturbations import load_perturbations
    from sgvla.so101.twin.perturbations import load_perturbations as load_twin

    assert load_perturbations("spatial_referring").referring.ontology == "libero_spatial"
    assert load_twin("spatial_referring").referring.ontology == "so101_tabletop"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"name": "bad", "referring": "spatial", "tasks": {0: {"prompt": "pick up the "
                                    "black bowl and place it on the plate"}}}))
    with pytest.raises(PerturbationError, match=r"bad.yaml: key 'referring': replaces every task's instruction; "
                                                r"task\(s\) \[0\] give a prompt"):
        load_perturbations(path)
    path.write_text(yaml.safe_dump({"name": "bad", "referring": "nowhere"}))
    with pytest.raises(PerturbationError, match="key 'referring': unknown referring vocabulary 'nowhere'; "
                                                r"available: \['spatial'\]"):
        load_twin(path)


def test_prompt_grounded_refuses_an_unknown_vocabulary():
    from sgvla.policies.scripted import PromptGroundedConfig

    with pytest.raises(ValueError, match="policy prompt_grounded: referring: unknown referring vocabulary 'x'"):
        PromptGroundedConfig(referring="x")
    assert PromptGroundedConfig(referring="").make(ontology=ONT).vocabulary is None


def test_twin_records_carry_the_family_and_program():
    """On the real twin: every reset words a program that picks out the target in the simulator's scene, the
    backend's task and observation carry it, the record facts its family and program; families balanced."""
    from sgvla.core.referring import ReferringBackend
    from sgvla.core.state import ground_truth_views
    from sgvla.so101.cameras import AGENTVIEW
    from sgvla.so101.twin.suite import So101TwinSuite

    families, rotation = Counter(), []
    for task in range(5):
        backend = So101TwinSuite(image_size=32).make_backend(task, "spatial_referring", False)
        assert isinstance(backend, ReferringBackend)
        with backend:
            for seed in range(3):
                obs = backend.reset(seed)
                facts = backend.record_facts()
                program, place = VOCAB.parse(backend.task, "so101_tabletop")
                assert obs.task == backend.task and str(program) == facts[PROGRAM_KEY]
                assert place == VOCAB.nouns["so101_tabletop"][backend.episode_info()["goal"][1]]
                scene = backend.twin.scene()
                graph = ground_truth_views(scene, [AGENTVIEW])[AGENTVIEW].graph
                truth = VOCAB.scene("so101_tabletop", graph.objects(), graph, dict(zip(scene.objects, scene.positions)))
                assert select(program, truth, VOCAB.families) == {"black_bowl_1"}
                assert (program.hops == 2) == (facts[FAMILY_KEY] == "two_hop")
                assert facts["perturbation_applied"].startswith("instruction: a spatially-referring program")
                families[facts[FAMILY_KEY]] += 1
                rotation.append(facts[FAMILY_KEY] == list(VOCAB.families)[(seed * 5 + task) % len(VOCAB.families)])
    # The twin's scenes have 4 to 6 of the 8 families (its bowls are left of or on top of the drawer, beside the
    # stove); the episodes whose rotation family a scene has take it, the others spread over what it has.
    assert sum(families.values()) == 15 and len(families) >= 5 and max(families.values()) <= 5, families
    assert sum(rotation) >= 5, (rotation, families)


def test_report_gives_success_per_family(tmp_path):
    from sgvla.eval.report import families_markdown, family_rows, write_report

    records = []
    for seed in range(6):
        for family in ("left_of", "two_hop"):
            for mode, success in (("standard", seed % 2 == 0), ("scene_graph", family == "left_of")):
                records.append({"policy": "prompt_grounded", "task_id": seed % 3, "perturbation": "spatial_referring",
                                "mode": mode, "seed": seed if family == "left_of" else seed + 10, "success": success,
                                "steps": 10, "max_steps": 10, FAMILY_KEY: family, PROGRAM_KEY: "p"})
    arms, compared = family_rows(records)
    rates = {(a["family"], a["mode"]): (a["successes"], a["episodes"]) for a in arms}
    assert rates == {("left_of", "standard"): (3, 6), ("left_of", "scene_graph"): (6, 6),
                     ("two_hop", "standard"): (3, 6), ("two_hop", "scene_graph"): (0, 6)}
    left = next(c for c in compared if c["family"] == "left_of")
    assert (left["treatment"], left["reference"], left["pairs"], left["delta_pp"]) == ("scene_graph", "standard", 6, 50.0)
    text = families_markdown(arms, compared)
    assert "| spatial_referring | two_hop | prompt_grounded | 50.0 (3/6) | 0.0 (0/6) | -50.0 (p=0.25, Holm 0.25, n=6) |" in text
    paths = write_report(tmp_path, records)
    assert paths["families"].read_text().splitlines()[0].startswith("perturbation,family,policy,mode,successes")
    assert "Success per referring family" in paths["html"].read_text() and "two_hop" in paths["markdown"].read_text()


def test_lerobot_env_sgvla_takes_the_referring_set():
    """`--env.perturbation=spatial_referring`: the env's task string is the program's words (with the live graph in
    scene_graph mode), and its records carry the family and program."""
    from lerobot.envs.factory import make_env_config
    from lerobot.utils.import_utils import register_third_party_plugins

    register_third_party_plugins()
    from lerobot_env_sgvla.env import SgvlaEnv

    env = SgvlaEnv(make_env_config("sgvla_so101_twin", context_mode="scene_graph", perturbation="spatial_referring",
                                   task_ids=[0], episode_length=5, image_size=32), 0)
    try:
        env.reset(seed=0)
        instruction = env.task_description.split("\n")[0]
        assert VOCAB.parse(instruction, "so101_tabletop") is not None and instruction == env.backend.task
        assert "Current simulator semantic context:" in env.task_description
        facts = env.backend.record_facts()
        assert facts[PROGRAM_KEY] == str(VOCAB.parse(instruction, "so101_tabletop")[0]) and facts[FAMILY_KEY]
    finally:
        env.close()


def test_the_arm_refuses_the_referring_set_in_one_line():
    from sgvla.so101.arm_suite import So101HardwareSuite

    with pytest.raises(ValueError, match="perturbation set 'spatial_referring' words each instruction from the "
                                         "simulator's scene at its reset; on the arm the operator sets the scene"):
        So101HardwareSuite().check_perturbations("spatial_referring")
    So101HardwareSuite().check_perturbations("swapped_bowls")


def test_libero_instructions_pick_out_the_target_bowl():
    """On real LIBERO (the suite's backend, as sgvla eval, sim_eval and lerobot_env_sgvla build it): each reset's
    program picks out akita_black_bowl_1 alone on the ground-truth graph of the main camera, and the record says so."""
    from sgvla.core.state import ground_truth_views
    from sgvla.eval.suite import SuiteConfig

    backend = SuiteConfig.choice("libero_spatial")(render_profile="fast", image_size=64).make_backend(
        3, "spatial_referring", False)
    with backend:
        for seed in (0, 1):
            backend.reset(seed)
            program, place = VOCAB.parse(backend.task, "libero_spatial")
            scene = backend.scene()
            graph = ground_truth_views(scene, [backend.view])[backend.view].graph
            truth = VOCAB.scene("libero_spatial", graph.objects(), graph, dict(zip(scene.objects, scene.positions)))
            assert select(program, truth, VOCAB.families) == {TARGET} and place == "plate"
            assert backend.record_facts()[PROGRAM_KEY] == str(program)
