"""A user's suite, serial and with ``-n 2``: what pytest-xdist gains once the workers share
their planes (``--envtest-share-planes``).

The suite is what a new user writes for the lightkube cache operator of the examples
(``tests/examples/lightkube_cache``): 26 tests on the cluster profile (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, simulated Nodes), each starting
the operator as a command scoped to its test's namespace (``WATCH_NAMESPACE``), applying
Caches and waiting for their Deployments' Pods to be ready.  Each round runs it three
ways, in a rotating order: serially, ``-n 2`` with the planes shared, and ``-n 2`` as
before (every worker its own planes).  The wall time of the whole ``pytest`` command is
taken (what the user waits), with the CPU seconds of every process of the run (how many
of the cores it kept busy: a suite that keeps both busy serially cannot gain from ``-n``),
and the planes started are counted from the plugin's summary lines (``cluster used: ...
(started in``).  Medians go to
``bench/results/user-suite.json``.

``--pod-start SECONDS`` runs the same suite with every Pod taking that long to be Ready
(half Pending, half Running and not Ready: ``--envtest-pod-plan``, which a shared plane's
engine follows too), as a kubelet that starts containers from pulled images does, instead
of at once: a suite that waits for its Pods as a user's on a real cluster does, whose
figures go to ``bench/results/user-suite-pod-start.json``.

    python -m bench.bench_user_suite [--rounds 3] [--pod-start 0] [--out FILE]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS, save_json

ROOT = Path(__file__).resolve().parent.parent
OPERATOR = ROOT / "tests" / "examples" / "lightkube_cache"
MODES = {"serial": [], "xdist2": ["-n", "2", "--envtest-share-planes"],
         "xdist2_unshared": ["-n", "2"]}
_STARTED = re.compile(r"cluster used: .*\(started in ([\d.]+) s\)")
_PASSED = re.compile(r"(\d+) passed")

SUITE = textwrap.dedent('''
    """A user's suite of the cache operator (bench.bench_user_suite)."""
    import sys
    from pathlib import Path

    import pytest

    from envtest import eventually

    OPERATOR = Path({operator!r})
    GROUP, VERSION, PLURAL = "cache.example.com", "v1", "caches"

    pytestmark = [pytest.mark.envtest_profile("cluster"),
                  pytest.mark.envtest_crds(str(OPERATOR / "crd.yaml"))]


    def start(run_operator, namespace):
        return run_operator([sys.executable, str(OPERATOR / "cache_operator.py"),
                             "--kubeconfig", "{{kubeconfig}}"], name="cache-operator",
                            env={{"WATCH_NAMESPACE": namespace}})


    def cache(name="demo", size=2, **spec):
        return {{"apiVersion": f"{{GROUP}}/{{VERSION}}", "kind": "Cache",
                 "metadata": {{"name": name}}, "spec": {{"size": size, **spec}}}}


    def ready(k8s, namespace, name, replicas):
        found = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL,
                                                        name)
        status = found.get("status") or {{}}
        conditions = {{c["type"]: c["status"] for c in status.get("conditions") or []}}
        return status.get("readyReplicas") == replicas and conditions.get("Ready") == "True"


    def record(k8s, namespace, name="demo"):
        return k8s.core.read_namespaced_config_map(f"{{namespace}}.{{name}}", "cache-records")


    def gone(read):
        try:
            read()
        except Exception as error:
            return getattr(error, "status", None) == 404
        return False


    @pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
    def test_a_cache_gets_its_deployment_and_settings(run_operator, apply, k8s, namespace,
                                                      size):
        start(run_operator, namespace)
        apply(cache(size=size, ttl="30s"))
        deployment = eventually(lambda: k8s.apps.read_namespaced_deployment("demo", namespace),
                                timeout=30)
        assert deployment.spec.replicas == size
        settings = eventually(lambda: k8s.core.read_namespaced_config_map(
            "demo-config", namespace), timeout=30)
        assert settings.data == {{"ttl": "30s", "size": str(size)}}


    @pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
    def test_a_cache_is_ready_once_its_replicas_are(run_operator, apply, k8s, namespace, size):
        start(run_operator, namespace)
        apply(cache(size=size))
        eventually(lambda: ready(k8s, namespace, "demo", size), timeout=60)


    @pytest.mark.parametrize("name", ["demo", "sessions", "pages", "tokens"])
    def test_its_record_names_its_namespace(run_operator, apply, k8s, namespace, name):
        start(run_operator, namespace)
        apply(cache(name))
        kept = eventually(lambda: record(k8s, namespace, name), timeout=30)
        assert kept.data == {{"namespace": namespace, "cache": name, "size": "2"}}


    @pytest.mark.parametrize("before,after", [(1, 3), (3, 1), (2, 4), (4, 2)])
    def test_resizing_changes_replicas(run_operator, apply, k8s, namespace, before, after):
        start(run_operator, namespace)
        apply(cache(size=before))
        eventually(lambda: ready(k8s, namespace, "demo", before), timeout=60)
        apply(cache(size=after))
        eventually(lambda: ready(k8s, namespace, "demo", after), timeout=60)
        assert record(k8s, namespace).data["size"] == str(after)


    @pytest.mark.parametrize("size", [1, 2, 3, 4])
    def test_deleting_a_cache_deletes_its_record(run_operator, apply, k8s, namespace, size):
        start(run_operator, namespace)
        apply(cache(size=size))
        eventually(lambda: record(k8s, namespace), timeout=30)
        k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "demo")
        eventually(lambda: gone(lambda: record(k8s, namespace)), timeout=30)


    @pytest.mark.parametrize("size", [1, 2, 3, 4])
    def test_two_caches_keep_two_records(run_operator, apply, k8s, namespace, size):
        start(run_operator, namespace)
        apply(cache("a", size=size))
        apply(cache("b", size=size))
        eventually(lambda: ready(k8s, namespace, "a", size) and ready(k8s, namespace, "b", size),
                   timeout=60)
        assert record(k8s, namespace, "b").data["cache"] == "b"
''')


def run(folder: Path, mode: str, pod_start: float = 0.0) -> dict[str, Any]:
    """One run of the suite: its wall seconds, tests passed and planes started."""
    plan = ([f"--envtest-pod-plan=running_after={pod_start / 2},ready_after={pod_start / 2}"]
            if pod_start else [])
    began, before = time.monotonic(), _children_cpu()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
         *MODES[mode], *plan, "test_user_suite.py"], cwd=folder, capture_output=True, text=True,
        timeout=900, env={**os.environ, "ENVTEST_INSTALLED_ONLY": "1"})
    seconds = time.monotonic() - began
    cpu = _children_cpu() - before
    passed = _PASSED.search(result.stdout)
    if result.returncode != 0 or passed is None:
        raise RuntimeError(f"{mode} failed ({result.returncode}): {result.stdout[-3000:]}")
    return {"seconds": round(seconds, 2), "cpu_seconds": round(cpu, 1),
            "cores_busy": round(cpu / seconds, 2), "tests": int(passed.group(1)),
            "planes_started": len(_STARTED.findall(result.stdout))}


def _children_cpu() -> float:
    """CPU seconds of every process of the runs so far: each pytest and what it reaped (its
    workers, planes and operators)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pod-start", type=float, default=0.0,
                        help="seconds each Pod takes to be Ready (0: at once)")
    parser.add_argument("--out", type=Path)
    arguments = parser.parse_args()
    out = arguments.out or RESULTS / ("user-suite-pod-start.json" if arguments.pod_start
                                      else "user-suite.json")
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        suite = SUITE.format(operator=str(OPERATOR))
        (Path(folder) / "test_user_suite.py").write_text(suite)
        for round_index in range(arguments.rounds):
            order = list(MODES)[round_index % len(MODES):] + list(MODES)[:round_index % len(MODES)]
            for mode in order:
                runs[mode].append(run(Path(folder), mode, arguments.pod_start))
                print(f"round {round_index + 1} {mode}: {runs[mode][-1]}", flush=True)
    median = {mode: statistics.median(r["seconds"] for r in runs[mode]) for mode in MODES}
    planes = {mode: statistics.median(r["planes_started"] for r in runs[mode]) for mode in MODES}
    data = {"tests": runs["serial"][0]["tests"], "rounds": arguments.rounds,
            "pod_start_s": arguments.pod_start,
            "cpus": os.cpu_count(), "serial_s": median["serial"],
            "xdist2_s": median["xdist2"], "ratio": round(median["xdist2"] / median["serial"], 3),
            "xdist2_unshared_s": median["xdist2_unshared"],
            "ratio_unshared": round(median["xdist2_unshared"] / median["serial"], 3),
            "cpu_s": {mode: statistics.median(r["cpu_seconds"] for r in runs[mode])
                      for mode in MODES},
            "cores_busy": {mode: statistics.median(r["cores_busy"] for r in runs[mode])
                           for mode in MODES},
            "planes_started": {"serial": planes["serial"], "xdist2": planes["xdist2"],
                               "xdist2_unshared": planes["xdist2_unshared"]},
            "runs": runs}
    save_json(out, data)
    print({k: v for k, v in data.items() if k != "runs"})


if __name__ == "__main__":
    main()
