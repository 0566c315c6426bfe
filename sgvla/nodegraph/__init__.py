"""The ROS 2 node graph's logic, ROS-free: what the nodes in `nodes/` wrap, each node a shell around one of these.

- `environment`: a simulated suite's backend stepped over topics (`EnvironmentSession`, for sim_bridge);
- `evaluation`: the evaluator's plan, goals and records (`TopicEvaluation`, for evaluator);
- `arm_protocol`: the operator's episode protocol on the SO101 arm (`ArmProtocol`, for arm_policy): homing, scene
  card, confirm, verdicts, freshness of the inputs, rollouts;
- `graph_sources`: the live graph of an episode stepped over topics, as a node received it (vla_policy's from the
  scene_graph node, arm_policy's from fiducial_graphs);
- `overlay`: a scene graph drawn on a camera image;
- `bag`: rosbag2 MCAP files with the rosbags package (no ROS install needed); a bag cut short is streamed
  (`mcap_stream`, `sqlite_bag`) up to its last complete message;
- `bag_contract`, `bag2dataset`: a bag into a LeRobot dataset, by a contract.

A policy node's build/cache/close of its policy is `sgvla.policies.session.PolicySession`, shared with the runner.
`sgvla.launch` describes which nodes run with which parameters; `sgvla.launch.run` runs them.
"""
