"""The head-Pod gate, through ``RayServiceController.reconcile`` on caches filled by hand.

No API server: the Kube client fails on any call, so a reconcile that stops at the gate is seen
to make none (no status write, no Dashboard address asked for) and to leave a ``GateSkip``.
"""

import logging
import threading

import pytest

from ray_operator.config import OperatorConfig
from ray_operator.controllers.context import Context
from ray_operator.controllers.hashing import cluster_hash
from ray_operator.controllers.rayservice import GateSkip, RayServiceController
from ray_operator.resources import PODS, RAYCLUSTERS, RAYSERVICES
from ray_operator.runtime import InformerFactory, KeyLogger, Result

NS, SVC, CLUSTER = "ns", "svc", "svc-raycluster-bcdfg"
CONFIG = {"headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}}}


class NoApi:
    """Any call fails the test."""

    def __getattr__(self, name):
        def call(*args, **kwargs):
            pytest.fail(f"unexpected API call {name}{args}")

        return call


class Recorder:
    def __init__(self):
        self.events = []

    def normal(self, obj, reason, message):
        self.events.append(("Normal", reason, message))

    def warning(self, obj, reason, message):
        self.events.append(("Warning", reason, message))


def no_resolver(namespace, cluster, head_service):
    pytest.fail("the Dashboard address was asked for")


def make_controller(serve_gate="head-pod"):
    kube = NoApi()
    informers = InformerFactory(
        kube, NS, halt=threading.Event(), on_fatal=lambda e: None, watch_timeout_seconds=5
    )
    config = OperatorConfig(serve_gate=serve_gate, dashboard_resolver=no_resolver)
    recorder = Recorder()
    ctx = Context(kube, informers, recorder, config, http=None)
    controller = RayServiceController(ctx)
    informers.informer(RAYSERVICES).store.upsert(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": SVC, "namespace": NS, "uid": "u1", "generation": 1,
                         "resourceVersion": "1"},
            "spec": {"rayClusterConfig": CONFIG, "serveConfigV2": ""},
            "status": {"pendingServiceStatus": {"rayClusterName": CLUSTER},
                       "serviceStatus": "Restarting"},
        }
    )
    informers.informer(RAYCLUSTERS).store.upsert(
        {
            "metadata": {
                "name": CLUSTER,
                "namespace": NS,
                "resourceVersion": "2",
                "labels": {"ray.io/service": SVC},
                "annotations": {
                    "ray.io/cluster-hash": cluster_hash(CONFIG),
                    "ray.io/rayservice-worker-scaling": "{}",
                },
            },
            "spec": CONFIG,
        }
    )
    return controller, informers, recorder


def add_head_pod(informers, name, phase, ready=False):
    informers.informer(PODS).store.upsert(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "resourceVersion": "3",
                "labels": {"ray.io/cluster": CLUSTER, "ray.io/node-type": "head"},
            },
            "status": {
                "phase": phase,
                "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            },
        }
    )


def reconcile(controller):
    log = KeyLogger(logging.getLogger("ray_operator.controllers.rayservice"), "rayservice",
                    f"{NS}/{SVC}")
    return controller.reconcile(f"{NS}/{SVC}", log)


def test_a_head_pod_not_ready_stops_the_reconcile_and_is_recorded():
    controller, informers, recorder = make_controller()
    add_head_pod(informers, "head-1", "Pending")
    assert reconcile(controller) == Result(2.0)
    assert reconcile(controller) == Result(2.0)
    skips = controller.gate_skips.snapshot()
    assert [(s.key, s.cluster, s.reason, s.head_pod, s.phase) for s in skips] == [
        (f"{NS}/{SVC}", CLUSTER, "not-ready", "head-1", "Pending"),
    ] * 2
    assert controller.gate_skips.total == 2
    assert recorder.events == []


def test_no_head_pod_yet_is_a_skip_too():
    controller, _, recorder = make_controller()
    assert reconcile(controller) == Result(2.0)
    [skip] = controller.gate_skips
    assert isinstance(skip, GateSkip)
    assert (skip.reason, skip.head_pod, skip.phase) == ("no-head-pod", "", "")
    assert recorder.events == []


def test_two_head_pods_are_a_skip_and_a_warning_event():
    controller, informers, recorder = make_controller()
    add_head_pod(informers, "head-1", "Running", ready=True)
    add_head_pod(informers, "head-2", "Running", ready=True)
    assert reconcile(controller) == Result(2.0)
    [skip] = controller.gate_skips
    assert skip.reason == "many-head-pods"
    assert [e[:2] for e in recorder.events] == [("Warning", "InvalidHeadPodCount")]


def test_the_gate_still_logs_for_humans(caplog):
    controller, informers, _ = make_controller()
    add_head_pod(informers, "head-1", "Pending")
    with caplog.at_level(logging.INFO, logger="ray_operator"):
        reconcile(controller)
    assert any("head-1" in r.getMessage() and r.key == f"{NS}/{SVC}" for r in caplog.records)


def test_without_the_gate_nothing_is_skipped():
    controller, informers, _ = make_controller(serve_gate="none")
    add_head_pod(informers, "head-1", "Pending")
    with pytest.raises(pytest.fail.Exception, match="unexpected API call"):
        reconcile(controller)  # the legacy path goes on and writes status
    assert controller.gate_skips.total == 0
