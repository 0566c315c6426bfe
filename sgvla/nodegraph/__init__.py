"""The ROS 2 node graph's logic, ROS-free: what the nodes in `nodes/` wrap.

- `codec`: dataclass trees of numpy arrays (a SceneState, episode facts) to bytes and back, bit-exact;
- `episode`: the simulator half (`SimSession`, for sim_bridge) and the policy half (`PolicySession`, for
  vla_policy) of the in-process episode loop, and the evaluator's plan and records (`TopicEvaluation`);
- `graphs`: per-camera ground-truth graphs from an encoded state (the scene_graph node);
- `overlay`: a scene graph drawn on a camera image;
- `bag`: rosbag2 MCAP files with the rosbags package (no ROS install needed).

`sgvla.launch.plan` describes which nodes run with which parameters; `sgvla.launch.run` runs them.
"""
