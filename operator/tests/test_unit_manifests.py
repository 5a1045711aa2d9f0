"""The CRDs are generated from one definition and must be structural; samples must be valid."""

import subprocess
import sys
from pathlib import Path

import yaml

OPERATOR = Path(__file__).resolve().parent.parent
CRDS = sorted((OPERATOR / "config" / "crd").glob("*.yaml"))


def test_crd_files_are_up_to_date():
    result = subprocess.run(
        [sys.executable, str(OPERATOR / "hack" / "gen_crds.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def _walk(schema, path="$"):
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _walk(schema["additionalProperties"], f"{path}{{}}")


def test_crds_are_structural_with_status_subresource():
    assert [p.name for p in CRDS] == [
        "ray.io_rayclusters.yaml",
        "ray.io_rayjobs.yaml",
        "ray.io_rayservices.yaml",
    ]
    for path in CRDS:
        crd = yaml.safe_load(path.read_text())
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert version["additionalPrinterColumns"]
        for where, schema in _walk(version["schema"]["openAPIV3Schema"]):
            assert "type" in schema, f"{path.name} {where} has no type"
        templates = [
            where
            for where, schema in _walk(version["schema"]["openAPIV3Schema"])
            if where.endswith(".template")
        ]
        assert templates, path.name
        for where, schema in _walk(version["schema"]["openAPIV3Schema"]):
            if where.endswith(".template"):
                assert schema["x-kubernetes-preserve-unknown-fields"] is True
            if ".status" in where:
                assert "x-kubernetes-preserve-unknown-fields" not in schema, where


def _allowed(schema, value, where):
    """Every field of ``value`` is declared by ``schema`` (templates excepted)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict) and schema.get("type") == "object":
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if props is not None and key in props:
                _allowed(props[key], sub, f"{where}.{key}")
            elif isinstance(extra, dict):
                _allowed(extra, sub, f"{where}.{key}")
            else:
                assert props is None, f"{where}.{key} is not in the schema"
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _allowed(schema["items"], item, f"{where}[{index}]")


def test_samples_fit_their_schemas():
    schemas = {}
    for path in CRDS:
        crd = yaml.safe_load(path.read_text())
        schemas[crd["spec"]["names"]["kind"]] = crd["spec"]["versions"][0]["schema"][
            "openAPIV3Schema"
        ]
    samples = sorted((OPERATOR / "config" / "samples").glob("*.yaml"))
    assert len(samples) == 3
    for path in samples:
        sample = yaml.safe_load(path.read_text())
        _allowed(schemas[sample["kind"]]["properties"]["spec"], sample["spec"], f"{path.name}:spec")


def test_rayservice_sample_has_three_deployments_and_three_workers():
    sample = yaml.safe_load(
        (OPERATOR / "config" / "samples" / "ray_v1_rayservice.yaml").read_text()
    )
    serve = yaml.safe_load(sample["spec"]["serveConfigV2"])
    assert [d["name"] for d in serve["applications"][0]["deployments"]] == [
        "MangoStand",
        "OrangeStand",
        "PearStand",
    ]
    assert sample["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["replicas"] == 3
