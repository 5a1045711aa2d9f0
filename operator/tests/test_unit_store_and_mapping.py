from ray_operator.runtime.informer import WatchEvent
from ray_operator.runtime.mapping import owner_keys, spec_or_metadata_changed
from ray_operator.runtime.store import Store


def obj(name, rv, ns="ns", **meta):
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv), **meta}}


def test_store_keeps_the_newest_version():
    store = Store()
    assert store.upsert(obj("a", 10)) == (None, True)
    old, stored = store.upsert(obj("a", 9))
    assert not stored and old["metadata"]["resourceVersion"] == "10"
    _, stored = store.upsert(obj("a", 10))
    assert stored  # the watch echo of our own write
    assert store.get("ns/a")["metadata"]["resourceVersion"] == "10"


def test_store_returns_copies():
    store = Store()
    store.upsert(obj("a", 1, labels={"x": "1"}))
    copy = store.get("ns/a")
    copy["metadata"]["labels"]["x"] = "changed"
    assert store.get("ns/a")["metadata"]["labels"]["x"] == "1"
    assert [o["metadata"]["name"] for o in store.select("ns", {"x": "1"})] == ["a"]
    assert store.select("other") == []


def test_replace_reports_adds_syncs_and_deletes():
    store = Store()
    store.upsert(obj("kept", 1))
    store.upsert(obj("gone", 1))
    changes = store.replace([obj("kept", 5), obj("new", 6)])
    assert sorted((kind, o["metadata"]["name"]) for kind, o, _ in changes) == [
        ("ADDED", "new"),
        ("DELETED", "gone"),
        ("SYNC", "kept"),
    ]
    assert sorted(o["metadata"]["name"] for o in store.select()) == ["kept", "new"]


def test_status_only_updates_do_not_pass_the_predicate():
    old = obj("a", 1, generation=1) | {"status": {"x": 1}}
    status_only = obj("a", 2, generation=1) | {"status": {"x": 2}}
    spec_change = obj("a", 3, generation=2)
    label_change = obj("a", 4, generation=1, labels={"k": "v"})
    assert not spec_or_metadata_changed(WatchEvent("MODIFIED", status_only, old))
    assert spec_or_metadata_changed(WatchEvent("MODIFIED", spec_change, old))
    assert spec_or_metadata_changed(WatchEvent("MODIFIED", label_change, old))
    assert spec_or_metadata_changed(WatchEvent("SYNC", status_only, old))
    assert spec_or_metadata_changed(WatchEvent("ADDED", old, None))


def test_owner_keys_follow_the_controller_reference_of_the_right_kind():
    pod = obj(
        "p",
        1,
        ownerReferences=[
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "c", "controller": True},
            {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "x"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "controller": True},
        ],
    )
    assert owner_keys(pod, "RayCluster", "ray.io") == ["ns/c"]
    assert owner_keys(pod, "RayService", "ray.io") == []
