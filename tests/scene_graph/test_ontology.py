from pathlib import Path

import pytest

from sgvla.scene_graph.ontology import (
    FAMILIES,
    INVERSE,
    ONTOLOGY_DIR,
    RELATIONS,
    Ontology,
    display_name,
    load_ontology,
    name_key,
)


def test_relations_form_four_inverse_pairs():
    assert len(RELATIONS) == 8
    assert all(INVERSE[INVERSE[r]] == r and INVERSE[r] != r for r in RELATIONS)
    assert INVERSE["is_left_of"] == "is_right_of"
    assert INVERSE["is_in_front_of"] == "is_behind"
    assert INVERSE["is_on_top_of"] == "is_below_of"
    assert INVERSE["is_inside"] == "contains"
    assert set(FAMILIES.values()) == {"is_left_of", "is_in_front_of", "is_on_top_of", "is_inside"}
    assert all(FAMILIES[r] == FAMILIES[INVERSE[r]] for r in RELATIONS)


def test_libero_spatial_ontology():
    ontology = load_ontology("libero_spatial")
    assert ontology.objects == (
        "akita_black_bowl_1",
        "akita_black_bowl_2",
        "cookies_1",
        "glazed_rim_porcelain_ramekin_1",
        "plate_1",
        "wooden_cabinet_1",
        "flat_stove_1",
    )
    assert ontology.manipulated == "akita_black_bowl_1"
    assert ontology.interchangeable == (("akita_black_bowl_1", "akita_black_bowl_2"),)
    assert ontology.assignments() == [
        {},
        {"akita_black_bowl_1": "akita_black_bowl_2", "akita_black_bowl_2": "akita_black_bowl_1"},
    ]


def test_so101_ontology():
    ontology = load_ontology(ONTOLOGY_DIR / "so101_tabletop.yaml")
    # LIBERO-Spatial's structure: two identical black bowls, named as LIBERO names its two.
    assert set(ontology.objects) == {"black_bowl_1", "black_bowl_2", "red_drawer", "black_stove", "cookie",
                                     "white_plate"}
    assert ontology.manipulated == "black_bowl_1"
    assert ontology.assignments() == [{}, {"black_bowl_1": "black_bowl_2", "black_bowl_2": "black_bowl_1"}]
    assert ontology.resolve("bowl") is None and ontology.is_ambiguous("black bowl") and ontology.is_ambiguous("bowl")
    assert ontology.resolve("target_black_bowl") == "black_bowl_1" and ontology.resolve("stove") == "black_stove"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("plate_1", "plate"),
        ("akita_black_bowl_1", "akita_black_bowl"),
        ("glazed_rim_porcelain_ramekin_1", "glazed_rim_porcelain_ramekin"),
        ("black_bowl", "black_bowl"),
        ("a_12", "a"),
    ],
)
def test_display_name_strips_the_instance_suffix(name, expected):
    assert display_name(name) == expected


def test_name_key_normalizes_case_separators_and_articles():
    assert name_key("The Cookie-Box") == "cookie_box"
    assert name_key("  akita_black_bowl_1 ") == "akita_black_bowl_1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plate", "plate_1"),
        ("Plate 1", "plate_1"),
        ("ramekin", "glazed_rim_porcelain_ramekin_1"),
        ("cookie box", "cookies_1"),
        ("cookies", "cookies_1"),
        ("stove", "flat_stove_1"),
        ("flat stove", "flat_stove_1"),
        ("cabinet", "wooden_cabinet_1"),
        ("wooden cabinet", "wooden_cabinet_1"),
        ("AKITA_BLACK_BOWL_2", "akita_black_bowl_2"),
        ("target_akita_black_bowl", "akita_black_bowl_1"),
        ("black bowl", None),
        ("bowl", None),
        ("akita_black_bowl", None),
        ("table", None),
    ],
)
def test_resolve(text, expected):
    assert load_ontology("libero_spatial").resolve(text) == expected


def test_ambiguous_names_are_known_as_such():
    ontology = load_ontology("libero_spatial")
    assert ontology.is_ambiguous("black bowl") and ontology.is_ambiguous("akita black bowl")
    assert not ontology.is_ambiguous("table")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "scene.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nobjects: [a_1]\nmanipulated: a_1\ncolour: red\n", "unknown keys ['colour']"),
        ("name: x\nobjects: []\nmanipulated: a_1\n", "empty object vocabulary"),
        ("name: x\nobjects: [a_1]\nmanipulated: b_1\n", "manipulated object 'b_1' not in objects"),
        ("name: x\nobjects: [a_1]\n", "missing keys ['manipulated']"),
        ("name: x\nobjects: [a_1, a_1]\nmanipulated: a_1\n", "duplicate objects"),
        (
            "name: x\nobjects: [a_1, b_1]\nmanipulated: a_1\ninterchangeable: [[a_1, c_1]]\n",
            "interchangeable object 'c_1'",
        ),
        ("name: x\nobjects: [a_1]\nmanipulated: a_1\ninterchangeable: [[a_1]]\n", "needs 2+ objects"),
        ("name: x\nobjects: [a_1]\nmanipulated: a_1\naliases: {thing: b_1}\n", "alias 'thing' names unknown object"),
        ("name: x\nobjects: [p_1, q_1]\nmanipulated: p_1\naliases: {p: q_1}\n", "conflicts with object 'p_1'"),
        ("name: x\nobjects: [a b]\nmanipulated: a b\n", "bad object name"),
        ("- just a list\n", "top level must be a mapping"),
        ("name: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_files_name_the_file_and_the_problem(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ValueError) as error:
        Ontology.from_yaml(path)
    assert str(path) in str(error.value)
    assert message in str(error.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.yaml"):
        load_ontology(tmp_path / "nowhere.yaml")
    with pytest.raises(FileNotFoundError, match="no_such_scene.yaml"):
        load_ontology("no_such_scene")
