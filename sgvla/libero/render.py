"""Render profiles: LIBERO's look for learned policies, a cheaper one for privileged runs.

``reference`` changes nothing, so images match what LeRobot's LIBERO env renders
(what policies were fine-tuned on), and it keeps LeRobot's hard resets. ``fast``
drops reflections and MSAA (LIBERO scenes cast no visible shadows, the flag is
cleared anyway), draws decimated meshes (:mod:`sgvla.sim.render_meshes`: the
Panda, its pedestal and the objects have 300k triangles, nearly all of a frame's
cost on a CPU; physics, geom frames and with them the scene graphs stay those
of the full model), and resets softly so the renderer, and with it these
settings, survives resets. It is for the scripted expert and regression runs,
never for learned policies.

``fast`` is also what keeps a rendering simulator worker small (issue 40: 1.95 GiB resident before, 650 MiB at
64 px): the physics model compiles with one-texel placeholder textures (the drawn scene comes from the render
model's context, which holds the textures), the render model has no shadow map
(shadows are off) and its 2D textures at most 4 texels per image pixel (:mod:`sgvla.sim.render_textures`: the bowls'
and plate's 4096x4096 become 256x256 at 64 px; at 64 px, a fifth of the pixels move by at most 2 levels), and
robosuite's own context is freed before the render model is made.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import mujoco

from sgvla.sim.heap import release_free_memory
from sgvla.sim.render_meshes import Decimation, render_model
from sgvla.sim.render_textures import shrink_textures, texture_side

# LIBERO's cameras see the table from a metre at 128-256 px (a pixel is 3-8 mm there), the wrist camera the fingers
# from centimetres (meshes a camera rides on get half the tolerance).
LIBERO_DECIMATION = Decimation(tolerance=1e-3, weld=1e-3)


@dataclass(frozen=True)
class RenderProfile:
    name: str
    shadows: bool
    reflections: bool
    msaa: bool
    hard_reset: bool  # rebuild model and renderer at every reset, as LeRobot does by default
    decimated_meshes: bool = False
    # 2D textures at most `texture_side(image size)` texels on a side in the render model (decimated_meshes only)
    small_textures: bool = False

    @property
    def changes_renderer(self) -> bool:
        return not (self.shadows and self.reflections and self.msaa) or self.decimated_meshes

    def apply(self, sim, xml: Callable[[], str], cameras: Sequence[str], image_size: int) -> None:
        """Apply to a robosuite ``MjSim`` whose offscreen renderer exists; ``xml`` gives the MJCF the sim was
        compiled from, ``cameras`` are those drawn (for the render model) at ``image_size`` px (for its textures).
        MSAA and meshes need a new GL context; a soft reset keeps it."""
        context = sim._render_context_offscreen
        if context is None or not self.changes_renderer:
            return
        context.scn.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = int(self.shadows)
        context.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = int(self.reflections)
        rebuild = not self.msaa and sim.model.vis.quality.offsamples != 0
        sim.model.vis.quality.offsamples = sim.model.vis.quality.offsamples if self.msaa else 0
        new_model = self.decimated_meshes and getattr(context, "render_model", None) is None
        if not (rebuild or new_model):
            return
        context.gl_ctx.make_current()
        context.con.free()  # robosuite's context (the physics model's meshes) goes before the render model comes
        if new_model:
            spec = mujoco.MjSpec.from_string(xml())
            if not self.shadows:  # no shadow is drawn: no shadow map (4096x4096 depth texels in the context)
                spec.visual.quality.shadowsize = 0
            if self.small_textures:
                shrink_textures(spec, texture_side(image_size))
            context.render_model = render_model(spec, sim.model._model, LIBERO_DECIMATION, cameras)
            del spec
            # robosuite remakes the MuJoCo context with this method (buffer resizes too): from the render model now.
            context._set_mujoco_context_and_buffers = partial(_render_model_context, context)
        context._set_mujoco_context_and_buffers()
        release_free_memory()


def draw_with_own_context(sim) -> None:
    """Make a robosuite ``MjSim``'s offscreen context current before each of its renders.

    robosuite draws with whichever OpenGL context is current on the thread, and frees an env's EGL context with
    ``eglReleaseThread``, which unbinds any context: when another env of the process is freed (its close, or the
    garbage collector, at any moment), the next images of the living env are garbage, and drawn faster. Binding
    before each render costs microseconds and changes no pixel of a correct image."""
    context = sim._render_context_offscreen
    if context is None or "render" in vars(context):
        return
    draw = context.render

    def render(*args, **kwargs):
        context.gl_ctx.make_current()
        return draw(*args, **kwargs)

    context.render = render


def _render_model_context(context) -> None:
    """robosuite's ``MjRenderContext._set_mujoco_context_and_buffers`` with the meshes of ``context.render_model``;
    buffer size and samples follow the physics model's, as robosuite sets them there."""
    model, physics = context.render_model, context.model._model
    model.vis.global_.offwidth, model.vis.global_.offheight = physics.vis.global_.offwidth, physics.vis.global_.offheight
    model.vis.quality.offsamples = physics.vis.quality.offsamples
    context.con = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150)
    mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, context.con)


RENDER_PROFILES: dict[str, RenderProfile] = {
    "reference": RenderProfile("reference", shadows=True, reflections=True, msaa=True, hard_reset=True),
    "fast": RenderProfile("fast", shadows=False, reflections=False, msaa=False, hard_reset=False,
                          decimated_meshes=True, small_textures=True),
}


def render_profile(name: str) -> RenderProfile:
    if name not in RENDER_PROFILES:
        raise ValueError(f"unknown render profile {name!r}; choose one of {sorted(RENDER_PROFILES)}")
    return RENDER_PROFILES[name]
