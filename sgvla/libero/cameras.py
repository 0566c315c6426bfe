"""LIBERO's cameras: every camera a LIBERO scene has, and the two LeRobot's LIBERO env renders (agent view, wrist).

The one home of these names for the LIBERO code (suite, backend, perturbations); a light module, so that a plan's
config reads them without loading the simulator.
"""

CAMERAS = ("agentview", "robot0_eye_in_hand", "frontview", "birdview", "sideview", "galleryview", "robot0_robotview")
DEFAULT_CAMERAS = CAMERAS[:2]  # what LeRobot's LIBERO env renders: the agent view and the wrist camera
