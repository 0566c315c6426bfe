"""Embodiment: the SO101 arm. ``hardware``: the physical arm and rig through LeRobot (arms, safety, cameras,
calibration, recording, simulated Feetech buses); ``twin``: its MuJoCo twin, which drives the same arm code
(``twin`` may import ``hardware``, never the reverse)."""
