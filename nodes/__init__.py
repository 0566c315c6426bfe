"""ROS 2 nodes of sgvla (installed as the `sgvla_ros` package): thin rclpy wrappers around sgvla."""
