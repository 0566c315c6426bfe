"""SO101 MuJoCo twin of the real tabletop: scene, physics and rendering, a pick-and-place
controller, and the evaluation backend of the five real tasks."""
