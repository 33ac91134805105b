"""The process-wide thread pool: results in order, nested use, a forked child."""

from __future__ import annotations

import os
import threading

import pytest

from hoodie_ray import threads


def test_results_come_in_order_on_pooled_threads():
    names = threads.map_in_pool(lambda x: (x, threading.current_thread().name), range(50))
    assert [x for x, _ in names] == list(range(50))
    assert all(n.startswith("hoodie-pool") for _, n in names)


def test_a_map_inside_a_pooled_task_runs_on_that_thread():
    """A read started from a pooled task does not wait for the (possibly busy) pool."""

    def outer(x: int) -> tuple[str, list[str]]:
        me = threading.current_thread().name
        inner = threads.map_in_pool(lambda _: threading.current_thread().name, range(3))
        return me, inner

    for me, inner in threads.map_in_pool(outer, range(threads.MAX_READ_THREADS * 2)):
        assert inner == [me] * 3


def test_the_pool_is_made_again_in_a_forked_child():
    threads.map_in_pool(abs, [-1, -2])  # the parent's pool exists
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        try:
            ok = threads.map_in_pool(abs, [-1, -2, -3]) == [1, 2, 3]
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single_inputs(n):
    assert threads.map_in_pool(str, range(n)) == [str(i) for i in range(n)]
