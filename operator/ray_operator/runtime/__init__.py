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
    object_key,
)
from .controller import Controller, Result
from .events import EventRecorder
from .informer import Informer, InformerFactory, WatchEvent
from .logs import KeyLogger
from .store import Store
from .workqueue import ExponentialBackoff, WorkQueue

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "Controller",
    "EventRecorder",
    "ExponentialBackoff",
    "Forbidden",
    "Gone",
    "Informer",
    "InformerFactory",
    "Invalid",
    "KeyLogger",
    "KubeClient",
    "NotFound",
    "Resource",
    "Result",
    "Store",
    "Unauthorized",
    "WatchEvent",
    "WorkQueue",
    "describe_error",
    "object_key",
]
