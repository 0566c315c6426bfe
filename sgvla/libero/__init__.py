"""Embodiment: LIBERO-Spatial's Panda in simulation. Offline LIBERO setup, LIBERO's env stepped as LeRobot's LIBERO
env steps it (without importing torch or LeRobot) with perturbations and render profiles, privileged scene state and
ground-truth graphs, a scripted expert, and LIBERO-format demonstrations with scene-graph annotations.

Modules import LIBERO lazily (``env`` on import, the others when used), so this package and the CLI stay cheap
to import: ``from sgvla.libero.env import make_backend``.
"""
