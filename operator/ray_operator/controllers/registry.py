"""The controllers the operator can run, by name: the table the manager starts them from.

Each name is the class's ``name`` (which also names its log channel,
``ray_operator.controllers.<name>``).  The names users choose from are
``config.CONTROLLERS``, plain data, so that the settings do not import the controllers
(which read the settings); this table must list the same names in the same order, and
refuses to load otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from ..config import CONTROLLERS
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
if tuple(CONTROLLER_TYPES) != CONTROLLERS:
    raise RuntimeError(f"controllers.registry has {tuple(CONTROLLER_TYPES)} but config.CONTROLLERS "
                      f"is {CONTROLLERS}: name each controller in both, in the same order")
