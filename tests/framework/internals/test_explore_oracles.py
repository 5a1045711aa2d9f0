"""Exploration's oracles and bookkeeping on known states: noise learned from two clean runs,
generated names matched across runs, the invariants, the queue workers share, shards and
their merge (no cluster: the rules themselves)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envtest.api.explore import (
    EndState,
    Exploration,
    FaultPoint,
    PointOutcome,
    Reference,
    compare_end_states,
    invariant_findings,
    learn_noise,
)
from envtest.api.explore.merge import document, merge, read_documents, summary_lines
from envtest.api.explore.oracles.endstate import canonical, end_state, normalize
from envtest.errors import ConfigurationError
from envtest.pytest_plugin.config.options import parse_shard
from envtest.pytest_plugin.exploration.queue import PointQueue
from envtest.pytest_plugin.exploration.runs import not_reached_reason


def state(**objects: list[dict]) -> EndState:
    return EndState({key.replace("_", " "): found for key, found in objects.items()})


def test_generated_suffixes_are_matched_across_runs_but_words_are_not() -> None:
    assert canonical("sample-raycluster-wdp4k") == "sample-raycluster-*"
    assert canonical("sample-raycluster-wdp4k-head-svc") == "sample-raycluster-*-head-svc"
    assert canonical("web-7d9kx.17a2") == "web-*.17a2"
    for word in ("my-redis", "api-nginx", "job-build", "a-12345", "x-abcde"):
        assert canonical(word) == word  # a vowel, or 0, 1, 3: never a generated suffix
    document = normalize({"metadata": {"name": "c-wdp4k", "namespace": "ns-1"},
                          "status": {"cluster": "c-wdp4k", "at": "2026-12-03T10:00:00Z"}},
                         ["ns-1"])
    assert document == {"metadata": {"name": "c-*"}, "status": {"cluster": "c-*",
                                                                "at": "<time>"}}


def test_what_two_clean_runs_differ_in_is_noise_and_judged_no_more() -> None:
    first = state(configmaps_r=[{"data": {"by": "a1", "size": "1"}}],
                  configmaps_extra=[{"data": {}}])
    second = state(configmaps_r=[{"data": {"by": "b2", "size": "1"}}])
    noise = learn_noise(first, second)
    assert noise == {"configmaps r": ["data.by"], "configmaps extra": ["*"]}
    faulted = state(configmaps_r=[{"data": {"by": "c3", "size": "1"}}])
    assert compare_end_states(first, faulted, noise) == []  # only noise differs
    assert compare_end_states(first, faulted) == [
        "missing: configmaps extra", "changed: configmaps r: data.by: 'a1' -> 'c3'"]
    wrong = state(configmaps_r=[{"data": {"by": "c3", "size": "2"}}])
    assert compare_end_states(first, wrong, noise) == [
        "changed: configmaps r: data.size: '1' -> '2'"]
    status = state(configmaps_r=[{"data": {"by": "a1", "size": "1"}, "status": {"ok": 1}}])
    assert compare_end_states(first, status, noise) == [
        "status: configmaps r: status: (absent) -> {'ok': 1}"]


def _pod(node: str, ip: str) -> tuple[str, dict]:
    return ("pods web-5886d967cf-*", {
        "metadata": {"name": "web-5886d967cf-x7k2p", "namespace": "ns-1"},
        "spec": {"nodeName": node, "volumes": [{"name": "kube-api-access-b4n9q"}]},
        "status": {"podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "127.0.0.1"}})


def _head(ip: str) -> tuple[str, dict]:
    """An operator's record of where the head Pod is: the placement copied into a URL."""
    return ("configmaps head", {"metadata": {"name": "head", "namespace": "ns-1"},
                                "data": {"url": f"http://{ip}:8265", "other": "10.244.1.50"}})


def test_where_a_run_placed_its_pods_is_learnt_and_judged_no_more() -> None:
    """Two clean runs that drew the same Node (so learning from their difference missed it),
    then a faulted run on another Node and IP: not a difference (before: 'changed: pods
    web-*: spec.nodeName: envtest-node-1 -> envtest-node-2', a false alarm)."""
    first = end_state([_pod("envtest-node-1", "10.244.1.5"), _head("10.244.1.5")], ["ns-1"])
    second = end_state([_pod("envtest-node-1", "10.244.1.5"), _head("10.244.1.5")], ["ns-2"])
    noise = learn_noise(first, second)
    assert noise == {}
    faulted = end_state([_pod("envtest-node-2", "10.244.2.7"), _head("10.244.2.7")], ["ns-3"])
    assert compare_end_states(first, faulted, noise) == []
    [pod] = first.objects["pods web-5886d967cf-*"]
    assert (pod["spec"]["nodeName"], pod["status"]["podIP"], pod["status"]["hostIP"]) == (
        "<node>", "<ip>", "<ip>")
    assert pod["spec"]["volumes"] == [{"name": "kube-api-access-*"}]
    [head] = first.objects["configmaps head"]
    assert head["data"] == {"url": "http://<ip>:8265", "other": "10.244.1.50"}  # not its IP
    # What the operator decides is still judged: another port in its URL is a difference.
    moved = end_state([_pod("envtest-node-2", "10.244.2.7"),
                       ("configmaps head", {"metadata": {"name": "head"},
                                            "data": {"url": "http://10.244.2.7:9999",
                                                     "other": "10.244.1.50"}})], ["ns-4"])
    assert compare_end_states(first, moved, noise) == [
        "changed: configmaps head: data.url: 'http://<ip>:8265' -> 'http://<ip>:9999'"]


def _service(cluster_ip: str, node_port: int, type_: str = "NodePort") -> tuple[str, dict]:
    return ("services admin", {"metadata": {"name": "admin", "namespace": "ns-1"},
                               "spec": {"type": type_, "clusterIP": cluster_ip,
                                        "clusterIPs": [cluster_ip],
                                        "ports": [{"name": "http", "port": 8080,
                                                   "nodePort": node_port}]}})


def test_what_the_apiserver_draws_for_a_service_is_not_judged() -> None:
    """A Service made external in one run and created so in another draws another nodePort
    and cluster IP (before: 'changed: services admin: spec.ports[...].nodePort: 32151 ->
    31029', a false alarm on ZooKeeper's operator); its type, its port, a headless
    Service's ``None`` are still the operator's."""
    first = end_state([_service("10.0.0.12", 32151)], ["ns-1"])
    other = end_state([_service("10.0.0.99", 31029)], ["ns-2"])
    assert compare_end_states(first, other, {}) == []
    [service] = first.objects["services admin"]
    assert service["spec"]["ports"][0]["nodePort"] == "<allocated>"
    assert compare_end_states(first, end_state([_service("10.0.0.12", 0, "ClusterIP")],
                                               ["ns-3"]), {})  # no node port: differs
    headless = end_state([_service("None", 0, "ClusterIP")], ["ns-4"])
    assert headless.objects["services admin"][0]["spec"]["clusterIP"] == "None"


def _claim(namespace: str, volume: str) -> tuple[str, dict]:
    return ("persistentvolumeclaims data-0", {
        "metadata": {"name": "data-0", "namespace": namespace},
        "spec": {"volumeName": volume, "storageClassName": f"local-{namespace}"}})


def test_the_volume_a_claim_was_bound_to_is_placement() -> None:
    """Equal volumes, named after the test's namespace: the binder's choice is a draw (before:
    20 points of the RabbitMQ operator's fixed commit read 'changed: persistentvolumeclaims
    ...: spec.volumeName' as a bug), but the class the operator asked for is still judged."""
    first = end_state([_claim("ns-1", "local-ns-1-0")], ["ns-1"])
    second = end_state([_claim("ns-2", "local-ns-2-0")], ["ns-2"])
    noise = learn_noise(first, second)
    assert noise == {}
    [claim] = first.objects["persistentvolumeclaims data-0"]
    assert claim["spec"] == {"volumeName": "<volume>", "storageClassName": "local-<namespace-0>"}
    rebound = end_state([_claim("ns-3", "local-ns-3-2")], ["ns-3"])
    assert compare_end_states(first, rebound, noise) == []
    other_class = end_state([("persistentvolumeclaims data-0", {
        "metadata": {"name": "data-0", "namespace": "ns-4"},
        "spec": {"volumeName": "local-ns-4-1", "storageClassName": "fast"}})], ["ns-4"])
    assert compare_end_states(first, other_class, noise) == [
        "changed: persistentvolumeclaims data-0: spec.storageClassName: "
        "'local-<namespace-0>' -> 'fast'"]


def test_the_invariants_name_what_broke_and_only_that() -> None:
    clean = EndState({}, children={"RayCluster c-*": [["pods c-*-head-*", "services c-svc"]]},
                     orphans=[])
    faulted = EndState({}, children={"RayCluster c-*": [
        ["pods c-*-head-*", "pods c-*-head-*", "services c-svc"],
        ["pods c-*-head-*", "services c-svc"]]},  # two clusters: each counted on its own
        orphans=["pods c-*-worker-*", "pods c-*-worker-*"])
    two_owners = EndState({}, children={"RayCluster c-*": [
        ["pods c-*-head-*", "services c-svc"], ["pods c-*-head-*", "services c-svc"]]})
    assert invariant_findings(clean, two_owners) == [], "two owners of one name: no duplicate"
    found = invariant_findings(clean, faulted, ["get pods"], ["get pods", "delete pods"])
    assert found == [
        "duplicate children: RayCluster c-* owns 2 pods c-*-head-*, the clean run's owned 1",
        "orphaned: pods c-*-worker-* (x2): every owner it names is gone",
        "forbidden: delete pods refused 403 (the clean run never sent it): the role lacks a "
        "verb a recovery needs"]
    assert invariant_findings(clean, clean, ["get pods"], ["get pods"]) == []


def test_the_queue_gives_each_point_to_one_worker_and_a_shard_every_nth(tmp_path: Path) -> None:
    points = [FaultPoint("crashes", f"crash-after-write={k}", f"crash #{k}") for k in range(1, 6)]
    reference = Reference("t.py::t", ("crashes",), 1, 50, 5, points)
    owner = PointQueue("t.py::t", tmp_path)
    owner.publish(reference)
    helper = PointQueue("t.py::t", tmp_path)  # another worker: its own view of the folder
    assert helper.wait_reference(timeout=1).points == points
    taken = []
    while True:
        claimed = owner.claim() if len(taken) % 2 == 0 else helper.claim()
        if claimed is None and (owner.claim() or helper.claim()) is None:
            break
        if claimed is not None:
            taken.append(claimed[1].spec)
    assert sorted(taken) == sorted(p.spec for p in points), "each point taken exactly once"
    second = PointQueue("t.py::t", None, shard=(2, 2))
    second.publish(reference)
    assert [n for n, _ in second.points()] == [1, 3]
    assert parse_shard("3/4") == (3, 4)
    for bad in ("0/2", "3/2", "x", "2"):
        with pytest.raises(ConfigurationError, match=r"give K/N with 1 <= K <= N"):
            parse_shard(bad)
    assert Reference.from_json(reference.to_json()) == reference


def _shard(specs: list[str], verdicts: list[str], shard: str) -> dict:
    exploration = Exploration("t.py::t", ("crashes",), found=4, chosen=4, shard=shard,
                              clean_seconds=1.0)
    exploration.outcomes = [PointOutcome(FaultPoint("crashes", s, s), v, 1.0)
                            for s, v in zip(specs, verdicts, strict=True)]
    return document([exploration], shard=shard)


def test_shards_merge_into_one_test_each_point_once(tmp_path: Path) -> None:
    one = _shard(["a", "c"], ["passed", "bug"], "1/2")
    two = _shard(["b", "d"], ["flaky", "passed"], "2/2")
    (tmp_path / "one.json").write_text(json.dumps(one))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two.json").write_text(json.dumps(two))
    documents = read_documents([tmp_path / "one.json", tmp_path / "sub"])
    [merged] = merge([*documents, one])  # the first shard twice: its points count once
    assert sorted(o.point.spec for o in merged.outcomes) == ["a", "b", "c", "d"]
    assert merged.shard == "" and merged.clean_seconds == 3.0
    assert summary_lines([merged])[-1].startswith(
        "1 test(s) explored: 4 point(s) run: 1 bug, 1 flaky, 2 passed")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigurationError, match="is not an exploration summary of format 1"):
        read_documents([tmp_path / "bad.json"])


def test_a_point_not_reached_says_what_its_fault_waited_for() -> None:
    """Before: every one read 'the operator wrote less in those runs', a watch point too."""
    lag = FaultPoint("lag", "stale=3:resource=pods", "watch events of pods held back 3 s")
    crash = FaultPoint("crashes", "crash-after-write=4:verb=create,resource=pods",
                       "crash after the 4th create of pods")
    view = FaultPoint("unobserved", "unobserved:resource=pods,name=p,change=spec,nth=1",
                      "unobserved: the 1st change (spec) of pods p held back until the next")
    exploration = Exploration("t.py::t", ("crashes", "unobserved", "lag"), found=3, chosen=3)
    exploration.outcomes = [PointOutcome(p, "not reached", 1.0, reason=not_reached_reason(p))
                            for p in (lag, crash, view)]
    text = exploration.text()
    assert ("watch events of pods held back 3 s (the operator opened no such watch in that "
            "run before the test returned)") in text, text
    assert "crash after the 4th create of pods (that request never came in that run)" in text
    assert ("(the operators were never served that change of the object in that run, or "
            "the next change never came while it was held"
            in text), text


def test_a_restarted_operator_s_wait_for_the_killed_one_s_lease_is_not_a_slow_recovery(
        ) -> None:
    """RabbitMQ's operator, killed while it led, waits out its Lease (3 s) once started
    again: 4.5 to 5 s to converge, read as a slow recovery at every such point of its fixed
    release before.  The wait is from the kill to its first Lease write that succeeded (a
    refused try and another operator's renewal do not end it); without leader election it
    is nothing, so a slow start of the operator's own is still judged."""
    import datetime as dt

    from envtest.api.explore.oracles.churn import restart_wait
    from envtest.api.faults.journal import InjectedFault
    from envtest.api.faults.plan import Exchange
    from envtest.api.faults.requestinfo import RequestInfo

    t0 = dt.datetime(2026, 12, 6, tzinfo=dt.UTC)

    def at(seconds: float) -> dt.datetime:
        return t0 + dt.timedelta(seconds=seconds)

    lease = RequestInfo("update", "coordination.k8s.io", "v1", "leases", name="leader")
    status = RequestInfo("update", "rabbitmq.com", "v1beta1", "rabbitmqclusters", "status",
                         name="c")
    crash = InjectedFault(at(10), "op", (), status, "crash-after-write=1", "killed", 0,
                          verb="crash")
    exchanges = [Exchange(at(9), "op", lease, 200), Exchange(at(10), "op", status, 200),
                 Exchange(at(11), "op", lease, 409), Exchange(at(12), "other", lease, 200),
                 Exchange(at(12.5), "op", status, 200), Exchange(at(14.25), "op", lease, 200),
                 Exchange(at(15), "op", lease, 200)]
    assert restart_wait(exchanges, [crash]) == 4.25
    no_election = [e for e in exchanges if e.request.resource != "leases"]
    assert restart_wait(no_election, [crash]) == 0.0
    assert restart_wait(exchanges, []) == 0.0


def test_an_annotation_that_only_carries_a_time_is_not_judged() -> None:
    """The endpoints controller's trigger-time annotation, there in the clean run and not in
    the faulted one (the order of Pod updates decides it): no difference; an annotation
    with a value of the operator's own still is one."""
    def endpoints(annotations: dict[str, str]) -> tuple[str, dict]:
        return ("endpoints web", {"metadata": {"name": "web", "annotations": annotations},
                                  "subsets": []})

    clean = end_state([endpoints({
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-12-06T11:11:06Z",
        "example.com/owner": "a"})], ["ns-1"])
    faulted = end_state([endpoints({"example.com/owner": "a"})], ["ns-2"])
    assert compare_end_states(clean, faulted) == []
    other = end_state([endpoints({"example.com/owner": "b"})], ["ns-3"])
    assert compare_end_states(clean, other) == [
        "changed: endpoints web: metadata.annotations.example.com/owner: 'a' -> 'b'"]
    bare = end_state([endpoints({"endpoints.kubernetes.io/last-change-trigger-time":
                                 "2026-12-06T11:11:09Z"})], ["ns-4"])
    assert "annotations" not in bare.objects["endpoints web"][0]["metadata"]


def test_the_grace_counts_from_when_a_restarted_operator_leads_again() -> None:
    """RabbitMQ's operator, killed by a crash point, waits out the killed instance's Lease
    (3 to 5 s) before it reconciles: a point's grace counted from the kill ran out first,
    and a fixed release's recovery read 'never converged' (its StatefulSet was made a
    second after the judgment)."""
    import datetime as dt

    from envtest.api.faults.journal import InjectedFault
    from envtest.api.faults.plan import FaultPlan
    from envtest.api.faults.requestinfo import RequestInfo
    from envtest.pytest_plugin.exploration.judging import _leading_again

    plan = FaultPlan()
    lease = RequestInfo("update", "coordination.k8s.io", "v1", "leases", namespace="ns",
                        name="leader")
    plan._exchanged(lease, "op", 200)
    assert _leading_again(plan)  # no crash: nothing to wait for
    crash = InjectedFault(dt.datetime.now(dt.UTC), "op", (), lease, "crash-after-write=1",
                          "killed", 0, verb="crash")
    plan.journal.add(crash)
    assert not _leading_again(plan)  # it led before the kill, not since
    plan._exchanged(lease, "op", 409)  # refused: the killed one's Lease still holds
    assert not _leading_again(plan)
    plan._exchanged(lease, "op", 200)
    assert _leading_again(plan)
    other = FaultPlan()  # an operator without leader election waits for nothing
    other.journal.add(crash)
    assert _leading_again(other)


def test_a_value_written_before_the_fault_that_no_clean_run_wrote_is_not_the_fault_s() -> None:
    """RabbitMQ's operator read back a StatefulSet it had just updated from a cache that had
    not seen the update, and wrote ``status.observedGeneration: 3`` to its cluster 40 ms
    before an unobserved point's hold began: neither clean run ever wrote it, and the point
    was judged a bug twice.  Such a field is not judged; a value the clean runs did write
    (the fault kept the operator from moving on) still is."""
    import datetime as dt

    from envtest.api.explore.oracles.predating import (
        first_fault_at,
        predating,
        with_predating,
        written_values,
    )
    from envtest.api.faults.journal import InjectedFault
    from envtest.api.faults.plan import FaultPlan
    from envtest.api.faults.requestinfo import RequestInfo

    def status_write(plan: FaultPlan, namespace: str, generation: int | None,
                     phase: str) -> None:
        request = RequestInfo("update", "example.com", "v1", "clusters", namespace=namespace,
                              name="c", subresource="status")
        status: dict = {"phase": phase}
        if generation is not None:
            status["observedGeneration"] = generation
        answer = json.dumps({"kind": "Cluster", "metadata": {
            "name": "c", "namespace": namespace, "resourceVersion": str(len(plan.exchanges) + 7)},
            "status": status}, separators=(",", ":")).encode()  # as kube-apiserver answers
        plan._exchanged(request, "op", 200, answer=answer)

    clean_plan = FaultPlan()  # the clean runs: never an observedGeneration, Ready at last
    status_write(clean_plan, "ns-clean", None, "Pending")
    status_write(clean_plan, "ns-clean", None, "Ready")
    usual = written_values(clean_plan.exchanges, ["ns-clean"])
    assert usual["clusters.example.com c"]["status.phase"] and \
        "status.observedGeneration" not in usual["clusters.example.com c"]

    plan = FaultPlan()  # the faulted run: its race wrote observedGeneration 3 first
    status_write(plan, "ns-point", 3, "Pending")
    fault = InjectedFault(dt.datetime.now(dt.UTC), "op", (), RequestInfo(
        "watch", "apps", "v1", "statefulsets", namespace="ns-point"), "unobserved", "held",
        0)
    plan.journal.add(fault)
    status_write(plan, "ns-point", 3, "Failed")  # after the fault: the fault's, maybe
    first = first_fault_at(plan.journal.entries)
    assert first == fault.at
    before = written_values(plan.exchanges, ["ns-point"], before=first)
    clean = state(**{"clusters.example.com_c": [{"status": {"phase": "Ready"}}]})
    faulted = state(**{"clusters.example.com_c": [
        {"status": {"observedGeneration": 3, "phase": "Pending"}}]})
    parted = predating(clean, faulted, {}, usual, before)
    # Pending came before the fault but a clean run wrote it too: the fault may have kept
    # the operator there, so it is judged; observedGeneration is the run's own path.
    assert parted == {"clusters.example.com c": ["status.observedGeneration"]}, parted
    assert compare_end_states(clean, faulted, with_predating({}, parted)) == [
        "status: clusters.example.com c: status.phase: 'Ready' -> 'Pending'"]
    # Failed, written only after the fault, is the fault's doing, maybe: judged.
    late = state(**{"clusters.example.com_c": [
        {"status": {"observedGeneration": 3, "phase": "Failed"}}]})
    assert predating(clean, late, {}, usual, before) == {
        "clusters.example.com c": ["status.observedGeneration"]}
    assert predating(clean, late, {}, usual, {}) == {}  # no fault came: all judged
    # A Secret's values are never kept, not even as digests.
    secret = FaultPlan()
    secret._exchanged(RequestInfo("create", "", "v1", "secrets", namespace="ns", name="s"),
                      "op", 201, answer=b'{"kind":"Secret","metadata":{"name":"s",'
                      b'"namespace":"ns","resourceVersion":"9"},"data":{"p":"eA=="}}')
    assert secret.exchanges[0].answer is not None
    assert written_values(secret.exchanges, ["ns"]) == {}


def test_churn_already_beyond_the_clean_runs_before_the_fault_is_not_the_fault_s() -> None:
    """ZooKeeper's operator raced the garbage collector over a deleted cluster's Services and
    made them a third time, a second before a stale point's restart: churn the run had
    before its fault.  Churn that grows past the clean runs' only after it is judged."""
    from envtest.api.explore.oracles.churn import churn_findings, churn_parted

    clean = {"create services zk-client": 1}
    faulted = {"create services zk-client": 2, "delete statefulsets zk": 1}
    parted = churn_parted(clean, {"create services zk-client": 2})
    assert parted == ["create services zk-client"]
    assert churn_findings(clean, faulted, parted) == [
        "churn: statefulsets zk deleted 1 time (the clean runs: 0)"]
    assert churn_parted(clean, {"create services zk-client": 1}) == []  # as the clean runs
    assert churn_findings(clean, faulted, []) == [
        "churn: services zk-client made again 2 times (the clean runs: 1)",
        "churn: statefulsets zk deleted 1 time (the clean runs: 0)"]


def test_making_again_what_another_deleted_is_no_churn_of_the_operator_s() -> None:
    """The garbage collector removed a deleted cluster's Services while ZooKeeper's operator,
    still finalizing it, made them again: once in the clean runs, twice in a faulted run of
    the fixed release.  A making again counts only where no one but the operator deleted
    the object since it last made it; its own delete then create is churn, as before."""
    import datetime as dt

    from envtest.api.explore.oracles.churn import churn
    from envtest.api.faults.plan import FaultPlan
    from envtest.api.faults.requestinfo import RequestInfo

    plan = FaultPlan()

    def write(verb: str, name: str) -> dt.datetime:
        plan._exchanged(RequestInfo(verb, "", "v1", "services", namespace="ns", name=name),
                        "op", 201 if verb == "create" else 200)
        return plan.exchanges[-1].at

    write("create", "zk-client")
    collected = write("create", "other") + dt.timedelta(microseconds=1)  # a moment later
    write("create", "zk-client")  # after the garbage collector's delete
    write("delete", "zk-client")
    write("create", "zk-client")  # after its own delete: churn
    others = [(collected, "services zk-client")]
    assert churn(plan.exchanges, others) == {"create services zk-client": 1,
                                             "delete services zk-client": 1}
    assert churn(plan.exchanges) == {"create services zk-client": 2,
                                     "delete services zk-client": 1}


def test_a_delete_counts_once_per_object_it_deletes() -> None:
    """Killed right after its finalizer deleted a claim (held by its protection finalizer),
    Cassandra's restarted operator ran the finalizer again and deleted the same claim a
    second time: one object deleted, as in the clean runs.  A claim made again (another uid)
    and deleted again is churn."""
    import json

    from envtest.api.explore.oracles.churn import churn
    from envtest.api.faults.plan import FaultPlan
    from envtest.api.faults.requestinfo import RequestInfo

    plan = FaultPlan()

    def delete(uid: str, code: int = 200) -> None:
        answer = json.dumps({"kind": "PersistentVolumeClaim", "metadata": {
            "name": "data-0", "uid": uid, "resourceVersion": "7",
            "deletionTimestamp": "2026-12-06T23:00:00Z"}}).encode()
        plan._exchanged(RequestInfo("delete", "", "v1", "persistentvolumeclaims",
                                    namespace="ns", name="data-0"), "op", code, answer=answer)

    delete("uid-1")
    delete("uid-1")  # the finalizer run again: the same claim, being deleted
    assert plan.exchanges[-1].deleted_uid == "uid-1"
    assert churn(plan.exchanges) == {"delete persistentvolumeclaims data-0": 1}
    delete("uid-2")  # made again by its StatefulSet, deleted again
    delete("uid-3", code=404)  # not deleted
    assert churn(plan.exchanges) == {"delete persistentvolumeclaims data-0": 2}
