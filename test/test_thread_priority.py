"""The stepping thread's real-time scheduling (driver/thread_priority.py, the node's ``thread_priority``): the rule
(SCHED_FIFO while paced and on time, normal otherwise, raised again after ``promote_after_s`` on time) on a made-up
clock and scheduler, then a real SteppingLoop's thread as the kernel reports it (os.sched_getscheduler of its
thread id). No DDS."""

import os
import threading
import time

import pytest

from contact_sim_ros.driver.loop import PublishHook, SteppingLoop, Transport
from contact_sim_ros.driver.system import SimulatorSystem
from contact_sim_ros.driver.thread_priority import SteppingThreadPriority
from contact_sim_ros.errors import ConfigError
from contact_sim_ros.driver.node_config import NodeConfig
from contact_sim_ros.sim.simulator import Simulator

SCENE = {"robot": "iiwa_wsg", "environment": [{"name": "ground", "shape": "halfspace"}]}


class Scheduler:
    """Records the policy changes asked for; ``refuse``: raises what the kernel raises without the privilege."""

    def __init__(self, refuse=False):
        self.calls, self.refuse = [], refuse

    def __call__(self, policy, priority):
        if self.refuse and policy == os.SCHED_FIFO:
            raise PermissionError(1, "Operation not permitted")
        self.calls.append((policy, priority))


def test_fifo_while_on_time_normal_when_late_raised_again_after_a_second_on_time():
    sched = Scheduler()
    p = SteppingThreadPriority(50, demote_lag_s=0.1, promote_after_s=1.0, set_scheduler=sched)
    # permission checked, then normal scheduling until a second of steps on time: the first steps compile or load
    # kernels (seconds without sleeping)
    assert p.acquire() == "" and p.granted and not p.fifo
    assert sched.calls == [(os.SCHED_FIFO, 50), (os.SCHED_OTHER, 0)]
    p.after_step(False, 9.0)                          # the first step, 20 s of compiling: late
    p.after_step(True, 9.9)
    assert not p.fifo and len(sched.calls) == 2
    p.after_step(True, 10.0)
    assert p.fifo and sched.calls[-1] == (os.SCHED_FIFO, 50) and p.demotions == 0
    assert p.describe() == "SCHED_FIFO 50"
    sched.calls.clear()
    for k in range(100):                              # on time: no syscall per step
        p.after_step(True, 10.0 + 1e-3 * k)
    assert sched.calls == []
    p.after_step(False, 10.2)                         # late (or not paced): back to normal at once
    assert not p.fifo and sched.calls == [(os.SCHED_OTHER, 0)] and p.demotions == 1
    assert p.describe().startswith("normal (SCHED_FIFO 50 while on time")
    p.after_step(True, 10.9)
    p.after_step(False, 11.0)                         # late again before the second is up: the second restarts
    p.after_step(True, 11.9)
    assert not p.fifo and len(sched.calls) == 1
    p.after_step(True, 12.0)                          # a whole second on time since the last late step
    assert p.fifo and sched.calls[-1] == (os.SCHED_FIFO, 50) and p.demotions == 1


def test_priority_zero_asks_nothing_and_a_refusal_is_one_message_naming_the_remedy():
    sched = Scheduler()
    p = SteppingThreadPriority(0, set_scheduler=sched)
    assert p.acquire() == "" and not p.granted and sched.calls == [] and p.describe() == "normal"
    p = SteppingThreadPriority(50, set_scheduler=Scheduler(refuse=True))
    message = p.acquire()
    assert "SCHED_FIFO priority 50" in message and "Operation not permitted" in message
    assert "CAP_SYS_NICE" in message and "rtprio" in message and "thread_priority 0" in message
    assert not p.granted and not p.fifo and p.describe() == "normal (SCHED_FIFO not permitted)"


@pytest.mark.parametrize("bad", [-1, 100, 1.5, True, "50"])
def test_a_bad_priority_is_refused_naming_the_range(bad):
    with pytest.raises(ConfigError, match=r"thread_priority must be an integer in 0\.\.99"):
        SteppingThreadPriority(bad)
    if not isinstance(bad, str):                      # the node's parameter (a string is converted there)
        with pytest.raises(ConfigError, match="thread_priority"):
            NodeConfig.from_mapping({"thread_priority": bad})


# ---------------------------------------------------------------------------------------------- a real thread

@pytest.fixture(scope="module")
def sim():
    return Simulator(SCENE, engine="semi_implicit", time_step=2e-3)


def _fifo_permitted() -> bool:
    """Whether this process may raise a thread to SCHED_FIFO (root, CAP_SYS_NICE or an rtprio limit)."""
    result = []

    def probe():
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            result.append(True)
        except OSError:
            result.append(False)
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return result[0]


def _policy(loop) -> tuple[int, int]:
    tid = loop._thread.native_id
    return os.sched_getscheduler(tid), os.sched_getparam(tid).sched_priority


def _wait(condition, timeout=60.0):
    """Poll ``condition`` until true (False on timeout); the first steps of a fresh process compile kernels."""
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def test_the_paced_stepping_thread_runs_sched_fifo_or_warns_once_why_not(sim):
    sim.reset()
    warnings = []
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport(on_warning=warnings.append), 1.0, thread_priority=50)
    loop.start()
    try:
        assert _wait(lambda: loop.stats(close_window=False).steps >= 20)
        assert _policy(loop)[0] == os.SCHED_OTHER        # the first second of steps at normal scheduling
        _wait(lambda: loop.priority.fifo, timeout=30.0)
        policy, priority = _policy(loop)
        scheduling = loop.stats(close_window=False).scheduling
    finally:
        loop.stop()
    if _fifo_permitted():
        assert (policy, priority) == (os.SCHED_FIFO, 50) and scheduling == "SCHED_FIFO 50" and warnings == []
    else:
        assert policy == os.SCHED_OTHER and scheduling == "normal (SCHED_FIFO not permitted)"
        assert len(warnings) == 1 and "CAP_SYS_NICE" in warnings[0]


def _assert_never_granted(sim, real_time_factor: float) -> None:
    """A loop asked for thread_priority 50 whose thread, after 20 steps, is at normal scheduling and was never
    granted SCHED_FIFO (no privilege, or not paced)."""
    sim.reset()
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport(), real_time_factor, thread_priority=50)
    loop.start()
    try:
        assert _wait(lambda: loop.stats(close_window=False).steps >= 20)
        assert _policy(loop)[0] == os.SCHED_OTHER and not loop.priority.granted
    finally:
        loop.stop()


def test_the_thread_is_normal_when_it_does_not_sleep_and_fifo_again_once_on_time(sim):
    """Unpaced work (~/step requests, as fast as possible) and a loop that fell behind its schedule run at normal
    scheduling, so that a thread that does not sleep never takes a whole core from every other process. (Without
    the privilege, as an unprivileged user: every case at normal scheduling.)"""
    if not _fifo_permitted():
        _assert_never_granted(sim, 1.0)
        return
    sim.reset()
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport(), 1.0, start_paused=True, thread_priority=50)
    loop.start()
    try:
        assert loop.request_steps(30, timeout=60.0)       # ~/step: steps without sleeping
        assert _policy(loop)[0] == os.SCHED_OTHER and not loop.priority.fifo
        loop.set_paused(False)                            # paced and on time: raised again after 1 s
        assert _wait(lambda: loop.priority.fifo)
        assert _policy(loop) == (os.SCHED_FIFO, 50)
    finally:
        loop.stop()

    sim.reset()
    stall = threading.Event()

    def late(_sim):                                       # one step 0.3 s behind its deadline
        if stall.is_set():
            stall.clear()
            time.sleep(0.3)
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport([PublishHook("late", 1, late)]), 1.0,
                        thread_priority=50)
    loop.start()
    try:
        assert _wait(lambda: loop.priority.fifo and loop.stats(close_window=False).steps > 20)
        stall.set()
        assert _wait(lambda: loop.priority.demotions == 1)
        assert _wait(lambda: loop.priority.fifo)          # on time again for a second
        assert _policy(loop) == (os.SCHED_FIFO, 50)
    finally:
        loop.stop()

    _assert_never_granted(sim, 0.0)                       # as fast as possible


def test_work_between_steps_and_the_threads_it_starts_run_at_normal_scheduling(sim):
    """A request run between two steps (a spawned entity, a model swap, a mesh decomposition) may take seconds and
    start threads, which inherit their creator's policy: it runs at normal scheduling, and so do its threads."""
    if not _fifo_permitted():
        return test_the_thread_is_normal_when_it_does_not_sleep_and_fifo_again_once_on_time(sim)
    sim.reset()
    loop = SteppingLoop(SimulatorSystem(sim), None, Transport(), 1.0, thread_priority=50)
    loop.start()
    try:
        assert _wait(lambda: loop.priority.fifo and loop.stats(close_window=False).steps > 20)

        def work():
            seen = [os.sched_getscheduler(0)]
            t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
            t.start()
            t.join()
            return seen
        assert loop.request_call(work) == [os.SCHED_OTHER, os.SCHED_OTHER]
        assert _wait(lambda: loop.priority.fifo)          # raised again once on time for a second
    finally:
        loop.stop()
