"""Render profiles: LIBERO's look for learned policies, a cheaper one for privileged runs.

``reference`` changes nothing, so images match what LeRobot's LIBERO env renders
(what policies were fine-tuned on), and it keeps LeRobot's hard resets. ``fast``
drops reflections and MSAA (LIBERO scenes cast no visible shadows, the flag is
cleared anyway) for 2-3x cheaper software rendering, and resets softly so the
renderer, and with it these settings, survives resets. It is for the scripted
expert and regression runs, never for learned policies.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco


@dataclass(frozen=True)
class RenderProfile:
    name: str
    shadows: bool
    reflections: bool
    msaa: bool
    hard_reset: bool  # rebuild model and renderer at every reset, as LeRobot does by default

    @property
    def changes_renderer(self) -> bool:
        return not (self.shadows and self.reflections and self.msaa)

    def apply(self, sim) -> None:
        """Apply to a robosuite ``MjSim`` whose offscreen renderer exists (MSAA needs a new GL context)."""
        context = sim._render_context_offscreen
        if context is None or not self.changes_renderer:
            return
        context.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(self.shadows)
        context.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(self.reflections)
        if not self.msaa and sim.model.vis.quality.offsamples != 0:
            sim.model.vis.quality.offsamples = 0
            context.con.free()
            context._set_mujoco_context_and_buffers()


RENDER_PROFILES: dict[str, RenderProfile] = {
    "reference": RenderProfile("reference", shadows=True, reflections=True, msaa=True, hard_reset=True),
    "fast": RenderProfile("fast", shadows=False, reflections=False, msaa=False, hard_reset=False),
}


def render_profile(name: str) -> RenderProfile:
    if name not in RENDER_PROFILES:
        raise ValueError(f"unknown render profile {name!r}; choose one of {sorted(RENDER_PROFILES)}")
    return RENDER_PROFILES[name]
