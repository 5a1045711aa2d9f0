"""Explored by tests/framework/test_planted_bugs.py: a database moved v1 -> v2 -> v3."""

import migrations
import pytest

from envtest import eventually


def applied(k8s, namespace):
    db = k8s.core.read_namespaced_config_map("db", namespace)
    return (db.metadata.annotations or {}).get(migrations.APPLIED)


@pytest.mark.parametrize("level", [False, True], ids=["edge", "level"])
def test_each_migration_runs_once_in_order(run_operator, k8s, namespace, level):
    run_operator(migrations.migrator(namespace, level=level), name="migrator")
    k8s.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "db", "labels": {"app": "db"}}, "data": {"version": "v1"}})
    eventually(lambda: applied(k8s, namespace) == "v1", timeout=10)
    for version in ("v2", "v3"):  # two upgrades, one right after the other
        k8s.core.patch_namespaced_config_map("db", namespace, {"data": {"version": version}})
    eventually(lambda: applied(k8s, namespace) == "v3", timeout=10)
    ran = sorted(m.metadata.name for m in k8s.core.list_namespaced_config_map(
        namespace, label_selector="migration-of=db").items)
    assert ran == ["db-migration-v1-to-v2", "db-migration-v2-to-v3"]
