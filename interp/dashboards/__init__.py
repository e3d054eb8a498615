"""Feature dashboards: static, self-contained HTML for any "feature x token" activations.

An SAE supplies its latents, a probe its channels, a hook its neurons: anything that gives one number
per (token row, feature). See `write_dashboard`.
"""

from interp.dashboards.render import TokenRows, feature_summaries, write_dashboard

__all__ = ["TokenRows", "feature_summaries", "write_dashboard"]
