"""The SO101's progress stages (sgvla.core.progress), in a module of their own: the suites read them for the engine,
the twin's backend for its mid-episode triggers (sgvla.core.mid_episode), and the backend may not import a suite."""

from sgvla.core.progress import PickPlaceSpec


def so101_stages() -> PickPlaceSpec:
    """The SO101's stages (sgvla.core.progress), on the twin and the arm: the jaw (radians) is closed below the angle
    perception's carry rule uses (between the pick-and-place's open and closed angles); the defaults' distances fit
    the tabletop's bowls."""
    from sgvla.so101.twin.pick_place import PickPlaceParams

    return PickPlaceSpec(opening=(1.0,), closed_below=PickPlaceParams().closed_below)
