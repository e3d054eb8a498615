"""interp.contrib: the seed papers that are not core methods, each one module on the same cache API.

One folder per cluster (`geometry`, `mechanisms`, `faithfulness`, `moe`, `privacy`); one file per paper.
See `interp/contrib/README.md` for the index: every paper, its module, its status and its result.
"""
