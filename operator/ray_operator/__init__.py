"""A small Python port of KubeRay's RayCluster, RayService and RayJob controllers.

In process::

    operator = ray_operator.Operator(api_client, ray_operator.OperatorConfig(serve_gate="none"))
    operator.run(stop)  # blocks until stop (a threading.Event) is set

From a shell: ``python -m ray_operator --kubeconfig PATH``.
"""

from .config import OperatorConfig, ServeGate
from .dashboard import DashboardResolver, default_dashboard_resolver
from .manager import Operator, api_client_from, run

__all__ = [
    "DashboardResolver",
    "Operator",
    "OperatorConfig",
    "ServeGate",
    "api_client_from",
    "default_dashboard_resolver",
    "run",
]
