import re

from ray_operator.controllers import rayservice_status
from ray_operator.controllers.rayservice import status as rs


def cond(status, kind):
    return next(c for c in status["conditions"] if c["type"] == kind)


def test_mark_restart_names_a_pending_cluster():
    status = {"activeServiceStatus": {"rayClusterName": "svc-raycluster-aaaaa"}}
    name = rs.mark_restart(status, "svc")
    assert re.fullmatch(r"svc-raycluster-[bcdfghjklmnpqrstvwxz2456789]{5}", name)
    assert status["serviceStatus"] == rs.RESTARTING
    assert status["pendingServiceStatus"] == {"rayClusterName": name}


def test_promote_moves_pending_to_active():
    status = {"pendingServiceStatus": {"rayClusterName": "p", "x": 1}, "activeServiceStatus": {}}
    rs.promote(status)
    assert status == {
        "activeServiceStatus": {"rayClusterName": "p", "x": 1},
        "pendingServiceStatus": {},
    }


def test_conditions_through_a_lifecycle():
    status = {"pendingServiceStatus": {"rayClusterName": "p"}}
    rs.update_conditions(status, 1, 0, "t0")
    assert cond(status, "Ready")["reason"] == "Initializing"
    assert cond(status, "UpgradeInProgress")["reason"] == "Initializing"

    rs.promote(status)
    rs.update_conditions(status, 1, 1, "t1")
    assert cond(status, "Ready")["status"] == "True"
    assert cond(status, "Ready")["lastTransitionTime"] == "t1"
    assert cond(status, "UpgradeInProgress")["reason"] == "NoPendingCluster"

    status["pendingServiceStatus"] = {"rayClusterName": "q"}
    rs.update_conditions(status, 2, 1, "t2")
    upgrade = cond(status, "UpgradeInProgress")
    assert (upgrade["status"], upgrade["reason"]) == ("True", "BothActivePendingClustersExist")
    assert cond(status, "Ready")["lastTransitionTime"] == "t1"  # unchanged value, same time
    assert cond(status, "Ready")["observedGeneration"] == 2

    rs.update_conditions(status, 2, 0, "t3")
    assert (cond(status, "Ready")["status"], cond(status, "Ready")["reason"]) == (
        "False",
        "ZeroServeEndpoints",
    )


def test_dashboard_health_keeps_last_healthy_time_when_failing():
    served = {}
    rs.set_dashboard_health(served, True, "t0")
    rs.set_dashboard_health(served, False, "t1")
    assert served["dashboardStatus"] == {
        "isHealthy": False,
        "lastUpdateTime": "t1",
        "healthLastUpdateTime": "t0",
    }


def test_the_old_module_path_is_the_same_vocabulary():
    for name in rayservice_status.__all__:
        assert getattr(rayservice_status, name) is getattr(rs, name)
