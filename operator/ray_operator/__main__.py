"""``python -m ray_operator``: run the operator until SIGTERM/SIGINT.

Start-up problems (unreadable kubeconfig, unreachable API server, bad resolver) end with one
line on stderr and a nonzero exit, not a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from .config import CONTROLLERS, SERVE_GATES, OperatorConfig
from .dashboard import DashboardResolver, default_dashboard_resolver
from .manager import Operator, api_client_from
from .runtime import KubeClient, describe_error
from .runtime.logs import configure_logging

EXIT_USAGE = 2
EXIT_FAILURE = 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ray-operator",
        description="A Python port of KubeRay's RayCluster, RayService and RayJob controllers.",
    )
    parser.add_argument(
        "--kubeconfig",
        help="kubeconfig file (default: $KUBECONFIG, else the in-cluster service account)",
    )
    parser.add_argument("--namespace", help="watch only this namespace (default: all)")
    parser.add_argument(
        "--serve-gate",
        choices=SERVE_GATES,
        default="head-pod",
        help="head-pod: no Dashboard call before the head Pod is Running+Ready; "
        "none: the behaviour before that change",
    )
    parser.add_argument(
        "--dashboard-resolver",
        metavar="MODULE:ATTRIBUTE",
        help="callable (namespace, cluster, head_service) -> Dashboard base URL",
    )
    parser.add_argument(
        "--controllers",
        default=",".join(CONTROLLERS),
        help="comma-separated controllers to run (default: all)",
    )
    parser.add_argument("--workers", type=int, default=1, help="reconcile threads per controller")
    parser.add_argument("--stale-cluster-delete-delay", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper
    )
    parser.add_argument("--log-format", default="text", choices=["text", "json"])
    return parser


def load_resolver(spec: str) -> DashboardResolver:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {spec!r}")
    resolver = getattr(importlib.import_module(module_name), attribute)
    if not callable(resolver):
        raise TypeError(f"{spec} is not callable")
    return resolver  # type: ignore[no-any-return,unused-ignore]


def _error(message: str) -> None:
    print(f"ray-operator: error: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    configure_logging(args.log_level, args.log_format)
    try:
        resolver = (
            load_resolver(args.dashboard_resolver)
            if args.dashboard_resolver
            else default_dashboard_resolver
        )
        config = OperatorConfig(
            namespace=args.namespace,
            serve_gate=args.serve_gate,
            dashboard_resolver=resolver,
            controllers=tuple(c.strip() for c in args.controllers.split(",") if c.strip()),
            workers=args.workers,
            stale_cluster_delete_delay_seconds=args.stale_cluster_delete_delay,
        )
    except (ImportError, AttributeError, TypeError, ValueError) as exc:
        _error(str(exc))
        return EXIT_USAGE
    try:
        api_client = api_client_from(args.kubeconfig)
    except Exception as exc:
        source = args.kubeconfig or "$KUBECONFIG/in-cluster configuration"
        _error(
            f"cannot load the Kubernetes configuration ({source}): "
            f"{describe_error(exc).splitlines()[0]}"
        )
        return EXIT_USAGE
    try:
        KubeClient(api_client).server_version()
    except Exception as exc:
        _error(
            f"cannot reach the API server at {api_client.configuration.host}: "
            f"{describe_error(exc).splitlines()[0]}"
        )
        return EXIT_FAILURE

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    try:
        Operator(api_client, config).run(stop)
    except Exception as exc:
        _error(describe_error(exc).splitlines()[0])
        return EXIT_FAILURE
    return 0


if __name__ == "__main__":
    sys.exit(main())
