"""sgvla's SO101 MuJoCo twin as a LeRobot robot (work in progress)."""
