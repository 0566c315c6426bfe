"""sgvla's suites as LeRobot environments (work in progress)."""
