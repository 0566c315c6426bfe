"""Serving policies: one copy of each served policy's weights for many simulator workers, their steps batched.

- `server`: the `PolicyServer` (a host thread per policy, batching concurrent episodes' steps);
- `batch`: plain policies as the `BatchPolicy`s a server hosts;
- `remote`: `RemotePolicy`, a worker's `Policy` whose steps run in a server, over any transport;
- `local`: the server in a process of this machine behind a Unix socket (`LocalServer`);
- `ray`: the server in an actor of a Ray cluster (`RayServer`);
- `handle`: `ServerHandle`, what a run supervises of its server, local or Ray;
- `plan`: which of a plan's policies a server hosts, and the server a plan builds.
"""
