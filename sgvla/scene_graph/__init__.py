"""Scene-graph core: ontology, ground-truth relations, prompt text, parsing and metrics.

Pure numpy; no simulator or ROS imports. Arrays in, graphs and scores out.
"""

from sgvla.scene_graph.codec import GraphDecoder, TripletCodec, decoder_for, relation_masks
from sgvla.scene_graph.ground_truth import ViewBatch, ViewGraph, ground_truth_batch, ground_truth_graphs
from sgvla.scene_graph.metrics import (
    PRF,
    BenchmarkScores,
    FrameScore,
    aggregate,
    aggregate_encoded,
    encode,
    score_frame,
)
from sgvla.scene_graph.ontology import FAMILIES, INVERSE, RELATIONS, Ontology, display_name, load_ontology
from sgvla.scene_graph.parse import ParseResult, Rejection, parse_triplets
from sgvla.scene_graph.projection import Camera, GeomBatch, ObjectGeoms, project_boxes, project_boxes_batch
from sgvla.scene_graph.relations import RelationParams, assign_relations, assign_relations_batch
from sgvla.scene_graph.serialize import MANIPULATED, compose_prompt, format_prompt_context, triplet_lines
from sgvla.scene_graph.triplet import Graph, Triplet

__all__ = [
    "FAMILIES",
    "INVERSE",
    "MANIPULATED",
    "PRF",
    "RELATIONS",
    "BenchmarkScores",
    "Camera",
    "FrameScore",
    "GeomBatch",
    "Graph",
    "GraphDecoder",
    "ObjectGeoms",
    "Ontology",
    "ParseResult",
    "Rejection",
    "RelationParams",
    "Triplet",
    "TripletCodec",
    "ViewBatch",
    "ViewGraph",
    "aggregate",
    "aggregate_encoded",
    "assign_relations",
    "assign_relations_batch",
    "compose_prompt",
    "decoder_for",
    "display_name",
    "encode",
    "format_prompt_context",
    "ground_truth_batch",
    "ground_truth_graphs",
    "load_ontology",
    "parse_triplets",
    "project_boxes",
    "project_boxes_batch",
    "relation_masks",
    "score_frame",
    "triplet_lines",
]
