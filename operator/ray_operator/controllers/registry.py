"""The controllers the operator can run, by name: the one table the config, CLI and manager read.

A name is spelled once, as the class's ``name`` (which also names its log channel,
``ray_operator.controllers.<name>``); the table's order is the default start order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from ..runtime import Reconciler
from .context import Context
from .raycluster import RayClusterController
from .rayjob import RayJobController
from .rayservice import RayServiceController

ControllerFactory = Callable[[Context], Reconciler]

CONTROLLER_TYPES: Mapping[str, ControllerFactory] = MappingProxyType(
    {
        factory.name: factory
        for factory in (RayClusterController, RayServiceController, RayJobController)
    }
)
