"""Transcoder modules and their folder: circuit-tracer's key names and shapes, a slow reference of the contract's
formulas against the sparse fast path, the round trip, sae-lens's own classes, and the replacement hooks."""

import json

import pytest
import torch
from safetensors import safe_open

from sae.transcoder import Codes
from sae.transcoder_folder import load_transcoders, make_transcoders, write_transcoders

D, M, LAYERS = 16, 24, [0, 1, 2]


def _random(kind, layers=LAYERS, jump=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    tc = make_transcoders(kind, layers, D, M)
    with torch.no_grad():
        for p in tc.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
        if jump:
            tc.threshold.copy_(torch.rand(tc.threshold.shape, generator=g))
    return tc.eval()


def _tensors(path):
    with safe_open(str(path), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def _reference(folder, kind, xs):
    """The contract's formulas, read straight from the files (no code of ours but safetensors)."""
    n = len(xs)
    if kind == "clt":
        enc = [_tensors(folder / f"W_enc_{i}.safetensors") for i in range(n)]
        dec = [_tensors(folder / f"W_dec_{i}.safetensors")[f"W_dec_{i}"] for i in range(n)]
        acts = []
        for i, x in enumerate(xs):
            pre = x @ enc[i][f"W_enc_{i}"].T + enc[i][f"b_enc_{i}"]
            acts.append(pre * (pre > enc[i][f"threshold_{i}"]))
        return [enc[o][f"b_dec_{o}"] + sum(acts[i] @ dec[i][:, o - i, :] for i in range(o + 1)) for o in range(n)]
    out = []
    for layer, x in zip(LAYERS, xs):
        t = _tensors(folder / f"layer_{layer}.safetensors")
        pre = x @ t["W_enc"].T + t["b_enc"]
        acts = pre * (pre > t["activation_function.threshold"])
        y = acts @ t["W_dec"] + t["b_dec"]
        out.append(y + x @ t["W_skip"].T if "W_skip" in t else y)
    return out


@pytest.mark.parametrize("kind", ["plt", "skip", "clt"])
def test_folder_has_circuit_tracer_files_and_round_trips(tmp_path, kind):
    tc = _random(kind)
    write_transcoders(tc, tmp_path, model="tiny-model", k=4, training={"steps": 1})
    index = json.loads((tmp_path / "transcoders.json").read_text())
    assert index == {
        "format": "interp-transcoders",
        "version": 1,
        "kind": kind,
        "model": "tiny-model",
        "n_layers": 3,
        "layers": LAYERS,
        "d_model": D,
        "d_transcoder": M,
        "activation": "jumprelu",
        "input_hook": "blocks.{layer}.ln2.hook_normalized",
        "output_hook": "blocks.{layer}.hook_mlp_out",
        "k": 4,
        "training": {"steps": 1},
    }
    yaml = pytest.importorskip("yaml")
    cfg = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert cfg["feature_input_hook"] == "ln2.hook_normalized" and cfg["feature_output_hook"] == "hook_mlp_out"
    assert cfg["scan"] == tmp_path.name and cfg["model_name"] == "tiny-model"
    if kind == "clt":
        assert cfg["model_kind"] == "cross_layer_transcoder" and "transcoders" not in cfg
        for i in range(3):
            enc, dec = _tensors(tmp_path / f"W_enc_{i}.safetensors"), _tensors(tmp_path / f"W_dec_{i}.safetensors")
            assert {k: tuple(v.shape) for k, v in enc.items()} == {
                f"W_enc_{i}": (M, D),
                f"b_enc_{i}": (M,),
                f"b_dec_{i}": (D,),
                f"threshold_{i}": (M,),
            }
            assert {k: tuple(v.shape) for k, v in dec.items()} == {f"W_dec_{i}": (M, 3 - i, D)}
    else:
        assert cfg["model_kind"] == "transcoder_set"
        assert cfg["transcoders"] == [str((tmp_path / f"layer_{i}.safetensors").resolve()) for i in LAYERS]
        for layer in LAYERS:
            shapes = {k: tuple(v.shape) for k, v in _tensors(tmp_path / f"layer_{layer}.safetensors").items()}
            want = {
                "W_enc": (M, D),
                "W_dec": (M, D),
                "b_enc": (M,),
                "b_dec": (D,),
                "activation_function.threshold": (M,),
            }
            assert shapes == (want | {"W_skip": (D, D)} if kind == "skip" else want)
    xs = list(torch.randn(3, 50, D, generator=torch.Generator().manual_seed(1)))
    loaded = load_transcoders(tmp_path)
    assert loaded.meta["kind"] == kind
    for a, b, r in zip(tc(xs), loaded(xs), _reference(tmp_path, kind, xs)):
        assert torch.equal(a, b)
        assert torch.allclose(a, r, atol=1e-5), (a - r).abs().max()


def test_relu_sets_write_no_threshold_and_a_bad_file_is_refused(tmp_path):
    tc = _random("plt", jump=False)
    write_transcoders(tc, tmp_path, model="m")
    assert json.loads((tmp_path / "transcoders.json").read_text())["activation"] == "relu"
    assert "activation_function.threshold" not in _tensors(tmp_path / "layer_0.safetensors")
    from safetensors.torch import save_file

    save_file({"W_enc": torch.zeros(M, D + 1)}, str(tmp_path / "layer_1.safetensors"))
    with pytest.raises(ValueError, match="layer_1.safetensors has keys"):
        load_transcoders(tmp_path)


@pytest.mark.parametrize("kind, jump", [("plt", True), ("skip", True), ("skip", False)])
def test_sae_lens_loads_the_same_transcoder(tmp_path, kind, jump):
    from sae_lens import SAE

    tc = _random(kind, jump=jump)
    write_transcoders(tc, tmp_path, model="m")
    x = torch.randn(40, D, generator=torch.Generator().manual_seed(2))
    sl = SAE.load_from_disk(tmp_path / "sae_lens" / "layer_2").eval()
    expected = {(True, False): "jumprelu_transcoder", (True, True): "jumprelu_skip_transcoder"}
    assert (
        type(sl).__name__
        == {
            ("plt", True): "JumpReLUTranscoder",
            ("skip", True): "JumpReLUSkipTranscoder",
            ("skip", False): "SkipTranscoder",
        }[kind, jump]
    )
    if jump:
        assert sl.cfg.architecture() == expected[True, kind == "skip"]
    assert sl.cfg.metadata.hook_name == "blocks.2.ln2.hook_normalized"
    assert sl.cfg.metadata.hook_name_out == "blocks.2.hook_mlp_out"
    with torch.no_grad():
        assert torch.allclose(sl.encode(x), tc.encode(2, x), atol=1e-5)
        assert torch.allclose(sl(x), tc.reconstruct([Codes.from_dense(tc.encode(i, x)) for i in range(3)], [x] * 3)[2])


def test_codes_and_the_sparse_decoder_match_dense_maths():
    tc = _random("clt", layers=[0, 1])
    acts = torch.relu(torch.randn(30, M, generator=torch.Generator().manual_seed(3)) - 1.0)
    c = Codes.from_dense(acts)
    assert c.n_active() == int((acts > 0).sum())
    got = tc.decode_codes(0, c)
    assert got.shape == (30, 2, D)
    assert torch.allclose(got, torch.einsum("nm,msd->nsd", acts, tc.W_dec[0]), atol=1e-5)


def test_a_clt_covers_layers_from_zero():
    with pytest.raises(ValueError, match="covers layers 0..n-1"):
        make_transcoders("clt", [2, 3], D, M)


def test_replacement_hooks_keep_listed_positions_and_change_the_rest():
    import interp
    from interp.data import byte_tokenizer
    from sae.transcoder_eval import replaced_mlps
    from tests.tiny import tiny_hf

    model = interp.HookedModel(tiny_hf("llama", initializer_range=0.2), byte_tokenizer())
    tc = make_transcoders("plt", [0, 1], 64, 32)
    tc.init_weights(torch.Generator().manual_seed(0))
    ids = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ref = model(ids)
        with replaced_mlps(model, tc, keep_positions=range(12)):
            assert torch.equal(model(ids), ref)  # every position kept: the model itself
        with replaced_mlps(model, tc):
            rep = model(ids)
    assert torch.equal(rep[:, 0], ref[:, 0]) and not torch.allclose(rep[:, 1:], ref[:, 1:])
