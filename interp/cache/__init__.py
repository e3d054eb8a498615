"""The cache face: `ActivationCache` in memory, its analyses, the caching job that fills a store, the row rule.

from interp.cache import ActivationCache
from interp.cache.caching import CacheConfig, cache_activations   # `interp cache`
from interp.cache.rows import row_filter                          # the one special-row rule
"""

from interp.cache.activation_cache import ActivationCache

__all__ = ["ActivationCache"]
