"""Launch plans (which nodes with which parameters, one description for ``ros2 launch`` and ``sgvla launch``) and
the process runner of ``sgvla launch``. No ROS imports."""
