"""Meshes made for drawing: a second, render-only MuJoCo model whose large meshes are decimated.

Software OpenGL (EGL/OSMesa on a CPU) spends nearly all of a frame on mesh triangles: the SO101's visual meshes
have 400k of them, LIBERO's Panda and objects 300k, where a camera image has 65k pixels. A render model is the
scene's own spec with every mesh above ``Decimation.min_faces`` faces replaced by a quadric decimation of it
(``fast_simplification``), compiled, and its vertices moved into the frames the physics model gave the full
meshes. It is only ever used to make OpenGL contexts (``mujoco.Renderer(render_model)``,
``mujoco.MjrContext(render_model)``): the scene is still built from the physics model's data, so physics,
collisions, geom frames and sizes, and with them every scene graph, stay exactly what they are.

Why the frames: MuJoCo moves each mesh into its own inertial frame when it compiles and folds that offset into
the geom's pose. A decimated mesh has a slightly different inertial frame, so its compiled vertices are mapped
back into the full mesh's frame, where ``data.geom_xpos``/``geom_xmat`` of the physics model place them.

Decimated meshes are generated on first use and cached in ``cache_dir()`` (``$SGVLA_CACHE_DIR``, else
``$XDG_CACHE_HOME/sgvla``, else ``~/.cache/sgvla``), one file per mesh keyed by a hash of the mesh as MuJoCo loaded
it and of the decimation settings; the generation is deterministic, so a cache is only ever a speed-up.
Textured meshes keep their texture: each decimated corner takes the texture coordinate of the nearest original
triangle's mapping (extended linearly over it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import mujoco
import numpy as np

FORMAT = 2  # bump when what is cached (or how it is made) changes
CACHE_ENV = "SGVLA_CACHE_DIR"


@dataclass(frozen=True)
class Decimation:
    """How far meshes are simplified, in model units (metres).

    A mesh with more than ``min_faces`` faces is welded at ``weld`` (vertices in one cell of that grid merged: CAD
    exports are full of sub-millimetre detail and sliver fans, where quadric decimation otherwise stalls at a third
    of the faces or spends its budget there and cuts the shape), then decimated to the fewest faces of the ladder
    ``FRACTIONS`` whose surface stays within ``tolerance`` of the full mesh both ways (99th percentile of the
    distances of dense surface samples); a mesh no rung keeps within it is drawn as it is. Meshes of a body that
    carries a camera (and of the bodies below it) are seen from centimetres away: they are welded and kept within
    ``close_up`` times weld and tolerance."""

    tolerance: float = 5e-4
    weld: float = 5e-4
    min_faces: int = 500
    aggressiveness: float = 3.0  # fast_simplification's ``agg``: lower is slower and keeps the shape better
    close_up: float = 0.5

    def __post_init__(self):
        if self.tolerance <= 0 or self.weld < 0:
            raise ValueError(f"decimation needs tolerance > 0 and weld >= 0, got {self.tolerance}, {self.weld}")
        if self.min_faces < 4:
            raise ValueError(f"decimation min_faces must be >= 4, got {self.min_faces}")
        if not 0 < self.close_up <= 1:
            raise ValueError(f"decimation close_up must be in (0, 1], got {self.close_up}")

    def near_camera(self) -> Decimation:
        """The settings for meshes a camera rides on."""
        return replace(self, tolerance=self.tolerance * self.close_up, weld=self.weld * self.close_up, close_up=1.0)


FRACTIONS = (0.02, 0.03, 0.05, 0.08, 0.12, 0.18, 0.27, 0.4, 0.6)  # of the welded mesh's faces


@dataclass(frozen=True)
class MeshData:
    """A triangle mesh: vertices (V, 3), faces (F, 3) and, for textured meshes, the texture coordinate of each
    face corner (F, 3, 2)."""

    vert: np.ndarray
    face: np.ndarray
    corner_uv: np.ndarray | None = None

    def digest(self) -> str:
        h = hashlib.sha256()
        for array in (self.vert.astype(np.float32), self.face.astype(np.int32)):
            h.update(array.tobytes())
        h.update(b"uv" if self.corner_uv is None else self.corner_uv.astype(np.float32).tobytes())
        return h.hexdigest()


def cache_dir() -> Path:
    """Where decimated meshes are kept (see the module docstring)."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser() / "render_meshes"
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "sgvla" / "render_meshes"


def _rotation(quat: np.ndarray) -> np.ndarray:
    matrix = np.empty(9)
    mujoco.mju_quat2Mat(matrix, np.asarray(quat, dtype=np.float64))
    return matrix.reshape(3, 3)


def is_textured(model: mujoco.MjModel, mesh: int) -> bool:
    """Some geom draws ``mesh`` with a material that has a texture."""
    geoms = np.flatnonzero((model.geom_type == mujoco.mjtGeom.mjGEOM_MESH) & (model.geom_dataid == mesh))
    materials = model.geom_matid[geoms]
    return bool(model.ntex and any(m >= 0 and (model.mat_texid[m] >= 0).any() for m in materials))


def mesh_data(model: mujoco.MjModel, mesh: int, textured: bool) -> MeshData:
    """Mesh ``mesh`` of a compiled model, in its compiled frame, with vertices at the same position welded into one
    (MuJoCo keeps a vertex per face corner where texture coordinates differ)."""
    v0, nv = model.mesh_vertadr[mesh], model.mesh_vertnum[mesh]
    f0, nf = model.mesh_faceadr[mesh], model.mesh_facenum[mesh]
    vert = np.array(model.mesh_vert[v0:v0 + nv], dtype=np.float64)
    face = np.array(model.mesh_face[f0:f0 + nf], dtype=np.int64)
    corner_uv = None
    if textured and model.mesh_texcoordnum[mesh]:
        t0 = model.mesh_texcoordadr[mesh]
        uv = np.asarray(model.mesh_texcoord[t0:t0 + model.mesh_texcoordnum[mesh]], dtype=np.float64)
        corner_uv = uv[np.asarray(model.mesh_facetexcoord[f0:f0 + nf])]
    unique, inverse = np.unique(vert, axis=0, return_inverse=True)
    return MeshData(unique, inverse.reshape(-1)[face], corner_uv)


def _corner_uv(source: MeshData, vert: np.ndarray, face: np.ndarray) -> np.ndarray:
    """Texture coordinates (F, 3, 2) of a decimated mesh's corners: each face takes the affine texture mapping of
    the source triangle nearest its centroid among those facing the same way (so a face stays on one chart)."""
    from scipy.spatial import cKDTree  # robosuite's dependency; only textured (LIBERO) meshes get here

    src_tri = source.vert[source.face]  # (S, 3, 3)
    src_normal = np.cross(src_tri[:, 1] - src_tri[:, 0], src_tri[:, 2] - src_tri[:, 0])
    src_normal /= np.maximum(np.linalg.norm(src_normal, axis=1, keepdims=True), 1e-12)
    tri = vert[face]
    centroid = tri.mean(axis=1)
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    k = min(16, len(src_tri))
    distance, candidates = cKDTree(src_tri.mean(axis=1)).query(centroid, k=k)
    distance, candidates = distance.reshape(len(face), k), candidates.reshape(len(face), k)
    alignment = np.einsum("fkj,fj->fk", src_normal[candidates], normal)
    score = distance / np.maximum(alignment, 1e-3)  # nearest, among those facing the same way
    best = candidates[np.arange(len(face)), np.argmin(score, axis=1)]
    a, b, c = src_tri[best, 0], src_tri[best, 1], src_tri[best, 2]
    basis = np.stack([b - a, c - a], axis=2)  # (F, 3, 2)
    # Least-squares barycentric coordinates of each corner in the plane of its source triangle.
    gram = np.einsum("fij,fik->fjk", basis, basis)
    gram += np.eye(2) * 1e-18
    rhs = np.einsum("fij,fci->fcj", basis, tri - a[:, None])  # (F, 3 corners, 2)
    weights = np.linalg.solve(gram[:, None], rhs[..., None])[..., 0]  # (F, 3, 2)
    uv = source.corner_uv[best]  # (F, 3, 2)
    return uv[:, None, 0] + weights[..., :1] * (uv[:, None, 1] - uv[:, None, 0]) \
        + weights[..., 1:] * (uv[:, None, 2] - uv[:, None, 0])


def weld(vert: np.ndarray, face: np.ndarray, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
    """Vertices in one cell of a ``tolerance`` grid merged into their mean; faces that collapse, or repeat another
    face, dropped."""
    if tolerance <= 0:
        return vert, face
    _, inverse = np.unique(np.round(vert / tolerance).astype(np.int64), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    count = np.bincount(inverse)
    merged = np.zeros((len(count), 3))
    np.add.at(merged, inverse, vert)
    merged /= count[:, None]
    face = inverse[face]
    face = face[(face[:, 0] != face[:, 1]) & (face[:, 1] != face[:, 2]) & (face[:, 0] != face[:, 2])]
    _, first = np.unique(np.sort(face, axis=1), axis=0, return_index=True)
    return merged, face[np.sort(first)]


def surface_samples(vert: np.ndarray, face: np.ndarray, spacing: float) -> tuple[np.ndarray, np.ndarray]:
    """Points on a mesh's surface about ``spacing`` apart and the face each lies on: every vertex (on one of its
    faces), points along every edge, and points inside every triangle in proportion to its area (placed by a
    fixed-seed generator: the same mesh, the same points)."""
    tri = vert[face]
    corner_face = np.full(len(vert), -1)
    corner_face[face.ravel()] = np.repeat(np.arange(len(face)), 3)
    edges = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]])  # (3F, 2, 3)
    count = np.ceil(np.linalg.norm(edges[:, 1] - edges[:, 0], axis=1) / spacing).astype(np.int64)
    edge = np.repeat(np.arange(len(edges)), count)
    t = (np.arange(len(edge)) - np.repeat(np.cumsum(count) - count, count) + 0.5) / np.repeat(count, count)
    along = edges[edge, 0] + t[:, None] * (edges[edge, 1] - edges[edge, 0])
    area = 0.5 * np.linalg.norm(np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), axis=1)
    inside = np.repeat(np.arange(len(tri)), np.floor(area / spacing**2).astype(np.int64))
    uv = np.random.default_rng(0).random((len(inside), 2))
    uv[uv.sum(axis=1) > 1] = 1 - uv[uv.sum(axis=1) > 1]
    a = tri[inside, 0]
    interior = a + uv[:, :1] * (tri[inside, 1] - a) + uv[:, 1:] * (tri[inside, 2] - a)
    used = corner_face >= 0
    return (np.concatenate([vert[used], along, interior]),
            np.concatenate([corner_face[used], edge % len(face), inside]))


def _segment_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    ab = b - a
    t = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.maximum(np.einsum("ij,ij->i", ab, ab), 1e-30), 0.0, 1.0)
    return np.linalg.norm(p - (a + t[:, None] * ab), axis=1)


def point_triangle_distance(p: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exact distances (N,) from points to triangles, row by row (degenerate triangles: to their edges)."""
    ab, ac, ap = b - a, c - a, p - a
    d00, d01, d11 = (np.einsum("ij,ij->i", x, y) for x, y in ((ab, ab), (ab, ac), (ac, ac)))
    d20, d21 = np.einsum("ij,ij->i", ap, ab), np.einsum("ij,ij->i", ap, ac)
    denom = d00 * d11 - d01 * d01
    ok = denom > 1e-30
    safe = np.where(ok, denom, 1.0)
    v, w = (d11 * d20 - d01 * d21) / safe, (d00 * d21 - d01 * d20) / safe
    inside = ok & (v >= 0) & (w >= 0) & (v + w <= 1)
    normal = np.cross(ab, ac)
    plane = np.abs(np.einsum("ij,ij->i", ap, normal)) / np.maximum(np.linalg.norm(normal, axis=1), 1e-30)
    edges = np.minimum(np.minimum(_segment_distance(p, a, b), _segment_distance(p, b, c)), _segment_distance(p, c, a))
    return np.where(inside, plane, edges)


class Surface:
    """A mesh's surface for distance queries: samples about ``spacing`` apart in a KD-tree find the candidate
    faces near a point (those of its ``neighbours`` nearest samples), exact point-triangle distances decide."""

    def __init__(self, vert: np.ndarray, face: np.ndarray, spacing: float, neighbours: int = 4):
        from scipy.spatial import cKDTree  # robosuite's dependency (LIBERO), installed with the stack

        self.vert, self.face, self.neighbours = vert, face, neighbours
        self.samples, self.owner = surface_samples(vert, face, spacing)
        self.tree = cKDTree(self.samples)

    def distance(self, points: np.ndarray) -> np.ndarray:
        k = min(self.neighbours, len(self.samples))
        _, nearest = self.tree.query(points, k=k)
        faces = self.face[self.owner[nearest.reshape(len(points), k)]]  # (N, k, 3)
        tri = self.vert[faces].reshape(-1, 3, 3)
        each = point_triangle_distance(np.repeat(points, k, axis=0), tri[:, 0], tri[:, 1], tri[:, 2])
        return each.reshape(len(points), k).min(axis=1)

    def some_samples(self, most: int) -> np.ndarray:
        """At most ``most`` of the samples, picked by a fixed-seed generator."""
        if len(self.samples) <= most:
            return self.samples
        return self.samples[np.random.default_rng(0).choice(len(self.samples), most, replace=False)]


def deviation(full: Surface, vert: np.ndarray, face: np.ndarray, spacing: float, limit: float = np.inf,
              most: int = 10_000) -> float:
    """How far two surfaces part: the 99th percentile of the distances from each one's samples (at most ``most``)
    to the other, the larger of both ways; the second way is skipped once the first exceeds ``limit``."""
    other = Surface(vert, face, spacing)
    there = float(np.percentile(other.distance(full.some_samples(most)), 99))
    if there > limit:
        return there
    return max(there, float(np.percentile(full.distance(other.some_samples(most)), 99)))


def _compact(vert: np.ndarray, face: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Drop vertices no face uses."""
    used = np.unique(face)
    remap = np.full(len(vert), -1)
    remap[used] = np.arange(len(used))
    return vert[used], remap[face]


def _simplify(source: MeshData, settings: Decimation) -> MeshData:
    """The fewest-faced rung of the ladder within tolerance (bisection: deviation falls as faces grow), else the
    source itself."""
    import fast_simplification

    spacing = settings.tolerance * 2
    full = Surface(source.vert, source.face, spacing)
    welded = weld(source.vert, source.face, settings.weld)
    targets = sorted({max(settings.min_faces, int(len(welded[1]) * f)) for f in FRACTIONS} - {len(welded[1])})
    targets = [t for t in targets if t < len(welded[1])] + [len(welded[1])]
    made: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}

    def passing(i: int) -> tuple[np.ndarray, np.ndarray] | None:
        if i not in made:
            vert, face = welded
            if targets[i] < len(face):
                vert, face = fast_simplification.simplify(vert, face.astype(np.int32), target_count=targets[i],
                                                          agg=settings.aggressiveness)
                vert, face = _compact(np.asarray(vert, dtype=np.float64),
                                      np.asarray(face, dtype=np.int64).reshape(-1, 3))
            within = deviation(full, vert, face, spacing, settings.tolerance) <= settings.tolerance
            made[i] = (vert, face) if within else None
        return made[i]

    low, high = 0, len(targets) - 1
    if passing(high) is None:
        return source
    while low < high:  # the first passing rung: passing(high) always holds
        middle = (low + high) // 2
        if passing(middle) is not None:
            high = middle
        else:
            low = middle + 1
    vert, face = made[high]
    return MeshData(vert, face, None if source.corner_uv is None else _corner_uv(source, vert, face))


def _key(source: MeshData, settings: Decimation) -> str:
    h = hashlib.sha256(f"{FORMAT} {settings} {FRACTIONS} "
                       f"fast_simplification {importlib.metadata.version('fast_simplification')}".encode())
    h.update(source.digest().encode())
    return h.hexdigest()[:40]


def decimated(source: MeshData, settings: Decimation, folder: Path | None = None) -> MeshData:
    """``source`` simplified by ``settings``, from the cache when it was made before."""
    folder = cache_dir() if folder is None else Path(folder)
    path = folder / f"{_key(source, settings)}.npz"
    if path.is_file():
        with np.load(path) as cached:
            return MeshData(cached["vert"], cached["face"], cached["corner_uv"] if "corner_uv" in cached else None)
    mesh = _simplify(source, settings)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {"vert": mesh.vert, "face": mesh.face}
    if mesh.corner_uv is not None:
        arrays["corner_uv"] = mesh.corner_uv
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz.tmp")  # written whole, then renamed: readers never see half
    with os.fdopen(fd, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)
    return mesh


def camera_meshes(model: mujoco.MjModel, cameras: Sequence[str] | None = None) -> set[int]:
    """Meshes drawn on a body that carries one of ``cameras`` (default: any camera), or on a body below one (a
    wrist camera's gripper and jaws)."""
    ids = range(model.ncam) if cameras is None else [model.camera(name).id for name in cameras]
    carriers = {int(model.cam_bodyid[c]) for c in ids if model.cam_bodyid[c] > 0}
    below = np.zeros(model.nbody, dtype=bool)
    for b in range(1, model.nbody):  # parents come before their children
        below[b] = b in carriers or below[model.body_parentid[b]]
    drawn = (model.geom_type == mujoco.mjtGeom.mjGEOM_MESH) & below[model.geom_bodyid]
    return {int(m) for m in model.geom_dataid[drawn]}


def _same_scene(render: mujoco.MjModel, physics: mujoco.MjModel) -> None:
    sizes = ("nbody", "ngeom", "nmesh", "ncam", "nlight", "nmat", "ntex", "nq", "nskin", "nflex")
    wrong = [n for n in sizes if getattr(render, n) != getattr(physics, n)]
    if wrong or not np.array_equal(render.geom_dataid, physics.geom_dataid) \
            or not np.array_equal(render.geom_type, physics.geom_type):
        raise ValueError(f"the render model's scene differs from the physics model's ({wrong or 'geom meshes'}): "
                         "it must be compiled from the same spec")


def render_model(spec: mujoco.MjSpec, physics: mujoco.MjModel, settings: Decimation = Decimation(),
                 cameras: Sequence[str] | None = None, folder: Path | None = None) -> mujoco.MjModel:
    """The model to make OpenGL contexts from for ``physics``, compiled from ``spec`` (the spec ``physics`` was
    compiled from, or a fresh copy of it; it is modified) with large meshes decimated; see the module docstring.
    ``cameras``: those that will draw (default: all), for the close-up meshes of cameras riding on a body."""
    meshes = list(spec.meshes)
    if len(meshes) != physics.nmesh:
        raise ValueError(f"spec has {len(meshes)} meshes, the physics model {physics.nmesh}: not its spec")
    replaced = {}
    close = camera_meshes(physics, cameras)
    for k, mesh in enumerate(meshes):
        if physics.mesh_facenum[k] <= settings.min_faces:
            continue
        source = mesh_data(physics, k, is_textured(physics, k))
        small = decimated(source, settings.near_camera() if k in close else settings, folder)
        if small is source or len(small.face) >= len(source.face):
            continue
        mesh.file = ""
        mesh.content_type = ""
        mesh.scale = [1.0, 1.0, 1.0]
        mesh.refpos = [0.0, 0.0, 0.0]
        mesh.refquat = [1.0, 0.0, 0.0, 0.0]
        mesh.uservert = small.vert.astype(np.float32).ravel().tolist()
        mesh.userface = small.face.astype(np.int32).ravel().tolist()
        mesh.usernormal, mesh.userfacenormal = [], []
        if small.corner_uv is not None:
            mesh.usertexcoord = small.corner_uv.astype(np.float32).ravel().tolist()
            mesh.userfacetexcoord = np.arange(3 * len(small.face), dtype=np.int32).tolist()
        else:
            mesh.usertexcoord, mesh.userfacetexcoord = [], []
        mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL  # any thin or open result compiles
        replaced[k] = small
    model = spec.compile()
    _same_scene(model, physics)
    for field in ("extent", "center", "meansize", "meanmass", "meaninertia"):  # same clip planes as the full scene
        setattr(model.stat, field, getattr(physics.stat, field))
    for k in replaced:  # back into the frame the physics model's geoms place the full mesh in
        rotation = _rotation(model.mesh_quat[k])
        v0, nv = model.mesh_vertadr[k], model.mesh_vertnum[k]
        model.mesh_vert[v0:v0 + nv] = model.mesh_vert[v0:v0 + nv] @ rotation.T + model.mesh_pos[k]
        n0, nn = model.mesh_normaladr[k], model.mesh_normalnum[k]
        model.mesh_normal[n0:n0 + nn] = model.mesh_normal[n0:n0 + nn] @ rotation.T
    return model


def drawn_faces(model: mujoco.MjModel, groups: tuple[int, ...] = (0, 1, 2)) -> int:
    """Mesh triangles one image draws with the geom groups ``groups`` shown (MuJoCo's default: 0, 1, 2); a mesh
    that several geoms draw counts each time."""
    drawn = (model.geom_type == mujoco.mjtGeom.mjGEOM_MESH) & np.isin(model.geom_group, groups)
    return int(model.mesh_facenum[model.geom_dataid[drawn]].sum())
