"""Every architecture: registered with sae-lens, trainable by its SAETrainer, saved and loaded back."""

import pytest
import torch
from sae_lens import SAE, SAETrainer
from sae_lens.config import SAETrainerConfig
from sae_lens.registry import SAE_CLASS_REGISTRY, SAE_TRAINING_CLASS_REGISTRY

from sae import ARCHS, UnknownArchitectureError, arch_name, load_sae, make_sae
from sae._bases import register

OURS = [a for a in ARCHS if a not in ("relu", "topk", "batchtopk", "jumprelu", "gated", "matryoshka")]


def _settings(arch):
    kw = {} if arch in ("relu", "c2r_relu", "coh", "poly_relu", "jumprelu", "gated", "c2r_jumprelu") else {"k": 3}
    if arch.startswith("poly"):
        kw.update(rank2=4, rank3=4)
    return kw


@pytest.mark.parametrize("arch", list(ARCHS))
def test_trains_with_sae_lens_and_round_trips(arch, tmp_path):
    sae = make_sae(arch, 12, 48, seed=0, **_settings(arch))
    g = torch.Generator().manual_seed(0)
    trainer = SAETrainer(
        cfg=SAETrainerConfig(total_training_samples=64 * 6, train_batch_size_samples=64, lr_end=3e-4),
        sae=sae,
        data_provider=iter(lambda: torch.randn(64, 12, generator=g), None),
    )
    trainer.fit()
    for p in sae.parameters():
        assert torch.isfinite(p).all()
    sae.save_model(tmp_path)
    back = load_sae(tmp_path, inference=False)
    assert type(back) is type(sae) and arch_name(back) == arch
    x = torch.randn(32, 12)
    sae.eval()
    back.eval()
    assert torch.allclose(sae(x), back(x), atol=1e-6)
    inf = load_sae(tmp_path)  # the inference form: per-row codes; equal to the training forward unless batch-level
    one_by_one = torch.cat([inf(x[i : i + 1]) for i in range(len(x))])
    assert torch.allclose(inf(x), one_by_one, atol=1e-5)
    if not hasattr(sae, "topk_threshold"):
        assert torch.allclose(inf(x), sae(x), atol=1e-5)
    if arch in OURS:  # sae-lens's own inference loader reads our checkpoints too
        assert ARCHS[arch] in SAE_CLASS_REGISTRY and ARCHS[arch] in SAE_TRAINING_CLASS_REGISTRY
        assert torch.allclose(SAE.load_from_disk(tmp_path)(x), sae(x), atol=1e-6)


def test_unknown_names_and_settings_are_clear_errors():
    with pytest.raises(UnknownArchitectureError, match="c2r"):
        make_sae("c2rr", 8, 16)
    with pytest.raises(ValueError, match="no setting"):
        make_sae("c2r", 8, 16, c2r_lamda=1.0)
    with pytest.raises(ValueError, match="rank"):
        make_sae("poly", 8, 16, k=2, rank2=9)
    with pytest.raises(ValueError, match="already registered"):
        register("c2r", object, object)
