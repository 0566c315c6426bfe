"""Tiny random-weight VLMs built offline, for tests and benchmarks of the client code paths.

The model is a real Qwen2.5-VL architecture (a few layers, 64-wide) with a small byte-level
BPE tokenizer trained on the scene-graph vocabulary, saved with ``save_pretrained`` so it loads
through exactly the ``from_pretrained`` path users take with a real checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from sgvla.scene_graph.ontology import RELATIONS, load_ontology

SPECIAL_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>",
    "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>",
)
# Qwen2-VL's chat layout without its default system message.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
VOCAB_SIZE = 640


def _corpus() -> list[str]:
    objects = load_ontology("libero_spatial").objects + load_ontology("so101_tabletop").objects
    lines = [f"({s}, {r}, {o})" for s in objects for r in RELATIONS for o in objects[:3]]
    lines += ["You are given an image of a robot scene. List spatial relations, one triplet per line.",
              '{"triplets": [{"subject": "plate_1", "relation": "is_left_of", "object": "cookies_1"}]}']
    return lines


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_corpus(), trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=list(SPECIAL_TOKENS[1:]), padding_side="left",
    )


def build_tiny_qwen2_5_vl(out_dir: str | Path, seed: int = 0) -> Path:
    """Save a random Qwen2.5-VL (about 0.2M parameters) and its processor under ``out_dir``."""
    import torch
    from transformers import (Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration, Qwen2_5_VLProcessor,
                              Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    hidden = 64
    config = Qwen2_5_VLConfig(
        text_config=dict(
            vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"],
        ),
        vision_config=dict(depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=hidden,
                           patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=56,
                           fullatt_block_indexes=[1]),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    pixels = dict(min_pixels=56 * 56, max_pixels=112 * 112)
    processor = Qwen2_5_VLProcessor(
        image_processor=Qwen2VLImageProcessor(**pixels),
        video_processor=Qwen2VLVideoProcessor(**pixels),
        tokenizer=tokenizer, chat_template=CHAT_TEMPLATE,
    )
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return out_dir


def write_annotated_libero_file(path: str | Path, task: str, demos: int = 2, frames: int = 6, size: int = 64,
                                seed: int = 0, graph: list[tuple[str, str, str]] | None = None) -> Path:
    """A LIBERO-layout HDF5 file in the ``sgvla annotate`` format, with random images and graphs
    (or ``graph`` in every frame and view)."""
    import json

    import h5py
    import numpy as np

    from sgvla.scene_graph.ontology import INVERSE
    from sgvla.vlm.frames import TaskTable

    rng = np.random.default_rng(seed)
    objects = load_ontology("libero_spatial").objects
    image_keys = TaskTable.load().image_keys  # the LIBERO layout's cameras
    path = Path(path)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        data.attrs["sgvla_objects"] = json.dumps(list(objects))
        data.attrs["sgvla_annotation_version"] = "1"
        data.attrs["problem_info"] = json.dumps({"language_instruction": task})
        for d in range(demos):
            obs = data.create_group(f"demo_{d}/obs")
            for key in image_keys.values():
                obs[key] = rng.integers(0, 256, (frames, size, size, 3), dtype=np.uint8)
            obs["object_positions"] = rng.normal(size=(frames, len(objects), 3))
            for view in image_keys:
                graphs = []
                for _ in range(frames):
                    if graph is not None:
                        graphs.append(json.dumps([list(t) for t in graph]))
                        continue
                    pairs = rng.choice(len(objects), size=(4, 2))
                    rels = rng.choice(len(RELATIONS), size=4)
                    triplets = {(objects[a], RELATIONS[r], objects[b]) for (a, b), r in zip(pairs, rels) if a != b}
                    triplets |= {(o, INVERSE[r], s) for s, r, o in triplets}
                    graphs.append(json.dumps(sorted(triplets)))
                obs.create_dataset(f"{view}_scene_graph", data=graphs, dtype=h5py.string_dtype())
                obs[f"{view}_boxes"] = np.full((frames, len(objects), 4), -1, dtype=np.int32)
    return path
