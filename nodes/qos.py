"""QoS profiles chosen once for the whole node graph.

Scene graphs, prompts and results are small and must not be lost: reliable, keep last 10.
Camera images and joint states are sensor data: best effort, keep last 1 (latest frame wins).
"""

from rclpy.qos import QoSProfile, ReliabilityPolicy, HistoryPolicy, qos_profile_sensor_data

RELIABLE = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, history=HistoryPolicy.KEEP_LAST)
SENSOR = qos_profile_sensor_data
