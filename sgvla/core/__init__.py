"""The core: what every embodiment shares and none depends on.

Typed configuration and registries, state and observation types, statistics, paths and process settings
(loopback-only ROS environment, scheduling). It imports only ``sgvla.scene_graph`` (also core) and never an
embodiment, a simulator, LeRobot or ROS; `tests/foundation/test_layers.py` checks every import's direction.
"""
