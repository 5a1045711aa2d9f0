"""A small controller runtime: informers, a work queue, controllers, events and API helpers."""

from .client import (
    AlreadyExists,
    ApiError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeClient,
    NotFound,
    Resource,
    Unauthorized,
    describe_error,
)
from .controller import Controller, Reconciler, Result, Retry, RetryReason
from .events import EventRecorder
from .history import HISTORY_LIMIT, History
from .informer import Informer, InformerFactory, WatchEvent
from .logs import KeyLogger
from .objects import Obj, object_key
from .store import Store
from .workqueue import ExponentialBackoff, WorkQueue

__all__ = [
    "HISTORY_LIMIT",
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Controller",
    "EventRecorder",
    "ExponentialBackoff",
    "Forbidden",
    "Gone",
    "History",
    "Informer",
    "InformerFactory",
    "Invalid",
    "KeyLogger",
    "KubeClient",
    "NotFound",
    "Obj",
    "Reconciler",
    "Resource",
    "Result",
    "Retry",
    "RetryReason",
    "Store",
    "Unauthorized",
    "WatchEvent",
    "WorkQueue",
    "describe_error",
    "object_key",
]
