"""The on-disk form of a set of transcoders: circuit-tracer 0.5's own files, our index, and sae-lens folders.

    DIR/transcoders.json   {"format": "interp-transcoders", "version": 1, "kind": "plt"|"skip"|"clt", "model",
                            "n_layers", "layers", "d_model", "d_transcoder", "activation": "jumprelu"|"relu",
                            "input_hook", "output_hook", "k", "training": {...}}   (written last: a complete folder)
    DIR/config.yaml        circuit-tracer's config (model_kind transcoder_set | cross_layer_transcoder,
                           feature_input_hook ln2.hook_normalized, feature_output_hook hook_mlp_out, scan,
                           transcoders: absolute paths of the layer files for a transcoder set)
    plt / skip:  DIR/layer_{l}.safetensors   W_enc [m, d] (pre = x @ W_enc.T + b_enc), W_dec [m, d], b_enc [m],
                                             b_dec [d], activation_function.threshold [m] (jumprelu only),
                                             W_skip [d, d] (skip only: y += x @ W_skip.T)
                 DIR/sae_lens/layer_{l}/     cfg.json + sae_weights.safetensors of sae-lens's own (JumpReLU)(Skip)
                                             Transcoder, loadable by `sae_lens.SAE.load_from_disk`
    clt:         DIR/W_enc_{i}.safetensors   W_enc_{i} [m, d], b_enc_{i} [m], b_dec_{i} [d], threshold_{i} [m]
                 DIR/W_dec_{i}.safetensors   W_dec_{i} [m, n_layers - i, d] (slot j writes into layer i + j)

These are the files circuit-tracer's `load_relu_transcoder` / `load_transcoder_set` and `load_clt` read
(config.yaml's hooks are its TransformerLens names, relative to `blocks.{l}`). A JumpReLU here is
`pre * (pre > threshold)` everywhere, circuit-tracer's and sae-lens's alike (our thresholds are >= 0).

    >>> write_transcoders(tc, "runs/tc/plt", model="smollm2-135m", k=32)
    >>> tc = load_transcoders("runs/tc/plt")       # the module, in inference form; tc.meta is transcoders.json
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from interp.store.atomic import atomic_write_bytes, atomic_write_with
from sae.clt import CrossLayerTranscoder
from sae.transcoder import INPUT_HOOK, OUTPUT_HOOK, PerLayerTranscoders, Transcoders

FORMAT, VERSION = "interp-transcoders", 1
INDEX = "transcoders.json"
CT_KIND = {"plt": "transcoder_set", "skip": "transcoder_set", "clt": "cross_layer_transcoder"}
"""circuit-tracer's `model_kind` of each of our kinds."""


def make_transcoders(kind: str, layers: Sequence[int], d_model: int, d_transcoder: int) -> Transcoders:
    """A zero-initialised module of `kind` ("plt", "skip" or "clt")."""
    if kind in ("plt", "skip"):
        return PerLayerTranscoders(layers, d_model, d_transcoder, skip=kind == "skip")
    if kind == "clt":
        return CrossLayerTranscoder(layers, d_model, d_transcoder)
    raise ValueError(f"unknown transcoder kind {kind!r}; one of plt, skip, clt")


def _save(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    tensors = {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in tensors.items()}
    atomic_write_with(path, lambda tmp: save_file(tensors, str(tmp)))


def activation_of(tc: Transcoders) -> str:
    """ "jumprelu" when any threshold is set, else "relu" (then no threshold is written)."""
    return "jumprelu" if bool((tc.threshold != 0).any()) else "relu"


def layer_file_tensors(tc: Transcoders, i: int) -> dict[str, torch.Tensor]:
    """circuit-tracer's keys of one per-layer transcoder file (layer index i of `tc`)."""
    out = {"W_enc": tc.W_enc[i], "W_dec": tc.W_dec[i], "b_enc": tc.b_enc[i], "b_dec": tc.b_dec[i]}
    if activation_of(tc) == "jumprelu":
        out["activation_function.threshold"] = tc.threshold[i]
    if tc.W_skip is not None:
        out["W_skip"] = tc.W_skip[i]
    return out


def clt_file_tensors(tc: Transcoders, i: int) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """circuit-tracer's keys of `W_enc_{i}.safetensors` and `W_dec_{i}.safetensors`."""
    enc = {f"W_enc_{i}": tc.W_enc[i], f"b_enc_{i}": tc.b_enc[i], f"b_dec_{i}": tc.b_dec[i]}
    if activation_of(tc) == "jumprelu":
        enc[f"threshold_{i}"] = tc.threshold[i]
    return enc, {f"W_dec_{i}": tc.W_dec[i]}


def circuit_tracer_config(tc: Transcoders, out: Path, model: str, scan: str) -> str:
    """config.yaml as circuit-tracer reads it (plain YAML; strings JSON-quoted, which YAML accepts)."""
    q = json.dumps
    lines = [
        f"model_name: {q(model)}",
        f"model_kind: {q(CT_KIND[tc.kind])}",
        f"feature_input_hook: {q(INPUT_HOOK.removeprefix('blocks.{layer}.'))}",
        f"feature_output_hook: {q(OUTPUT_HOOK.removeprefix('blocks.{layer}.'))}",
        f"scan: {q(scan)}",
    ]
    if tc.kind != "clt":
        lines.append("transcoders:")
        lines += [f"  - {q(str((out / f'layer_{layer}.safetensors').resolve()))}" for layer in tc.layers]
    return "\n".join(lines) + "\n"


def sae_lens_transcoder(tc: Transcoders, i: int, model: str) -> Any:
    """Layer index i of a per-layer set as sae-lens's own class: JumpReLU(Skip)Transcoder, or (Skip)Transcoder
    when the codes are a plain ReLU (sae-lens's W_enc is [d_in, d_sae], the transpose of ours)."""
    from sae_lens.saes.sae import SAEMetadata
    from sae_lens.saes.transcoder import (
        JumpReLUSkipTranscoder,
        JumpReLUSkipTranscoderConfig,
        JumpReLUTranscoder,
        JumpReLUTranscoderConfig,
        SkipTranscoder,
        SkipTranscoderConfig,
        Transcoder,
        TranscoderConfig,
    )

    jump, skip = activation_of(tc) == "jumprelu", tc.W_skip is not None
    cls, cfg_cls = {
        (False, False): (Transcoder, TranscoderConfig),
        (False, True): (SkipTranscoder, SkipTranscoderConfig),
        (True, False): (JumpReLUTranscoder, JumpReLUTranscoderConfig),
        (True, True): (JumpReLUSkipTranscoder, JumpReLUSkipTranscoderConfig),
    }[jump, skip]
    layer = tc.layers[i]
    meta = SAEMetadata(
        model_name=model,
        hook_name=INPUT_HOOK.format(layer=layer),
        hook_name_out=OUTPUT_HOOK.format(layer=layer),
        hook_layer=layer,
    )
    cfg = cfg_cls(d_in=tc.d_model, d_sae=tc.d_transcoder, d_out=tc.d_model, apply_b_dec_to_input=False, metadata=meta)
    sl = cls(cfg)
    state = {"W_enc": tc.W_enc[i].T, "W_dec": tc.W_dec[i], "b_enc": tc.b_enc[i], "b_dec": tc.b_dec[i]}
    if jump:
        state["threshold"] = tc.threshold[i]
    if skip:
        state["W_skip"] = tc.W_skip[i]
    sl.load_state_dict({k: v.detach().float().contiguous().clone() for k, v in state.items()})
    return sl.eval()


def write_transcoders(
    tc: Transcoders,
    out: str | Path,
    model: str,
    k: float | None = None,
    training: dict[str, Any] | None = None,
    scan: str | None = None,
) -> Path:
    """Write `tc` (inference form: thresholds set, output scale folded) as the folder described above.

    `model` is the model spec the transcoders were trained on; `scan` names the set for circuit-tracer
    (default: the folder's name). Returns the path of transcoders.json."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / INDEX).unlink(missing_ok=True)  # an incomplete folder has no index
    if tc.kind == "clt":
        for i in range(tc.n_layers):
            enc, dec = clt_file_tensors(tc, i)
            _save(out / f"W_enc_{i}.safetensors", enc)
            _save(out / f"W_dec_{i}.safetensors", dec)
    else:
        for i, layer in enumerate(tc.layers):
            _save(out / f"layer_{layer}.safetensors", layer_file_tensors(tc, i))
            sae_lens_transcoder(tc, i, model).save_model(out / "sae_lens" / f"layer_{layer}")
    atomic_write_bytes(out / "config.yaml", circuit_tracer_config(tc, out, model, scan or out.resolve().name).encode())
    index = {
        "format": FORMAT,
        "version": VERSION,
        "kind": tc.kind,
        "model": model,
        "n_layers": tc.n_layers,
        "layers": tc.layers,
        "d_model": tc.d_model,
        "d_transcoder": tc.d_transcoder,
        "activation": activation_of(tc),
        "input_hook": INPUT_HOOK,
        "output_hook": OUTPUT_HOOK,
        "k": k,
        "training": training or {},
    }
    atomic_write_bytes(out / INDEX, (json.dumps(index, indent=1) + "\n").encode())
    return out / INDEX


def read_index(folder: str | Path) -> dict[str, Any]:
    """transcoders.json of a folder, checked."""
    path = Path(folder) / INDEX
    if not path.is_file():
        raise FileNotFoundError(f"{folder} holds no {INDEX}: not a transcoder folder (or an unfinished one)")
    meta = json.loads(path.read_text())
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise ValueError(f"{path} is not {FORMAT} version {VERSION}: {meta.get('format')} {meta.get('version')}")
    if meta.get("kind") not in CT_KIND:
        raise ValueError(f"{path}: unknown kind {meta.get('kind')!r}")
    return meta


def _read(path: Path, expect: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """The tensors of `path`, checking that its keys and shapes are exactly `expect` (optional keys end in '?')."""
    with safe_open(str(path), framework="pt") as f:
        keys = set(f.keys())
        need = {k for k in expect if not k.endswith("?")}
        allowed = need | {k[:-1] for k in expect if k.endswith("?")}
        if not need <= keys <= allowed:
            raise ValueError(
                f"{path} has keys {sorted(keys)}; expected {sorted(need)} (+ optional {sorted(allowed - need)})"
            )
        out = {k: f.get_tensor(k) for k in keys}
    shapes = {k.rstrip("?"): v for k, v in expect.items()}
    for k, v in out.items():
        if tuple(v.shape) != shapes[k]:
            raise ValueError(f"{path}: {k} has shape {tuple(v.shape)}, expected {shapes[k]}")
    return out


def load_transcoders(folder: str | Path, device: str | torch.device = "cpu") -> Transcoders:
    """The transcoders of a folder written by `write_transcoders`, in inference form (eval mode); the
    module's `meta` is transcoders.json. Key sets and shapes are checked against the index."""
    folder = Path(folder)
    meta = read_index(folder)
    kind, layers, d, m = meta["kind"], meta["layers"], meta["d_model"], meta["d_transcoder"]
    tc = make_transcoders(kind, layers, d, m)
    jump = meta["activation"] == "jumprelu"
    n = len(layers)
    with torch.no_grad():
        for i, layer in enumerate(layers):
            if kind == "clt":
                enc = _read(
                    folder / f"W_enc_{i}.safetensors",
                    {f"W_enc_{i}": (m, d), f"b_enc_{i}": (m,), f"b_dec_{i}": (d,), f"threshold_{i}" + "?": (m,)},
                )
                dec = _read(folder / f"W_dec_{i}.safetensors", {f"W_dec_{i}": (m, n - i, d)})
                t = {
                    "W_enc": enc[f"W_enc_{i}"],
                    "b_enc": enc[f"b_enc_{i}"],
                    "b_dec": enc[f"b_dec_{i}"],
                    "W_dec": dec[f"W_dec_{i}"],
                    "threshold": enc.get(f"threshold_{i}"),
                }
            else:
                expect = {"W_enc": (m, d), "W_dec": (m, d), "b_enc": (m,), "b_dec": (d,)}
                expect["activation_function.threshold" + ("" if jump else "?")] = (m,)
                if kind == "skip":
                    expect["W_skip"] = (d, d)
                raw = _read(folder / f"layer_{layer}.safetensors", expect)
                t = {**raw, "threshold": raw.get("activation_function.threshold")}
                if kind == "skip":
                    tc.W_skip[i].copy_(raw["W_skip"])
            if jump and t["threshold"] is None:
                raise ValueError(f"{folder}: layer {layer} has no threshold but the index says jumprelu")
            tc.W_enc[i].copy_(t["W_enc"])
            tc.W_dec[i].copy_(t["W_dec"])
            tc.b_enc[i].copy_(t["b_enc"])
            tc.b_dec[i].copy_(t["b_dec"])
            if t["threshold"] is not None:
                tc.threshold[i].copy_(t["threshold"])
    tc.meta = meta
    return tc.to(device).eval()
