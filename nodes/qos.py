"""rclpy QoS profiles of the node graph, built from the one table in `sgvla.launch.nodes` (depth, reliability,
durability, and why each topic class gets its profile)."""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

from sgvla.launch.nodes import QOS as TABLE

QOS = {name: QoSProfile(depth=q.depth, history=HistoryPolicy.KEEP_LAST,
                        reliability=ReliabilityPolicy.RELIABLE if q.reliable else ReliabilityPolicy.BEST_EFFORT,
                        durability=DurabilityPolicy.TRANSIENT_LOCAL if q.latched else DurabilityPolicy.VOLATILE)
       for name, q in TABLE.items()}
