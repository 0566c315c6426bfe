"""Tiny random-weight LeRobot policies built offline, for tests and smoke runs without the hub.

Each is a real LeRobot policy with LIBERO's features (two cameras, 8-D state, 7-D action), saved
with `save_pretrained` together with its processors, so it loads through exactly the path a hub
checkpoint takes (`LeRobotPolicy(dir)`). SmolVLA names a VLM backbone by hub id; here it is a
random SmolVLM (a 2-layer Llama text model, a 1-layer vision tower) with a small byte-level BPE
tokenizer trained on LIBERO-Spatial instructions and scene-graph words, saved next to the policy.
Its token counts are therefore not SmolVLM2's; the truncation mechanics are the same.

    sgvla make-tiny-policy smolvla /tmp/tiny_smolvla

pi0 and pi05 cannot be made tiny: LeRobot 0.6.1 builds their PaliGemma and action expert from
`get_gemma_config(variant)` ("gemma_2b" or "gemma_300m" only, both 18 layers), a hard-coded 257152-token vocabulary,
a hard-coded 2048-wide image projector (so the VLM must be gemma_2b) and transformers' default SigLIP tower (27
layers of 1152); no config field shrinks them further. `build_weightless_pi0` and `build_weightless_pi05` save
everything but the weights offline (config, processors, a local PaliGemma-style tokenizer): their processors load
in a moment, and the model only with ``random_weights: true``. `build_pi0` and `build_pi05` (``sgvla make-tiny-policy
pi0|pi05 DIR``) also build that smallest real model, 4.0e9 and 4.1e9 parameters, in bfloat16 and save it with its
weights (8.3 and 8.7 GiB).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

IMAGE_KEYS = ("observation.images.image", "observation.images.image2")
STATE_DIM, ACTION_DIM = 8, 7
IMAGE_SIZE = 64  # what the tiny SmolVLA's vision tower sees (observations of any size are resized)
CHUNK = 10

SPECIAL_TOKENS = {  # SmolVLM's named special tokens; SmolVLA reads the fake-image and global-image ids
    "pad_token": "<|endoftext|>",
    "bos_token": "<|im_start|>",
    "eos_token": "<end_of_utterance>",
    "fake_image_token": "<fake_token_around_image>",
    "global_image_token": "<global-img>",
    "image_token": "<image>",
    "video_token": "<video>",
}
VOCAB_SIZE = 512

# Gemma's named special tokens, in the order of their ids (0-3) in PaliGemma's tokenizer, which prepends <bos>.
PALIGEMMA_SPECIAL_TOKENS = {"pad_token": "<pad>", "eos_token": "<eos>", "bos_token": "<bos>", "unk_token": "<unk>"}
TOKENIZER_DIR = "tokenizer"  # where a weightless pi0/pi05 keeps its tokenizer, inside the checkpoint folder


def _features() -> dict:
    from lerobot.configs import FeatureType, PolicyFeature

    features = {key: PolicyFeature(FeatureType.VISUAL, (3, 256, 256)) for key in IMAGE_KEYS}
    features["observation.state"] = PolicyFeature(FeatureType.STATE, (STATE_DIM,))
    return features


def _dataset_stats(quantiles: bool = False) -> dict:
    """Normalization stats: unit state, actions scaled to a tenth so random outputs stay in [-1, 1]; with
    `quantiles` also q01/q99 at the same scales (pi05 normalizes by quantiles)."""
    import torch

    stats = {
        "observation.state": {"mean": torch.zeros(STATE_DIM), "std": torch.ones(STATE_DIM)},
        "action": {"mean": torch.zeros(ACTION_DIM), "std": torch.full((ACTION_DIM,), 0.1)},
    }
    if quantiles:
        for key, scale in (("observation.state", 1.0), ("action", 0.1)):
            dim = len(stats[key]["mean"])
            stats[key].update(q01=torch.full((dim,), -scale), q99=torch.full((dim,), scale))
    return stats


def _dataset_features(dataset_root: Path) -> tuple:
    """A local LeRobot dataset's metadata and its policy input features: state and the RGB cameras (depth
    streams, one channel, are left out: the tiny policies' vision towers read three)."""
    from lerobot.configs import FeatureType
    from lerobot.datasets.lerobot_dataset import LeRobotDatasetMetadata
    from lerobot.utils.feature_utils import dataset_to_policy_features

    info = dataset_root / "meta" / "info.json"
    if not info.is_file():
        raise FileNotFoundError(f"{dataset_root} is not a LeRobot dataset (no meta/info.json)")
    meta = LeRobotDatasetMetadata("local/dataset", root=dataset_root)
    features = {k: ft for k, ft in dataset_to_policy_features(meta.features).items()
                if ft.type is FeatureType.STATE or (ft.type is FeatureType.VISUAL and ft.shape[0] == 3)}
    return meta, features


def _save(cfg, out_dir: Path, seed: int, dataset_root: Path | None = None) -> Path:
    """Build the policy as LeRobot does (`make_policy` with LIBERO's features, or with a dataset's: as
    `lerobot-train` would before training) and save it with processors."""
    import torch
    from lerobot.policies import make_policy, make_pre_post_processors

    from sgvla.policies.lerobot_vla import libero_env_config

    torch.manual_seed(seed)
    if dataset_root is None:
        policy = make_policy(cfg, env_cfg=libero_env_config())
        stats = _dataset_stats()
    else:
        meta, cfg.input_features = _dataset_features(Path(dataset_root))
        policy = make_policy(cfg, ds_meta=meta)
        stats = meta.stats
    preprocessor, postprocessor = make_pre_post_processors(cfg, dataset_stats=stats)
    out_dir.mkdir(parents=True, exist_ok=True)
    for part in (policy, preprocessor, postprocessor):
        part.save_pretrained(out_dir)
    return out_dir


def build_tiny_act(out_dir: str | Path, seed: int = 0, dataset: str | Path | None = None) -> Path:
    """ACT with an untrained ResNet-18 (no torchvision download) and a 32-wide transformer; with `dataset` (a
    local LeRobot dataset's folder) its features and stats instead of LIBERO's."""
    from lerobot.policies.act.configuration_act import ACTConfig

    cfg = ACTConfig(
        device="cpu", input_features=_features(), pretrained_backbone_weights=None, dim_model=32,
        n_heads=2, dim_feedforward=64, n_encoder_layers=1, n_decoder_layers=1, use_vae=False,
        chunk_size=CHUNK, n_action_steps=CHUNK,
    )
    return _save(cfg, Path(out_dir), seed, dataset)


def _tokenizer_corpus() -> list[str]:
    from sgvla.scene_graph.ontology import RELATIONS, display_name, load_ontology

    names = [display_name(o) for o in load_ontology("libero_spatial").objects]
    names += [f"target_{n}" for n in names]
    landmarks = ("the plate", "the ramekin", "the cookie box", "the stove", "the wooden cabinet", "table center")
    tasks = [f"pick up the black bowl {where} {lm} and place it on the plate"
             for where in ("between", "next to", "on", "in the top drawer of", "from") for lm in landmarks]
    triplets = [f"({s}, {r}, {o})" for s in names[:3] for r in RELATIONS for o in names]
    return tasks + triplets + ["Current simulator semantic context:", "Scene graph:", "View: agentview"]


def _train_bpe(special_tokens: list[str]):
    """A byte-level BPE trained on `_tokenizer_corpus`, `special_tokens` first (ids 0, 1, ...)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=special_tokens,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(_tokenizer_corpus(), trainer)
    return tok


def build_tokenizer():
    """A byte-level BPE with SmolVLM's special tokens (any text tokenizes; common words are single tokens)."""
    from transformers import PreTrainedTokenizerFast

    tok = _train_bpe(list(SPECIAL_TOKENS.values()))
    named = {k: SPECIAL_TOKENS[k] for k in ("pad_token", "bos_token", "eos_token")}
    extra = {k: v for k, v in SPECIAL_TOKENS.items() if k not in named}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token=SPECIAL_TOKENS["pad_token"],
                                   extra_special_tokens=extra, **named)


def build_tiny_smolvlm(out_dir: str | Path) -> Path:
    """A random SmolVLM config and processor: what SmolVLA loads by `vlm_model_name` (weights stay random)."""
    from transformers import SmolVLMConfig, SmolVLMImageProcessor, SmolVLMProcessor, SmolVLMVideoProcessor

    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    patch, scale = 16, 2
    processor = SmolVLMProcessor(
        image_processor=SmolVLMImageProcessor(do_image_splitting=False, size={"longest_edge": IMAGE_SIZE},
                                              max_image_size={"longest_edge": IMAGE_SIZE}),
        tokenizer=tokenizer, video_processor=SmolVLMVideoProcessor(),
        image_seq_len=(IMAGE_SIZE // patch) ** 2 // scale**2,
    )
    config = SmolVLMConfig(
        text_config=dict(model_type="llama", vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=1024, pad_token_id=tokenizer.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                           image_size=IMAGE_SIZE, patch_size=patch),
        scale_factor=scale, image_token_id=tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS["image_token"]),
        pad_token_id=tokenizer.pad_token_id,
    )
    processor.save_pretrained(out_dir)
    config.save_pretrained(out_dir)
    return out_dir


def build_tiny_smolvla(out_dir: str | Path, seed: int = 0, dataset: str | Path | None = None) -> Path:
    """SmolVLA over a tiny local backbone in ``out_dir/backbone``; tokenizer budget 48 as SmolVLA's; `dataset` as
    for `build_tiny_act`."""
    from lerobot.policies.smolvla.configuration_smolvla import SmolVLAConfig

    out_dir = Path(out_dir).resolve()
    backbone = build_tiny_smolvlm(out_dir / "backbone")
    cfg = SmolVLAConfig(
        device="cpu", input_features=_features(), vlm_model_name=str(backbone), load_vlm_weights=False,
        resize_imgs_with_padding=(IMAGE_SIZE, IMAGE_SIZE), chunk_size=CHUNK, n_action_steps=CHUNK, num_steps=2,
    )
    return _save(cfg, out_dir, seed, dataset)


def build_paligemma_tokenizer():
    """The byte-level BPE of `build_tokenizer` with Gemma's special tokens instead, prepending <bos> to every text as
    PaliGemma's tokenizer does (pi0 and pi05 pad with <pad> to their budget). Not PaliGemma's 257k SentencePiece
    vocabulary: token counts differ from the real ones, the budget mechanics do not."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    tok = _train_bpe(list(PALIGEMMA_SPECIAL_TOKENS.values()))
    bos = PALIGEMMA_SPECIAL_TOKENS["bos_token"]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A $B",
                                                       special_tokens=[(bos, tok.token_to_id(bos))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, **PALIGEMMA_SPECIAL_TOKENS)


def _pi_processors(cfg, stats: dict, tokenizer_dir: Path) -> tuple:
    """The pre/post-processors of `make_pi0_pre_post_processors` / `make_pi05_pre_post_processors` (LeRobot 0.6.1),
    step for step, with the tokenizer loaded from `tokenizer_dir`: LeRobot's functions name PaliGemma's hub
    tokenizer and load it as they build, which cannot happen offline."""
    from lerobot.policies.pi0.processor_pi0 import Pi0NewLineProcessor
    from lerobot.policies.pi05.processor_pi05 import Pi05PrepareStateTokenizerProcessorStep
    from lerobot.processor import (AbsoluteActionsProcessorStep, RelativeActionsProcessorStep,
                                   TokenizerProcessorStep, make_default_policy_processor_steps,
                                   make_policy_processor_pipelines)

    relative = RelativeActionsProcessorStep(enabled=cfg.use_relative_actions, exclude_joints=cfg.relative_exclude_joints,
                                            action_names=cfg.action_feature_names)
    steps = make_default_policy_processor_steps(cfg, stats)
    tokenize = TokenizerProcessorStep(tokenizer_name=str(tokenizer_dir), max_length=cfg.tokenizer_max_length,
                                      padding_side="right", padding="max_length")
    if cfg.type == "pi0":
        inputs = [steps.rename_observations, steps.add_batch_dim, Pi0NewLineProcessor(), tokenize, steps.to_device,
                  relative, steps.normalize]
    else:
        inputs = [steps.rename_observations, steps.add_batch_dim, relative, steps.normalize,
                  Pi05PrepareStateTokenizerProcessorStep(max_state_dim=cfg.max_state_dim), tokenize, steps.to_device]
    outputs = [steps.unnormalize, AbsoluteActionsProcessorStep(enabled=cfg.use_relative_actions, relative_step=relative),
               steps.to_cpu]
    return make_policy_processor_pipelines(input_steps=inputs, output_steps=outputs)


def _save_weightless_pi(cfg, out_dir: Path) -> Path:
    """`cfg` with LIBERO's features (as `make_policy` sets them), its processors and tokenizer; no weights."""
    from lerobot.configs import FeatureType
    from lerobot.policies.factory import env_to_policy_features

    from sgvla.policies.lerobot_vla import libero_env_config

    out_dir = Path(out_dir).resolve()
    features = env_to_policy_features(libero_env_config())
    cfg.output_features = {key: ft for key, ft in features.items() if ft.type is FeatureType.ACTION}
    tokenizer_dir = out_dir / TOKENIZER_DIR
    build_paligemma_tokenizer().save_pretrained(tokenizer_dir)
    preprocessor, postprocessor = _pi_processors(cfg, _dataset_stats(quantiles=True), tokenizer_dir)
    for part in (cfg, preprocessor, postprocessor):
        part.save_pretrained(out_dir)
    return out_dir


def build_weightless_pi0(out_dir: str | Path, dtype: str = "float32") -> Path:
    """pi0 (PaliGemma gemma_2b, expert gemma_300m: the smallest pair that runs, as the 2048-wide image projector
    feeds the VLM; with gemma_300m for both the image and text embeddings are 2048 and 1024 wide and the first
    forward fails) without weights; budget 48 as pi0's; chunks of `CHUNK`, 2 denoising steps. Not tiny: see above.
    It loads only with ``random_weights: true``."""
    from lerobot.policies.pi0.configuration_pi0 import PI0Config

    cfg = PI0Config(device="cpu", input_features=_features(), chunk_size=CHUNK, n_action_steps=CHUNK,
                    num_inference_steps=2, dtype=dtype)
    return _save_weightless_pi(cfg, Path(out_dir))


def build_weightless_pi05(out_dir: str | Path, dtype: str = "float32", lerobot_defaults: bool = False) -> Path:
    """pi05 as `build_weightless_pi0`; budget 200 as pi05's, quantile normalization (state and action). With
    `lerobot_defaults`, LeRobot's chunking and denoising steps (chunks of 50, 10 steps) instead of the small ones."""
    from lerobot.policies.pi05.configuration_pi05 import PI05Config

    small = {} if lerobot_defaults else {"chunk_size": CHUNK, "n_action_steps": CHUNK, "num_inference_steps": 2}
    cfg = PI05Config(device="cpu", input_features=_features(), dtype=dtype, **small)
    return _save_weightless_pi(cfg, Path(out_dir))


def _with_random_weights(out_dir: Path, seed: int) -> Path:
    """The weightless checkpoint in `out_dir` built at random, as `make_policy` builds it, and saved with its
    weights: a real checkpoint, loaded and checked as any other. Built in its dtype (`built_in_dtype`): LeRobot
    would build pi05 in float32 first (15.4 GiB) and convert it after."""
    import torch
    from lerobot.configs import PreTrainedConfig
    from lerobot.policies import make_policy

    from sgvla.policies.checkpoint import built_in_dtype
    from sgvla.policies.lerobot_vla import libero_env_config

    cfg = PreTrainedConfig.from_pretrained(out_dir)
    torch.manual_seed(seed)
    with built_in_dtype(cfg):
        policy = make_policy(cfg, env_cfg=libero_env_config())
    save_weights(policy.state_dict(), out_dir / "model.safetensors")
    return out_dir


SAFETENSORS_DTYPES = {"float32": "F32", "bfloat16": "BF16", "float16": "F16", "int64": "I64", "int32": "I32",
                      "bool": "BOOL", "uint8": "U8"}


def save_weights(state: dict, file: Path) -> Path:
    """`state` as a safetensors file, one tensor at a time: what `save_pretrained` writes (a model without shared
    tensors), without its whole-file copy in memory (8.7 GiB more for pi05)."""
    import json

    import torch

    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for key, tensor in state.items():
        size = tensor.numel() * tensor.element_size()
        header[key] = {"dtype": SAFETENSORS_DTYPES[str(tensor.dtype).removeprefix("torch.")],
                       "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    tmp = file.with_name(f".{file.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(len(raw).to_bytes(8, "little") + raw)
        for tensor in state.values():
            f.write(tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().data)
    tmp.replace(file)
    return file



def build_pi0(out_dir: str | Path, seed: int = 0, dataset: str | Path | None = None) -> Path:
    """The smallest real pi0 (`build_weightless_pi0`, 4.03e9 parameters) in bfloat16 (the vision tower float32, as
    LeRobot keeps it), random and saved with its weights: 8.3 GiB on disk and in memory."""
    if dataset is not None:
        raise ValueError("pi0 is built with LIBERO's features only (no --dataset)")
    return _with_random_weights(build_weightless_pi0(out_dir, dtype="bfloat16"), seed)


def build_pi05(out_dir: str | Path, seed: int = 0, dataset: str | Path | None = None) -> Path:
    """The smallest real pi05 (`build_weightless_pi05`, 4.14e9 parameters) as `build_pi0`: 8.7 GiB."""
    if dataset is not None:
        raise ValueError("pi05 is built with LIBERO's features only (no --dataset)")
    return _with_random_weights(build_weightless_pi05(out_dir, dtype="bfloat16"), seed)


TINY_BUILDERS: dict[str, Callable[..., Path]] = {"act": build_tiny_act, "smolvla": build_tiny_smolvla}
# What `sgvla make-tiny-policy` builds: the tiny ones, and the smallest real pi0/pi05 (8-9 GiB: not for every test).
BUILDERS: dict[str, Callable[..., Path]] = {**TINY_BUILDERS, "pi0": build_pi0, "pi05": build_pi05}
