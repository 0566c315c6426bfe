"""Perception for the SO101 table: object poses from ArUco markers (no ROS; the nodes wrap it)."""
