"""On-disk activation store: a folder of `shard_{i:05d}.safetensors` files plus `manifest.json`.

Rows are tokens. Each shard holds, per hook, `[row, *row_shape]`, plus `tokens`, `seq` and `pos` columns.
Writes are atomic and recorded in the manifest by one coordinating process, which holds the store's
writer lock for its whole run, so a killed run resumes without losing or duplicating rows and a second
writer is refused (or waits). Every read goes through one verified path: the file is named by its
index, its header is checked against the manifest and its sha256 once per process.

>>> store = ActivationStore.open_or_create("runs/acts", meta, n_shards_planned=8)
>>> store.clean_partial()
>>> for i in store.missing():
...     store.commit_shard(write_shard_file(store.path, i, tensors_for(i)))
>>> for batch in store.iter_batches(4096, hooks="blocks.6.hook_resid_post"):
...     train_step(batch["blocks.6.hook_resid_post"])
"""

from interp.store.errors import (
    NotAStoreError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreMismatchError,
    UnsafeLockError,
)
from interp.store.manifest import COMPAT_FIELDS, MANIFEST_NAME, Manifest, StoreMeta
from interp.store.prefetch import prefetch
from interp.store.reader import BatchIterator, VerifyReport
from interp.store.shards import INDEX_COLUMNS, ShardInfo, shard_file_name, write_shard_file
from interp.store.store import ActivationStore

__all__ = [
    "COMPAT_FIELDS",
    "INDEX_COLUMNS",
    "MANIFEST_NAME",
    "ActivationStore",
    "BatchIterator",
    "Manifest",
    "NotAStoreError",
    "ShardInfo",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreMeta",
    "StoreMismatchError",
    "UnsafeLockError",
    "VerifyReport",
    "prefetch",
    "shard_file_name",
    "write_shard_file",
]
