"""Errors of the on-disk activation store.

All are `ValueError`s (the folder's content is the bad value), so callers that catch `ValueError` for
"bad input" keep working; the subclasses let a CLI print a precise message and a fix.
"""

from __future__ import annotations


class StoreError(ValueError):
    """Something about a store folder is wrong (base class of the errors below)."""


class StoreMismatchError(StoreError):
    """A store exists at the path but was written with other settings (model, hooks, data, ...).

    `fields` names the settings that differ; the message gives both values and the fix.
    """

    def __init__(self, message: str, fields: list[str]):
        super().__init__(message)
        self.fields = fields


class StoreCorruptError(StoreError):
    """A shard file is missing or its bytes do not hash to the sha256 recorded in the manifest."""


class NotAStoreError(StoreError, FileNotFoundError):
    """The folder has no `manifest.json`, so it is not (yet) a store."""


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock (it is caching into the same folder right now)."""


class UnsafeLockError(StoreError):
    """The folder's lock path is there but is not a plain file of its own (a symlink, a fifo, a hard link):
    opening it as a lock file would overwrite another file, so the writer is refused before writing anything."""
