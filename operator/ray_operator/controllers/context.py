"""What every controller is given: API access, shared informers, events, settings, HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from ..runtime import EventRecorder, InformerFactory, KubeClient

if TYPE_CHECKING:
    # Only a type here: ``config`` validates controller names against ``registry``, which
    # imports the controllers, so importing ``config`` at run time would make a cycle.
    from ..config import OperatorConfig


@dataclass(frozen=True)
class Context:
    kube: KubeClient
    informers: InformerFactory
    recorder: EventRecorder
    config: OperatorConfig
    http: httpx.Client
