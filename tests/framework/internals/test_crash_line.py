"""A crash in one line: a Go panic by its message and the operator's own frame."""

from __future__ import annotations

from envtest.api.operators.crashes import crash_line

GO_PANIC = """exit code 2; last lines of /tmp/operator-redis-operator.log:
1.79e+09\tINFO\tcontroller_redis\tRedis statefulset get action failed
panic: runtime error: invalid memory address or nil pointer dereference
[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x13a8370]

goroutine 292 [running]:
redis-operator/k8sutils.generateContainerDef({0x39a1e9303850, 0x10}, ...)
\t/src/k8sutils/statefulset.go:208 +0x250
redis-operator/controllers.(*RedisReconciler).Reconcile(0x39a1e9812c30, ...)
\t/src/controllers/redis_controller.go:67 +0x2bb
sigs.k8s.io/controller-runtime/pkg/internal/controller.(*Controller).Start.func2.2()
\t/go/pkg/mod/sigs.k8s.io/controller-runtime@v0.11.0/pkg/internal/controller/controller.go:227 +0x73
"""


def test_a_go_panic_is_told_by_its_message_and_the_operators_frame() -> None:
    """Before: the last line, ``controller.go:227 +0x73``, was all a finding said."""
    assert crash_line(GO_PANIC) == (
        "panic: runtime error: invalid memory address or nil pointer dereference "
        "(k8sutils.generateContainerDef at statefulset.go:208)")
    recovered = GO_PANIC.replace("goroutine 292 [running]:\n", "goroutine 292 [running]:\n"
                                 "panic({0x15, 0x2})\n\t/go/src/runtime/panic.go:791 +0x132\n")
    assert crash_line(recovered).endswith("(k8sutils.generateContainerDef at statefulset.go:208)")


def test_anything_else_is_told_by_its_last_line() -> None:
    assert crash_line("Traceback (most recent call last):\n  File 'x'\nValueError: boom\n") \
        == "ValueError: boom"
    assert crash_line("exit code 1; last lines of log:\nfatal: no config\n") == "fatal: no config"
    assert crash_line("   ") == "crashed"
    assert crash_line("fatal error: concurrent map writes\n") == \
        "fatal error: concurrent map writes"


def test_a_stack_logged_below_an_error_is_not_the_line() -> None:
    """A manager that gave up (zap logs the error, then its stack): before, the line was
    ``/usr/local/go/src/runtime/proc.go:290``."""
    exited = ("exit code 1; last lines of log:\n"
              "1.79e+09\tERROR\tsetup\tproblem running manager\t{\"error\": \"failed to "
              "wait for rediscluster caches to sync\"}\nmain.main\n\t/src/main.go:116\n"
              "runtime.main\n\t/usr/local/go/src/runtime/proc.go:290\n")
    assert crash_line(exited).startswith("1.79e+09\tERROR\tsetup\tproblem running manager")
