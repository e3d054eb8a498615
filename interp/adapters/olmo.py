"""OLMo (1): Llama's layout with LayerNorms that have no weight or bias (`OlmoLayerNorm`)."""

from dataclasses import replace

from interp.adapters import llama

ADAPTER = replace(llama.ADAPTER, model_types=("olmo",))
