"""Explored by tests/framework/test_planted_bugs.py: a machine shrunk 3 -> 2 -> 1."""

import parts
import pytest

from envtest import WaitTimeoutError, eventually


def have(k8s, namespace):
    return sorted(m.metadata.name for m in k8s.core.list_namespaced_config_map(
        namespace, label_selector="part-of=m").items)


@pytest.mark.parametrize("level", [False, True], ids=["edge", "level"])
@pytest.mark.parametrize("reader", ["watch", "poll"])
def test_a_shrunk_machine_keeps_as_many_parts_as_its_size(run_operator, k8s, namespace,
                                                         reader, level):
    run_operator(parts.keeper(namespace, reader, level), name="parts")
    k8s.core.create_namespaced_config_map(namespace, {
        "metadata": {"name": "m", "labels": {"app": "machine"}}, "data": {"size": "3"}})
    eventually(lambda: have(k8s, namespace) == parts.part_names("m", 3), timeout=10)
    k8s.core.patch_namespaced_config_map("m", namespace, {"data": {"size": "2"}})
    try:  # the workload's pace: the keeper is given 2 s to act on it, then it goes on
        eventually(lambda: len(have(k8s, namespace)) == 2, timeout=2)
    except WaitTimeoutError:
        pass  # a keeper that never saw the 2: the end says what came of it
    k8s.core.patch_namespaced_config_map("m", namespace, {"data": {"size": "1"}})
    eventually(lambda: have(k8s, namespace) == ["m-part-0"], timeout=10)
