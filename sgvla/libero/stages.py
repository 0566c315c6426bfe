"""The Panda's progress stages (sgvla.core.progress), in a module of their own: the suite reads them for the engine,
the backend for its mid-episode triggers (sgvla.core.mid_episode), and neither may import the other."""

from sgvla.core.progress import PickPlaceSpec

# The Panda's fingers' gap (0.08 m open; ~5 mm on a bowl's wall) is closed below half open; the defaults' distances
# fit LIBERO's bowls (the expert's grasp moves the bowl ~1.5 cm before it rises).
PANDA_STAGES = PickPlaceSpec(opening=(1.0, -1.0), closed_below=0.04)
