"""Object stores: the contract (:class:`ObjectStore`) and its local and S3 backends."""

from lake_core.stores.base import ObjectInfo, ObjectStore
from lake_core.stores.factory import open_store
from lake_core.stores.local import LocalObjectStore
from lake_core.stores.s3config import S3Config

__all__ = ["LocalObjectStore", "ObjectInfo", "ObjectStore", "S3Config", "open_store"]
