"""Exploration (--envtest-explore): a test run once per fault point, its assertions the oracle.

The proof is on operators whose bugs are known: three order keepers (for
each ConfigMap labelled ``order=open``: a receipt, then the order marked
done).  The crash-safe one makes the receipt first and takes AlreadyExists
as done; the unsafe one marks the order done first, so a crash between the
two writes leaves it done without a receipt for ever; the forgetful one
remembers in memory which receipts it made (by generateName), so a crash
right after the create makes a second one, which the test's assertions do
not see and the differential check does.  The same unsafe order keeper,
compiled from Go (tests/examples/go_operator), is explored as a process.
"""

from __future__ import annotations

import base64
import re
import secrets
import shlex
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.go_operator import GoUnavailable, build_go_operator

pytest_plugins = ["pytester"]

ORDERS = textwrap.dedent('''
    """Order keepers: for each ConfigMap labelled order=open, a receipt, and the order done."""

    import threading

    import kubernetes

    OPEN = "order=open"


    def crash_safe(namespace):
        """Receipt first (AlreadyExists: made before a crash), then the order marked done with
        an update (a 409 is read again on the next tick); any API error is retried."""

        def run(api_client, stop: threading.Event) -> None:
            core = kubernetes.client.CoreV1Api(api_client)
            while not stop.wait(0.05):
                try:
                    for order in core.list_namespaced_config_map(
                            namespace, label_selector=OPEN).items:
                        name = order.metadata.name
                        try:
                            core.create_namespaced_config_map(
                                namespace, {"metadata": {"name": f"{name}-receipt"}})
                        except kubernetes.client.ApiException as error:
                            if error.status != 409:
                                raise
                        order.metadata.labels["order"] = "done"
                        core.replace_namespaced_config_map(name, namespace, order)
                except kubernetes.client.ApiException:
                    continue  # requeued: the next tick reads everything again

        return run


    def crash_unsafe(namespace):
        """The order marked done first, then its receipt: killed between the two, the order
        is done and nothing ever makes its receipt."""

        def run(api_client, stop: threading.Event) -> None:
            core = kubernetes.client.CoreV1Api(api_client)
            while not stop.wait(0.05):
                for order in core.list_namespaced_config_map(
                        namespace, label_selector=OPEN).items:
                    name = order.metadata.name
                    core.patch_namespaced_config_map(
                        name, namespace, {"metadata": {"labels": {"order": "done"}}})
                    core.create_namespaced_config_map(
                        namespace, {"metadata": {"name": f"{name}-receipt"}})

        return run


    def forgetful(namespace):
        """Receipts by generateName, remembered in memory: a fresh instance after a crash
        right after the create makes a second one."""

        def run(api_client, stop: threading.Event) -> None:
            core = kubernetes.client.CoreV1Api(api_client)
            made = set()
            while not stop.wait(0.05):
                for order in core.list_namespaced_config_map(
                        namespace, label_selector=OPEN).items:
                    name = order.metadata.name
                    if name not in made:
                        core.create_namespaced_config_map(namespace, {"metadata": {
                            "generateName": f"{name}-receipt-",
                            "labels": {"receipt-of": name}}})
                        made.add(name)
                    core.patch_namespaced_config_map(
                        name, namespace, {"metadata": {"labels": {"order": "done"}}})

        return run
''')

TESTS = textwrap.dedent('''
    import pytest

    from envtest import eventually

    import orders


    def place_order(k8s, namespace):
        k8s.core.create_namespaced_config_map(
            namespace, {"metadata": {"name": "order-1", "labels": {"order": "open"}}})
        eventually(lambda: k8s.core.read_namespaced_config_map(
            "order-1", namespace).metadata.labels["order"] == "done", timeout=10)


    def test_safe(run_operator, k8s, namespace):
        run_operator(orders.crash_safe(namespace))
        place_order(k8s, namespace)
        eventually(lambda: k8s.core.read_namespaced_config_map("order-1-receipt", namespace),
                   timeout=5)


    def test_unsafe(run_operator, k8s, namespace):
        run_operator(orders.crash_unsafe(namespace))
        place_order(k8s, namespace)
        eventually(lambda: k8s.core.read_namespaced_config_map("order-1-receipt", namespace),
                   timeout=5)


    def test_forgetful(run_operator, k8s, namespace):
        run_operator(orders.forgetful(namespace))
        place_order(k8s, namespace)
        eventually(lambda: k8s.core.list_namespaced_config_map(
            namespace, label_selector="receipt-of=order-1").items, timeout=5)


    def test_no_operator(k8s, namespace):
        k8s.core.create_namespaced_config_map(namespace, {"metadata": {"name": "plain"}})
''')


@pytest.fixture
def orders_dir(inner_pytester: Any) -> Any:
    inner_pytester.makepyfile(orders=ORDERS, test_orders=TESTS)
    return inner_pytester


def run(pytester: Any, *args: str) -> tuple[Any, str]:
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=300)
    return result, result.stdout.str()


def again(output: str, label: str) -> list[str]:
    """The arguments of the "again:" line under the bug ``label``."""
    block = output.split(f"BUG {label}", 1)[1]
    line = next(line for line in block.splitlines() if line.strip().startswith("again:"))
    command = shlex.split(line.split("again:", 1)[1])
    assert command[0] == "pytest", line
    return command[1:]


def test_exploration_names_the_crash_point_of_an_unsafe_operator_and_its_rerun_fails(
        orders_dir: Any) -> None:
    started = time.monotonic()
    result, output = run(orders_dir, "--envtest-explore=crashes",
                         "test_orders.py::test_unsafe")
    found_in = time.monotonic() - started
    result.assert_outcomes(failed=1)
    assert "explored crashes: 2 point(s): 1 bug, 1 passed" in output, output
    label = "crash after the 1st patch of configmaps order-1"
    assert f"BUG {label}" in output, output
    assert "BUG crash after the 1st create" not in output, output  # a crash after the receipt
    assert re.search(r"injected: [\d:.]+ pytest-envtest:operator crash after patch configmaps "
                     r"test-unsafe-\w+/order-1: killed right after it \(the 1st successful "
                     r"write the rule selects\)", output), output
    # The re-run faulted the same request: each run's is named.
    assert re.search(r"run 2: [\d:.]+ pytest-envtest:operator crash after patch configmaps "
                     r"test-unsafe-\w+/order-1", output), output
    assert "the test: call: envtest.errors.WaitTimeoutError" in output, output
    # The point's own report, apart from the clean run's and the other point's.
    report = Path(re.search(r"report: (\S+)", output).group(1))  # type: ignore[union-attr]
    assert "crash-after-write_1_verb_patch" in report.name, report
    assert "crash-after-write=1:verb=patch,resource=configmaps,subresource=,name=order-1" in \
        (report / "faults_injected.txt").read_text()
    failure = (report / "test-failure.txt").read_text()  # the test's own traceback, whole
    assert "def test_unsafe" in failure and "WaitTimeoutError" in failure, failure
    # The summary at the end of the session says what was run.
    assert re.search(r"1 test\(s\) explored: 2 point\(s\) run: 1 bug, 1 passed", output), output
    print(f"the unsafe operator's crash point found in {found_in:.1f} s")  # the closing note

    rerun_args = again(output, label)
    assert rerun_args[1] == "--envtest-explore-point", rerun_args  # the same judgment
    rerun, rerun_output = run(orders_dir, *rerun_args)
    rerun.assert_outcomes(failed=1)
    assert f"BUG {label}" in rerun_output, rerun_output
    assert "explored crashes: 1 point(s): 1 bug" in rerun_output, rerun_output
    passing, _ = run(orders_dir, "test_orders.py::test_unsafe",
                     "--envtest-fault", "crash-after-write=2")
    passing.assert_outcomes(passed=1)


def test_exploration_passes_a_crash_safe_operator_on_every_kind_under_xdist(
        orders_dir: Any) -> None:
    result, output = run(orders_dir, "--envtest-explore=all", "-n", "2", "-rA",
                         "test_orders.py::test_safe", "test_orders.py::test_no_operator")
    result.assert_outcomes(passed=3)  # the two tests, and test_safe's point runner
    assert "test_safe@explore2" in output, output  # the point runner, an item of its own
    # Two writes (the create, the update) and one update: 2 crash, 1 conflict, 2 error points.
    match = re.search(r"test_safe: explored crashes, conflicts, errors, stale, unobserved, lag: "
                      r"(\d+) point\(s\)[^:]*: 0 bugs, (\d+) passed", output)
    assert match is not None, output
    assert int(match.group(1)) >= 5 and int(match.group(2)) >= 5, output
    assert "test_no_operator: nothing to explore: the test starts no operator" in output, output
    # The summary is the controller's, from what the workers sent back.
    assert re.search(r"2 test\(s\) explored: \d+ point\(s\) run: 0 bugs", output), output


def test_the_differential_check_finds_what_the_assertions_do_not_look_at(
        orders_dir: Any) -> None:
    plain, plain_output = run(orders_dir, "--envtest-explore=crashes",
                              "--envtest-explore-no-diff", "test_orders.py::test_forgetful")
    plain.assert_outcomes(passed=1)  # the test sees a receipt: enough for its assertion
    result, output = run(orders_dir, "--envtest-explore=crashes",  # the check is on by default
                         "--envtest-explore-grace=1", "test_orders.py::test_forgetful")
    result.assert_outcomes(failed=1)
    assert "BUG crash after the 1st create of configmaps order-1-receipt-*" in output, output
    assert ("end state: never converged: count: configmaps order-1-receipt-*: 1 in the clean "
            "run, 2 here") in output, output
    assert "BUG crash after the 1st patch" not in output, output


def test_the_marker_explores_one_test_and_a_limit_samples_with_a_seed(
        orders_dir: Any) -> None:
    orders_dir.makepyfile(test_marked=textwrap.dedent('''
        import pytest

        import test_orders


        @pytest.mark.envtest_explore("crashes", limit=1, seed=7)
        def test_marked(run_operator, k8s, namespace):
            test_orders.test_safe(run_operator, k8s, namespace)


        def test_unmarked(run_operator, k8s, namespace):
            test_orders.test_safe(run_operator, k8s, namespace)


        @pytest.mark.envtest_explore("none")
        def test_never(run_operator, k8s, namespace):
            test_orders.test_unsafe(run_operator, k8s, namespace)
    '''))
    result, output = run(orders_dir, "test_marked.py")
    result.assert_outcomes(passed=3)
    # envtest_explore("none") keeps a test out of --envtest-explore: run once, no summary.
    result, output = run(orders_dir, "test_marked.py::test_never", "--envtest-explore=crashes")
    result.assert_outcomes(passed=1)
    assert "envtest exploration" not in output, output
    result, output = run(orders_dir, "test_marked.py")
    assert ("test_marked.py::test_marked: explored crashes: 1 point(s) (sampled from 2 with "
            "seed 7, limit 1: --envtest-explore-seed=7 draws them again)") in output, output
    assert "test_unmarked" not in output.split("envtest exploration")[1], output


def test_bad_exploration_input_says_what_is_valid(orders_dir: Any) -> None:
    result, output = run(orders_dir, "--envtest-explore=crash")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("unknown exploration 'crash'; choose from crashes, conflicts, errors, stale, "
            "unobserved, lag, operations (comma separated), views (stale and unobserved) or "
            "all (every fault kind)") in result.stderr.str(), output
    result, _ = run(orders_dir, "--envtest-fault", "crash-after-writes=3")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("unknown fault 'crash-after-writes'; the faults are: conflict, error, throttle, "
            "timeout, refuse, stale, drop-watches, gone, crash-after-write, stale-view, unobserved"
            ) in result.stderr.str()
    orders_dir.makepyfile(test_bad_marker=textwrap.dedent('''
        import pytest

        @pytest.mark.envtest_explore("crashes", "stal")
        def test_marked(run_operator):
            pass
    '''))
    result, output = run(orders_dir, "test_bad_marker.py")
    result.assert_outcomes(errors=1)  # at its setup: the run's other tests would go on
    assert "@pytest.mark.envtest_explore('crashes', 'stal'): unknown exploration 'stal'" in \
        output, output
    # A fault that never fires is a warning naming it, not a silent pass.
    result, output = run(orders_dir, "test_orders.py::test_safe", "--envtest-fault",
                         "crash-after-write=9")
    result.assert_outcomes(passed=1, warnings=1)
    assert "fault crash-after-write=9 never injected: it matched 2 request(s) and fires at " \
           "the 9th" in output, output


def test_no_secret_value_in_what_exploration_prints_or_writes(orders_dir: Any,
                                                               tmp_path: Path) -> None:
    """A failing point's summary line and its files carry the test's error: one that names a
    Secret's value (plain, and as the client reads it, base64) shows neither."""
    decoy = f"decoy-{secrets.token_hex(8)}"
    orders_dir.makepyfile(test_leaky=textwrap.dedent(f'''
        import base64

        import orders
        from envtest import eventually


        def test_leaky(run_operator, k8s, namespace):
            k8s.core.create_namespaced_secret(namespace, {{
                "metadata": {{"name": "token"}}, "stringData": {{"token": "{decoy}"}}}})
            k8s.core.create_namespaced_config_map(namespace, {{
                "metadata": {{"name": "copy"}}, "data": {{"dsn": "user:{decoy}@db"}}}})
            read = k8s.core.read_namespaced_secret("token", namespace).data["token"]
            run_operator(orders.crash_unsafe(namespace))
            k8s.core.create_namespaced_config_map(
                namespace, {{"metadata": {{"name": "order-1", "labels": {{"order": "open"}}}}}})
            eventually(lambda: k8s.core.read_namespaced_config_map(
                "order-1", namespace).metadata.labels["order"] == "done", timeout=10)

            def names():  # the unsafe operator makes the receipt just after marking it done
                return [c.metadata.name for c in k8s.core.list_namespaced_config_map(
                    namespace).items]

            try:
                eventually(lambda: "order-1-receipt" in names(), timeout=3)
            except AssertionError:
                pass  # the assertion below fails, with the Secret's value in its message
            assert "order-1-receipt" in names(), (
                f"no receipt for the holder of {{base64.b64decode(read).decode()}} ({{read}})")
    '''))
    artifacts = tmp_path / "artifacts"
    result, output = run(orders_dir, "--envtest-explore=crashes", "--envtest-explore-diff",
                         "test_leaky.py", f"--envtest-artifacts={artifacts}")
    result.assert_outcomes(failed=1)
    assert "BUG crash after the 1st patch of configmaps order-1" in output and \
        "no receipt for the holder of" in output, output
    summary = output.split("BUG crash after the 1st patch", 1)[1]
    # The report is where the user keeps artifacts: no note sends them elsewhere.
    assert f"report: {artifacts}" in summary and "keeps its last three runs" not in output
    written = {path: path.read_text(errors="replace") for path in artifacts.rglob("*")
               if path.is_file()}  # every file: the point's snapshot too
    assert any(path.name == "test-failure.txt" for path in written), sorted(written)
    assert any(path.name == "objects.json" for path in written), sorted(written)
    for value in (decoy, base64.b64encode(decoy.encode()).decode()):
        assert value not in summary, summary
        for path, text in written.items():
            assert value not in text, path


@pytest.fixture(scope="module")
def go_order_keeper(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_go_operator(tmp_path_factory.mktemp("go-operator"))
    except GoUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.reliability(reason="a compiled Go operator explored: its two bug points each "
                         "wait out the test's 10 s timeouts, 46 s on one worker and 15 CPU s; "
                         "make test-reliability (and so .ci/run) runs it, and the Go "
                         "operator's own fault tests stay in make test")
def test_exploration_finds_the_crash_point_of_a_go_operator(inner_pytester: Any,
                                                             go_order_keeper: Path) -> None:
    inner_pytester.makepyfile(test_go=textwrap.dedent(f'''
        from envtest import eventually

        BINARY = {str(go_order_keeper)!r}


        def test_go_unsafe(run_operator, k8s, namespace):
            run_operator([BINARY, "--kubeconfig", "{{kubeconfig}}", "--namespace", namespace,
                          "--unsafe"])
            k8s.core.create_namespaced_config_map(
                namespace, {{"metadata": {{"name": "order-1", "labels": {{"order": "open"}}}}}})
            eventually(lambda: k8s.core.read_namespaced_config_map(
                "order-1", namespace).metadata.labels["order"] == "done", timeout=10)
            eventually(lambda: k8s.core.read_namespaced_config_map(
                "order-1-receipt", namespace), timeout=5)
    '''))
    result, output = run(inner_pytester, "--envtest-explore=crashes,errors")
    result.assert_outcomes(failed=1)
    assert "BUG crash after the 1st patch of configmaps order-1" in output, output
    assert "killed right after it (the 1st successful write the rule selects)" in output, output
    # A 500 on the patch is retried on the next tick; one on the create, after the order is
    # marked done, is the same bug met another way: nothing lists a done order again.
    assert "BUG 500 on the 1st patch" not in output, output
    assert "BUG 500 on the 1st create of configmaps order-1-receipt" in output, output
    assert re.search(r"explored crashes, errors: 4 point\(s\): 2 bugs, 2 passed", output), \
        output
