"""Operator-sized CRDs by marker on every test: what it costs per test, before and after caching.

Three CRDs of about 1 MB each are generated here, the way controller-gen makes them: the
apiserver's own PodTemplateSpec schema (from its OpenAPI v3) inlined into each CRD, twice
(a head template and a worker template), as operators with embedded Pod templates do.
Measured on one control plane, interleaved:

* parsing the 3 MB with PyYAML's pure-Python loader and with libyaml's;
* "before": what the marker did per test until now, parse (pure Python) + apply + wait;
* "after": ``install_crds`` on the same unchanged files, as the marker, the fixture and the
  option now do it (parsed once, applied once, then a metadata lookup per CRD).

Writes ``bench/results/crds.json``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import RESULTS, save_json, spread
from envtest import (
    ControlPlane,
    RestMapper,
    apply,
    install_crds,
    request,
    uninstall_crds,
    wait_crd_ready,
)

_STRUCTURAL_KEEP = {"type", "properties", "items", "description", "format", "enum", "required",
                    "additionalProperties", "x-kubernetes-int-or-string",
                    "x-kubernetes-preserve-unknown-fields"}


def _inline(schema: dict[str, Any], schemas: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """A structural schema: $refs inlined (as controller-gen does), extensions dropped."""
    if depth > 40:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if "allOf" in schema and len(schema["allOf"]) == 1:
        merged = {**schema["allOf"][0], **{k: v for k, v in schema.items() if k != "allOf"}}
        return _inline(merged, schemas, depth)
    if "$ref" in schema:
        target = schemas[schema["$ref"].rsplit("/", 1)[-1]]
        described = {**target, **({"description": schema["description"]}
                                   if "description" in schema else {})}
        return _inline(described, schemas, depth + 1)
    out = {k: v for k, v in schema.items() if k in _STRUCTURAL_KEEP}
    if "properties" in out:
        out["properties"] = {k: _inline(v, schemas, depth + 1)
                             for k, v in out["properties"].items()}
        out.setdefault("type", "object")
    if "items" in out:
        out["items"] = _inline(out["items"], schemas, depth + 1)
    if isinstance(out.get("additionalProperties"), dict):
        out["additionalProperties"] = _inline(out["additionalProperties"], schemas, depth + 1)
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
    if "type" not in out and not out.get("x-kubernetes-int-or-string"):
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [_without_descriptions(v) for v in schema]
    return schema


def generate_crds(control_plane: ControlPlane, directory: Path) -> list[Path]:
    """Three CRDs, each with two inlined Pod templates (the worker's without descriptions,
    as controller-gen's crd:maxDescLen=0 makes them), about 1 MB of YAML each."""
    openapi = request(control_plane.api_client(), "GET", "/openapi/v3/api/v1")
    schemas = openapi["components"]["schemas"]
    template = _inline({"$ref": "#/io.k8s.api.core.v1.PodTemplateSpec"}, schemas)
    paths = []
    for kind in ("Alpha", "Beta", "Gamma"):
        plural = f"{kind.lower()}apps"
        spec = {"type": "object", "properties": {
            "head": {"type": "object", "properties": {"template": copy.deepcopy(template)}},
            "workers": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "replicas": {"type": "integer"},
                "template": _without_descriptions(template)}}}}}
        crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": f"{plural}.bench.example.com"},
               "spec": {"group": "bench.example.com", "scope": "Namespaced",
                        "names": {"kind": f"{kind}App", "plural": plural},
                        "versions": [{"name": "v1", "served": True, "storage": True,
                                      "subresources": {"status": {}},
                                      "schema": {"openAPIV3Schema": {"type": "object",
                                                                     "properties": {
                                          "spec": spec,
                                          "status": {"type": "object",
                                                     "x-kubernetes-preserve-unknown-fields":
                                                         True}}}}}]}}
        path = directory / f"{plural}.yaml"
        path.write_text(yaml.safe_dump(crd, sort_keys=False))
        paths.append(path)
    return paths


def _before(control_plane: ControlPlane, paths: list[Path]) -> float:
    """The marker as it was: parse with the pure-Python loader, apply, wait for each."""
    started = time.monotonic()
    api = control_plane.api_client()
    crds = [d for p in paths for d in yaml.load_all(p.read_text(), Loader=yaml.SafeLoader)]
    apply(api, crds)
    mapper = RestMapper(api)
    for crd in crds:
        wait_crd_ready(api, crd["metadata"]["name"], 60, mapper)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=30, help="marker uses measured (after)")
    parser.add_argument("--before-runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir, ControlPlane() as control_plane:
        paths = generate_crds(control_plane, Path(workdir))
        sizes = [p.stat().st_size for p in paths]
        print(f"3 CRDs: {', '.join(f'{s / 2**20:.2f} MiB' for s in sizes)}")
        text = "\n---\n".join(p.read_text() for p in paths)
        parse_python, parse_c = [], []
        for _ in range(3):
            started = time.monotonic()
            list(yaml.load_all(text, Loader=yaml.SafeLoader))
            parse_python.append(time.monotonic() - started)
            started = time.monotonic()
            list(yaml.load_all(text, Loader=yaml.CSafeLoader))
            parse_c.append(time.monotonic() - started)
        print(f"parse: pure Python {statistics.median(parse_python):.2f} s, "
              f"libyaml {statistics.median(parse_c):.2f} s")
        names = [yaml.safe_load(p.read_text())["metadata"]["name"] for p in paths]
        before, after_first = [], []
        for _ in range(args.before_runs):  # interleaved: before (from scratch), then after
            uninstall_crds(control_plane.api_client(), names)
            before.append(_before(control_plane, paths))
            uninstall_crds(control_plane.api_client(), names)
            for path in paths:  # a new file version: parsed and applied again
                path.touch()
            started = time.monotonic()
            install_crds(control_plane.api_client(), paths)
            after_first.append(time.monotonic() - started)
            print(f"before (per test) {before[-1]:.2f} s | after, first install "
                  f"{after_first[-1]:.2f} s")
        repeated = []
        for _ in range(args.tests):
            started = time.monotonic()
            install_crds(control_plane.api_client(), paths)
            repeated.append(time.monotonic() - started)
        print(f"after, per test (marker on {args.tests} tests): median "
              f"{statistics.median(repeated) * 1000:.1f} ms")
    results = {
        "benchmark": "3 MB of CRDs by marker", "when": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "crd_mib": [round(s / 2**20, 2) for s in sizes],
        "parse_pure_python_seconds": spread(parse_python),
        "parse_libyaml_seconds": spread(parse_c),
        "before_per_test_seconds": spread(before),
        "after_first_install_seconds": spread(after_first),
        "after_per_test_seconds": spread(repeated),
        "ratio_before_over_after_per_test": round(statistics.median(before)
                                                  / statistics.median(repeated), 1),
    }
    save_json(RESULTS / "crds.json", results)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
