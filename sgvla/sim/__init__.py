"""MuJoCo support shared by the simulated embodiments (LIBERO's Panda, the SO101 twin): scene state, objects,
obstacles and cameras read off a raw ``MjModel``/``MjData`` into the core's types (``mujoco_state``)."""
