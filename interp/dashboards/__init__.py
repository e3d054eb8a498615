"""Feature dashboards for any "feature x token" activations: SAE latents, a hook's channels, probe outputs.

One streaming pass over an activation store (`StoreSource`, memory flat in the number of rows) gathers
per-feature statistics (`FeatureStats`); `write_folder` turns them into an index page (sortable,
filterable, searchable table; density histogram; dead/dense counts, L0, FVU and the special-row rule in
the header) and one page per chosen feature (distinct top contexts, quantile buckets, activation,
logit-effect and position histograms, decoder-cosine neighbours, co-activation), with each page's data
as JSON in our format and in SAEDashboard/Neuronpedia's (`export.py`). `feature_page` and `text_view`
show a page or one's own text inline in Jupyter. Only the tokenizer and the store are needed (and the
unembedding, read from the weights file, for logit effects).
"""

from interp.dashboards.attention import AttentionView
from interp.dashboards.build import (
    DashboardConfig,
    build_dashboard,
    check_features,
    collect,
    feature_page,
    parse_features,
    write_dashboard,
    write_folder,
)
from interp.dashboards.export import from_neuronpedia, to_neuronpedia
from interp.dashboards.page import FeaturePage
from interp.dashboards.source import StoreSource, TensorSource, TokenRows
from interp.dashboards.stats import FeatureStats, StatsConfig
from interp.dashboards.tokens import Vocab, load_tokenizer

__all__ = [
    "AttentionView",
    "DashboardConfig",
    "FeaturePage",
    "FeatureStats",
    "StatsConfig",
    "StoreSource",
    "TensorSource",
    "TokenRows",
    "Vocab",
    "build_dashboard",
    "check_features",
    "collect",
    "feature_page",
    "from_neuronpedia",
    "load_tokenizer",
    "parse_features",
    "to_neuronpedia",
    "write_dashboard",
    "write_folder",
]
