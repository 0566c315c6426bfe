"""LIBERO-Spatial simulation backend: offline LIBERO setup, LeRobot's LIBERO env with perturbations
and render profiles, privileged scene state and ground-truth graphs, a scripted expert, and LIBERO-format
demonstrations with scene-graph annotations.

Modules import LIBERO lazily (``libero_env`` on import, the others when used), so this package and the
CLI stay cheap to import: ``from sgvla.sim.libero_env import make_backend``.
"""
