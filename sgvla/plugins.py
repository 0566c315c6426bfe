"""Every registered choice of sgvla in one import: the embodiments' suites, the policies, the graph sources and the
context modes. The CLI, the ROS nodes and the tests import this module; the layers below only read the registries
(a plan naming an unregistered choice fails when it loads, listing the registered ones)."""

import sgvla.core.context  # noqa: F401  the paper's five context modes
import sgvla.core.controls  # noqa: F401  the control arms: filler, wrong_graph, shuffled_graph
import sgvla.core.graph_source  # noqa: F401  ground_truth
import sgvla.libero.suite  # noqa: F401  libero_spatial
import sgvla.policies.registry  # noqa: F401  LeRobot checkpoints: act, smolvla, pi0, pi05, lerobot
import sgvla.policies.scripted  # noqa: F401  expert, prompt_grounded, hold
import sgvla.so101.arm_suite  # noqa: F401  so101_hardware
import sgvla.so101.perception.source  # noqa: F401  fiducial
import sgvla.so101.twin.suite  # noqa: F401  so101_twin
import sgvla.vlm.source  # noqa: F401  vlm
