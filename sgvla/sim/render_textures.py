"""Textures made for drawing at a camera's resolution: a render model's large 2D textures, box-filtered down.

A LIBERO-Spatial scene carries 4096x4096 textures (its bowls and plate: 144 of its 180 MiB of texture data); an
OpenGL context holds each again with its mipmaps (a third more), and software OpenGL samples a 64-256 px image
from the mipmap levels a few times the image's size anyway. A render model (:mod:`sgvla.sim.render_meshes`) whose
2D textures are at most ``max_side`` texels on a side draws the same scene from those levels: each halving is the
2x2 box filter that builds a mipmap level. Cube and skybox textures, and those built in, are kept as they are.

Shrunk textures are made from the texture file as MuJoCo decodes it, and cached in ``cache_dir()`` (the render
meshes' cache folder) keyed by a hash of the file and the size, so a worker decodes a large texture only once per
machine; the making is deterministic, so the cache is only ever a speed-up.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

import mujoco
import numpy as np

from sgvla.sim.render_meshes import cache_dir

FORMAT = 2  # bump when what is cached (or how it is made) changes


def texture_side(image_size: int, texels_per_pixel: int = 4) -> int:
    """The largest texture side worth drawing in ``image_size`` px images: the power of two at or above
    ``texels_per_pixel`` texels per image pixel (a texture wraps a whole object, of which a camera sees part)."""
    return 1 << max(0, int(np.ceil(np.log2(texels_per_pixel * image_size))))


def _decoded(texture: mujoco.MjsTexture) -> tuple[np.ndarray, int]:
    """The texture as MuJoCo decodes its file: (height, width, channels) uint8 and the colour space it resolved."""
    spec = mujoco.MjSpec()
    spec.add_texture(name="t", type=mujoco.mjtTexture.mjTEXTURE_2D, file=texture.file, colorspace=texture.colorspace,
                     nchannel=texture.nchannel, hflip=texture.hflip, vflip=texture.vflip)
    model = spec.compile()
    shape = (int(model.tex_height[0]), int(model.tex_width[0]), int(model.tex_nchannel[0]))
    return np.array(model.tex_data).reshape(shape), int(model.tex_colorspace[0])


def halved(image: np.ndarray, times: int) -> np.ndarray:
    """``image`` (H, W, C) uint8 box-filtered down by 2 ``times`` times (H and W divisible by 2**times): each level
    the rounded mean of 2x2 texels of the one above, as mipmap levels are made (summed in 16 bits: a 4096x4096
    texture costs a quarter of its size in working memory, not four times)."""
    for _ in range(times):
        h, w, c = image.shape
        total = image.reshape(h // 2, 2, w // 2, 2, c).sum(axis=(1, 3), dtype=np.uint16)
        image = ((total + 2) // 4).astype(np.uint8)
    return image


def _halvings(height: int, width: int, max_side: int) -> int:
    """How often a height x width texture is halved to fit ``max_side`` (0 when it fits, or cannot halve evenly)."""
    times = 0
    while max(height, width) >> times > max_side:
        if (height >> times) % 2 or (width >> times) % 2:
            return 0
        times += 1
    return times


def shrunk(texture: mujoco.MjsTexture, max_side: int, folder: Path) -> tuple[np.ndarray, int] | None:
    """``texture``'s image at most ``max_side`` on a side and its colour space, from the cache when made before;
    None when it already fits (or cannot halve evenly)."""
    digest = hashlib.sha256(f"{FORMAT} {max_side} {int(texture.colorspace)} {texture.hflip} {texture.vflip} "
                            f"{texture.nchannel}".encode())
    digest.update(Path(texture.file).read_bytes())
    path = folder / f"{digest.hexdigest()[:40]}.npz"
    if path.is_file():
        with np.load(path) as cached:
            return (cached["image"], int(cached["colorspace"])) if cached["image"].size else None
    image, colorspace = _decoded(texture)
    times = _halvings(image.shape[0], image.shape[1], max_side)
    small = halved(image, times) if times else np.zeros((0, 0, 0), dtype=np.uint8)
    del image
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz.tmp")  # written whole, then renamed: readers never see half
    with os.fdopen(fd, "wb") as f:
        np.savez(f, image=small, colorspace=colorspace)
    os.replace(tmp, path)
    return (small, colorspace) if small.size else None


def shrink_textures(spec: mujoco.MjSpec, max_side: int, folder: Path | None = None) -> int:
    """Replace every 2D texture file of ``spec`` larger than ``max_side`` by its `shrunk` image (the spec is
    modified); how many were replaced."""
    folder = cache_dir().parent / "render_textures" if folder is None else Path(folder)
    count = 0
    for texture in spec.textures:
        if texture.type != mujoco.mjtTexture.mjTEXTURE_2D or not texture.file or not Path(texture.file).is_file():
            continue
        made = shrunk(texture, max_side, folder)
        if made is None:
            continue
        image, colorspace = made
        texture.file = ""
        texture.content_type = ""
        texture.height, texture.width, texture.nchannel = image.shape
        texture.colorspace = mujoco.mjtColorSpace(colorspace)
        texture.hflip = texture.vflip = False  # the decoded image is already flipped
        texture.data = image.tobytes()
        count += 1
    return count
