"""Settings declared once (`sgvla.core.settings`): the recording session's dataclass makes `sgvla record`'s flags,
the hardware launch's recording arguments and the recorder nodes' parameters, with the same defaults, types and
minimums; config/ros/hardware.yaml repeats its defaults with its help texts as comments. Launches are registered
builders with typed arguments: unknown names and bad values are refused with the reason, by one parser."""

import argparse
import re

import pytest
import yaml

from sgvla.core.registry import UnknownChoice
from sgvla.core.settings import parse_value, setting, specs
from sgvla.paths import REPO_ROOT
from sgvla.so101.recording import RecordingSettings

RECORDING = {s.name: s for s in specs(RecordingSettings)}


@pytest.mark.parametrize("value, kind, minimum, expected", [
    ("true", bool, None, True), ("Off", bool, None, False), ("", bool, None, False), (True, bool, None, True),
    ("3", int, 1, 3), ("0.5", float, 0.1, 0.5), ("2", float, None, 2.0), (" x ", str, None, " x ")])
def test_parse_value_reads_text_by_type(value, kind, minimum, expected):
    parsed = parse_value(value, kind, minimum)
    assert parsed == expected and type(parsed) is kind


@pytest.mark.parametrize("value, kind, minimum, choices, message", [
    ("maybe", bool, None, (), "expected true or false, got 'maybe'"),
    ("1.5", int, None, (), "expected an integer, got '1.5'"),
    (True, int, None, (), "expected an integer"),
    ("fast", float, None, (), "expected a number, got 'fast'"),
    ("0", int, 1, (), "must be >= 1, got '0'"),
    ("-0.5", float, 0.0, (), "must be >= 0, got '-0.5'"),
    ("sometimes", str, None, ("lockstep", "free_running"), "expected lockstep or free_running, got 'sometimes'")])
def test_parse_value_refuses_with_the_reason(value, kind, minimum, choices, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_value(value, kind, minimum, choices)


def test_a_settings_dataclass_refuses_values_below_minimum_or_of_another_type():
    assert RecordingSettings().episodes == 1
    with pytest.raises(ValueError, match="episodes: must be >= 1"):
        RecordingSettings(episodes=0)
    with pytest.raises(ValueError, match="auto_start: expected bool"):
        RecordingSettings(auto_start="yes")
    from dataclasses import dataclass

    @dataclass
    class NotSettings:
        plain: int = 1
        typed: int = setting(1, "typed")

    with pytest.raises(TypeError, match="NotSettings.plain is not a setting"):
        specs(NotSettings)


def _record_parser() -> argparse.ArgumentParser:
    from sgvla.cli import record

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    record.add_parser(sub)
    return parser


def test_record_flags_are_the_recording_settings():
    """Every field is a flag (its own name or the one kept from before: --episode-time, --reset-time, --auto) with
    the field's default, type and help (as a sentence); --root is required."""
    from sgvla.cli.arguments import sentence, settings_from

    parser = _record_parser()
    record = next(a for a in parser._subparsers._group_actions[0].choices.values())
    flags = {a.dest: a for a in record._actions}
    for spec in RECORDING.values():
        action = flags[spec.name]
        assert spec.cli_flag in action.option_strings and action.help == sentence(spec.help), spec.name
        assert action.required == spec.required, spec.name
        if not spec.required:
            assert action.default == spec.default, spec.name
    assert {RECORDING[n].cli_flag for n in ("episode_time_s", "reset_time_s", "auto_start")} == {
        "--episode-time", "--reset-time", "--auto"}
    args = parser.parse_args(["record", "--root", "ds", "--episodes", "3", "--episode-time", "5", "--auto"])
    assert settings_from(args, RecordingSettings) == RecordingSettings(root="ds", episodes=3, episode_time_s=5.0,
                                                                       auto_start=True)
    assert settings_from(parser.parse_args(["record", "--root", "ds"]), RecordingSettings) == RecordingSettings(
        root="ds")


@pytest.mark.parametrize("flags, message", [(["--episodes", "0"], "argument --episodes: must be >= 1, got '0'"),
                                            (["--episode-time", "0"], "argument --episode-time: must be >= 0.1"),
                                            (["--reset-time", "soon"], "argument --reset-time: expected a number"),
                                            ([], "the following arguments are required: --root")])
def test_record_flags_refuse_what_the_nodes_refuse(flags, message, capsys):
    with pytest.raises(SystemExit):
        _record_parser().parse_args(["record", *([] if not flags else ["--root", "ds"]), *flags])
    assert message in capsys.readouterr().err


def test_hardware_launch_arguments_are_the_recording_settings():
    from sgvla.launch.plan import ARGUMENTS, launch_plan

    arguments = {a.name: a for a in ARGUMENTS["hardware"]}
    for spec in RECORDING.values():
        if spec.name == "root":  # the launch's `record` argument
            continue
        a = arguments[spec.name]
        assert (a.default, a.kind, a.minimum, a.description) == (spec.text, spec.kind, spec.minimum, spec.help)
    recorder = launch_plan("hardware", {"sim": "true", "record": "ds"}).node("dataset_recorder").parameters
    assert {n: recorder[n] for n in RECORDING if n != "root"} == {
        n: s.default for n, s in RECORDING.items() if n != "root"}
    assert all(type(recorder[n]) is s.kind for n, s in RECORDING.items())


def test_hardware_parameter_file_repeats_the_recording_settings():
    """config/ros/hardware.yaml's dataset_recorder defaults are the dataclass's, its comments (the parameters'
    descriptions, sgvla.launch.parameter_docs) its help texts."""
    from sgvla.launch.parameter_docs import parameter_docs

    text = (REPO_ROOT / "config/ros/hardware.yaml").read_text()
    values = yaml.safe_load(text)["dataset_recorder"]["ros__parameters"]
    docs = parameter_docs()["dataset_recorder"]
    for spec in RECORDING.values():
        assert values[spec.name] == spec.default and type(values[spec.name]) is spec.kind, spec.name
        assert docs[spec.name] == spec.help, spec.name


def test_teleop_record_launch_file_takes_the_recording_settings():
    source = (REPO_ROOT / "launch/teleop_record.launch.py").read_text()
    assert "specs(RecordingSettings)" in source and "value_type=s.kind" in source
    assert not re.search(r'DeclareLaunchArgument\("(episodes|repo_id|episode_time_s|reset_time_s|auto_start)"',
                         source)


# -- registered launches --------------------------------------------------------------------------------------------

def test_launches_are_registered_with_their_arguments():
    from sgvla.launch.plan import ARGUMENTS, LAUNCHES, launch_names, registered

    assert launch_names() == ["hardware", "sim_eval", "so101_eval"] and set(ARGUMENTS) == set(LAUNCHES)
    for name in launch_names():
        launch = registered(name)
        assert launch.build.__module__ == f"sgvla.launch.{name}" and ARGUMENTS[name] == launch.arguments
    with pytest.raises(UnknownChoice, match=r"unknown launch 'sim_evl'; choose from \['hardware', 'sim_eval', "
                                            r"'so101_eval'\]"):
        registered("sim_evl")


def test_a_launch_registers_its_typed_arguments_and_refuses_a_bad_default():
    from sgvla.launch.registry import LAUNCHES, Argument, register_launch

    with pytest.raises(ValueError, match="argument n: expected an integer, got 'many'"):
        register_launch("t_bad", (Argument("n", "many", "a count", int),), topics=(), roles={},
                        cameras=tuple, camera_note="")(lambda a: None)
    assert "t_bad" not in LAUNCHES


@pytest.mark.parametrize("launch, args, message", [
    ("sim_evl", {}, "unknown launch 'sim_evl'"),
    ("hardware", {"episode": "2"}, "launch hardware: unknown argument(s) episode; it takes config, sim"),
    ("hardware", {"sim": "true", "record": "ds", "episodes": "two"}, "argument episodes: expected an integer"),
    ("hardware", {"sim": "true", "record": "ds", "episode_time_s": "0.01"}, "argument episode_time_s: must be >= 0.1"),
    ("hardware", {"sim": "true", "record": "ds", "auto_start": "sometimes"}, "argument auto_start: expected true or "
                                                                             "false"),
    ("hardware", {"sim": "true", "seed": "-1"}, "argument seed: must be >= 0, got '-1'"),
    ("hardware", {"perception": "2"}, "argument perception: expected true or false"),
    ("so101_eval", {"cameras": "some"}, "argument cameras: expected true or false"),
    ("sim_eval", {"render_images": "maybe"}, "argument render_images: expected true or false or auto")])
def test_launch_arguments_are_parsed_by_their_type(launch, args, message):
    from sgvla.launch.plan import launch_plan

    with pytest.raises(ValueError, match=re.escape(message)):
        launch_plan(launch, args)


def test_typed_arguments_reach_the_builders():
    from sgvla.launch.plan import launch_plan, parse_arguments

    typed = parse_arguments("hardware", {"sim": "yes", "episodes": "3", "episode_time_s": "2"})
    assert typed["sim"] is True and typed["episodes"] == 3 and typed["episode_time_s"] == 2.0
    plan = launch_plan("hardware", {"sim": "True", "record": "ds", "episodes": "3"})
    assert plan.arguments["sim"] == "True" and plan.arguments["episodes"] == "3"  # the text, as given
    assert plan.node("dataset_recorder").parameters["episodes"] == 3


def test_the_launches_camera_names_come_from_the_suites():
    """No camera name is written in sgvla/launch/: the SO101 rig's come from sgvla.so101.cameras, the sim plan's
    from its suite (the topic table's example: the default plan's suite's)."""
    from sgvla.launch.plan import topic_table
    from sgvla.libero.cameras import DEFAULT_CAMERAS
    from sgvla.so101.cameras import CAMERAS

    for path in (REPO_ROOT / "sgvla/launch").glob("*.py"):
        assert not re.search(r"""["'](robot0_eye_in_hand|agentview|wrist)["']""", path.read_text()), path.name
    assert f"e.g. {', '.join(DEFAULT_CAMERAS)}." in topic_table(launch="sim_eval")
    assert f"(arguments {', '.join(CAMERAS)})" in topic_table(launch="hardware")
    assert "e.g. a, b." in topic_table(("a", "b"))
