"""Plain helpers shared by the framework tests (fixtures live in conftest.py).

The Widget CRD is the one the tests' tiny controller reconciles; several
modules create Widgets, so its definition lives here once (CRDs are cluster
scoped: two diverging definitions would fight over the same name).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

# pytester points HOME at a temporary directory; inner runs must still find the
# binary cache, which lives under the real ${XDG_DATA_HOME:-~/.local/share}.
REAL_DATA_HOME = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")

WIDGET_GROUP, WIDGET_VERSION, WIDGET_PLURAL = "example.com", "v1", "widgets"
WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": WIDGET_GROUP,
        "scope": "Namespaced",
        "names": {"kind": "Widget", "plural": WIDGET_PLURAL, "singular": "widget",
                  "listKind": "WidgetList"},
        "versions": [{
            "name": WIDGET_VERSION, "served": True, "storage": True,
            "subresources": {"status": {}},
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object",
                             "properties": {"image": {"type": "string"}}},
                    "status": {"type": "object",
                               "properties": {"ready": {"type": "boolean"}}},
                },
            }},
        }],
    },
}


def widget(name: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if finalizers:
        metadata["finalizers"] = finalizers
    return {"apiVersion": f"{WIDGET_GROUP}/{WIDGET_VERSION}", "kind": "Widget",
            "metadata": metadata, "spec": {"image": "busybox"}}


def pod_body(name: str, labels: dict[str, str] | None = None,
             containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": c, "image": f"example.com/{c}:1"}
                                    for c in containers]}}


def unused_port() -> int:
    """A loopback port nothing listens on (at the moment of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
