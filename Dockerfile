# sgvla on a robot / GPU workstation: ROS 2 Jazzy (Ubuntu 24.04, Python 3.12), the project
# installed into the system Python, and the colcon workspace built.
#
#   docker build -t sgvla .
#   docker run --rm -it --gpus all --net=host --ipc=host \
#     --device /dev/ttyACM0 --device /dev/ttyACM1 --device /dev/video0 --device /dev/video2 \
#     -v /dev/bus/usb:/dev/bus/usb --device-cgroup-rule='c 189:* rmw' \
#     -v $HOME/.cache/huggingface:/root/.cache/huggingface -v $PWD/outputs:/sgvla/outputs sgvla
#   # inside: ros2 launch sgvla_ros sim_eval.launch.py  |  sgvla doctor
#
# /dev/ttyACM* are the SO101 follower and leader (Feetech bus), /dev/video* the cameras; the
# USB bus and the cgroup rule let pyrealsense2 reach an Intel RealSense.
FROM ros:jazzy-ros-base

ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 MUJOCO_GL=egl \
    RMW_IMPLEMENTATION=rmw_fastrtps_cpp
RUN apt-get update && apt-get install -y --no-install-recommends \
      python3-pip python3-colcon-common-extensions ros-jazzy-launch-ros ros-jazzy-robot-state-publisher \
      ffmpeg libegl1 libegl-mesa0 libgl1 libgl1-mesa-dri libosmesa6 libglib2.0-0 git \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /sgvla
# The ROS 2 message and rclpy wheels of requirements.txt are for PyPI-only machines; here the
# Jazzy packages provide them, so they are filtered out.
COPY requirements.txt pyproject.toml README.md ./
RUN grep -vE '^(ros-|catkin-pkg|rosbags)' requirements.txt > /tmp/requirements-docker.txt \
    && pip3 install --no-cache-dir --ignore-installed -r /tmp/requirements-docker.txt rosbags==0.11.9
COPY sgvla ./sgvla
COPY nodes ./nodes
COPY launch ./launch
COPY config ./config
COPY urdf ./urdf
COPY calibration ./calibration
COPY ros2_ws ./ros2_ws
RUN pip3 install --no-cache-dir --no-deps -e . \
    && . /opt/ros/jazzy/setup.sh \
    && cd ros2_ws && colcon build --symlink-install

RUN printf 'source /opt/ros/jazzy/setup.bash\nsource /sgvla/ros2_ws/install/setup.bash\n' >> /root/.bashrc
CMD ["bash"]
