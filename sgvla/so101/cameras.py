"""The SO101 rig's cameras: the agent view (a fixed camera facing the arm) and the wrist camera.

The one home of these names for the arm, its twin, perception and the SO101 suites: a rig config
(``config/hardware/*.yaml``) names its cameras with them, the twin renders cameras of the same names, and datasets
key images ``observation.images.<name>``. A light module, so that a plan's config reads them without loading
anything. (LIBERO's own agent view shares the name ``agentview``; LIBERO's names live in ``sgvla.libero.cameras``.)
"""

AGENTVIEW, WRIST = "agentview", "wrist"
CAMERAS = (AGENTVIEW, WRIST)
