"""QoS profiles chosen once for the whole node graph; topics name them in `sgvla.launch.plan`.

- reliable: scene graphs, prompts, results: small and must not be lost (keep last 10).
- sensor: camera images and joint states: best effort, latest wins.
- commands: arm goals: reliable, depth 1, so the newest goal arrives and stale ones never queue.
- control / latched: episode control and one-off state, kept for late joiners (transient local).
- frames: lock-step simulation frames, reliable with a short queue, kept for a policy that subscribes late.
- clock: /clock, best effort.
"""

from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy


def _qos(depth: int, reliable: bool = True, latched: bool = False) -> QoSProfile:
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST,
                      reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL if latched else DurabilityPolicy.VOLATILE)


QOS = {
    "reliable": _qos(10),
    "sensor": _qos(5, reliable=False),
    "commands": _qos(1),
    "control": _qos(10, latched=True),
    "latched": _qos(1, latched=True),
    "frames": _qos(2, latched=True),
    "clock": _qos(1, reliable=False),
}
