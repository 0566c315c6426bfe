"""Conversions between sgvla's plain graph records and sgvla_interfaces messages.

A graph record is the JSON-ready dict sgvla writes to JSONL files:
{"camera": str, "source": str, "objects": [str], "triplets": [[subject, relation, object]],
 "model": str, "prompt_version": str}.
"""

from sgvla_interfaces.msg import SceneGraph, Triplet


def record_to_msg(record: dict, frame_id: str = "world") -> SceneGraph:
    msg = SceneGraph()
    msg.header.frame_id = frame_id
    msg.camera = record["camera"]
    msg.source = record.get("source", SceneGraph.SOURCE_GROUND_TRUTH)
    msg.objects = list(record.get("objects", []))
    msg.triplets = [Triplet(subject=s, relation=r, object=o) for s, r, o in record["triplets"]]
    msg.model = record.get("model", "")
    msg.prompt_version = record.get("prompt_version", "")
    return msg


def msg_to_record(msg: SceneGraph) -> dict:
    return {
        "camera": msg.camera,
        "source": msg.source,
        "objects": list(msg.objects),
        "triplets": [[t.subject, t.relation, t.object] for t in msg.triplets],
        "model": msg.model,
        "prompt_version": msg.prompt_version,
    }
