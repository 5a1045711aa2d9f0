"""What every controller is given: API access, shared informers, events, settings, HTTP."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from ..config import OperatorConfig
from ..runtime import EventRecorder, InformerFactory, KubeClient


@dataclass(frozen=True)
class Context:
    kube: KubeClient
    informers: InformerFactory
    recorder: EventRecorder
    config: OperatorConfig
    http: httpx.Client
