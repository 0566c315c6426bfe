"""sgvla: does telling a VLA policy where things are (a spatial scene graph) change what it does?"""

__version__ = "0.1.0"
