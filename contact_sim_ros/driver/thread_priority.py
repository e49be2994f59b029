"""Real-time scheduling of the stepping thread (the node's ``thread_priority``): SCHED_FIFO while the paced loop
keeps its deadlines, normal scheduling otherwise.

ros2_control's controller_manager runs its update thread under SCHED_FIFO at ``thread_priority`` (default 50) so
that no ordinary process delays its wake-ups; this package's stepping thread stands in for that thread and does
the same when the node's ``thread_priority`` is set (issue 28: a camera process at idle priority on the other core
added ~0.2 ms of step-period jitter to a thread at normal priority, none to one under SCHED_FIFO;
docs/benchmarks.md). The node's default is 0 (normal scheduling): most users run it unprivileged, where asking
would only print a warning at every start, and on a standard kernel controller_manager does not ask either.
Two differences when set:

* controller_manager asks for SCHED_FIFO only on a PREEMPT_RT kernel; here it is asked on any Linux kernel (the
  policy works on a standard one: it is the kernel's wake-up preemption the loop needs, not bounded latency).
  Where it is not permitted (no CAP_SYS_NICE, RLIMIT_RTPRIO 0: the usual unprivileged user) the thread stays
  at normal priority and the caller gets one message saying so and how to allow it.
* A SCHED_FIFO thread that never sleeps takes a whole core from every ordinary process (the kernel leaves them
  5 %: sched_rt_runtime_us). The stepping loop does not sleep when it cannot keep real time, steps as fast as
  possible (real_time_factor 0), runs ~/step requests or work between two steps (a spawned entity, a model
  swap, a mesh decomposition, whose threads would inherit the policy): then the thread is set back to normal
  scheduling, and raised again once it has kept its deadlines for ``promote_after_s`` of wall time. It starts at
  normal scheduling for the same reason (the first steps compile or load kernels: seconds without sleeping) and
  is first raised after ``promote_after_s`` of steps on time.

No rclpy here; the policy changes are syscalls of the calling thread (Linux schedules threads), made only on
a change of state, never per step.
"""

from __future__ import annotations

import os

from ..errors import ConfigError

# the highest SCHED_FIFO priority Linux gives (sched_get_priority_max)
MAX_THREAD_PRIORITY = 99


def _set_scheduler(policy: int, priority: int) -> None:
    os.sched_setscheduler(0, policy, os.sched_param(priority))     # 0: the calling thread


class SteppingThreadPriority:
    """SCHED_FIFO at ``priority`` (1..99) for the thread that calls :meth:`acquire`, while :meth:`after_step`
    reports steps on time; 0: never (normal scheduling).

    demote_lag_s: s, a paced step that ends later than this after its deadline means the loop is not keeping
        real time: the thread goes back to normal scheduling.
    promote_after_s: s of wall time with every paced step within ``demote_lag_s`` of its deadline before the
        thread is raised again.
    set_scheduler: ``(policy, priority)`` for the calling thread (os.sched_setscheduler; replaceable in tests).
    """

    def __init__(self, priority: int, demote_lag_s: float = 0.1, promote_after_s: float = 1.0,
                 set_scheduler=_set_scheduler):
        if isinstance(priority, bool) or not isinstance(priority, int) or not 0 <= priority <= MAX_THREAD_PRIORITY:
            raise ConfigError(f"thread_priority must be an integer in 0..{MAX_THREAD_PRIORITY} (0: normal "
                              f"scheduling; SCHED_FIFO priority otherwise), got {priority!r}")
        self.priority = priority
        self.demote_lag_s = float(demote_lag_s)
        self.promote_after_s = float(promote_after_s)
        self._set_scheduler = set_scheduler
        self.granted = False          # SCHED_FIFO is permitted for the thread (acquire succeeded)
        self.fifo = False             # the thread runs under SCHED_FIFO now
        self.demotions = 0            # times the thread went back to normal scheduling
        self.error = ""               # why SCHED_FIFO was not granted ('' if granted or not asked)
        self._last_late = None        # wall time (s) of the last step not on time (None: no step yet)

    def acquire(self) -> str:
        """Check that the calling thread may run under SCHED_FIFO (asked, then set back to normal scheduling until
        ``promote_after_s`` of steps on time); '' when permitted or not asked (priority 0), else a message saying
        why not and what allows it (the thread keeps normal scheduling)."""
        if self.priority == 0:
            return ""
        try:
            self._set_scheduler(os.SCHED_FIFO, self.priority)
        except (AttributeError, OSError) as exc:   # AttributeError: not Linux (no os.SCHED_FIFO)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            self.error = (f"could not give the stepping thread SCHED_FIFO priority {self.priority} ({reason}); it "
                          f"runs at normal priority and other processes can delay its steps. Allow it with "
                          f"CAP_SYS_NICE (docker run --cap-add=SYS_NICE) or an rtprio limit "
                          f"(/etc/security/limits.conf: '@realtime - rtprio 99'), or set thread_priority 0 to "
                          f"silence this")
            return self.error
        self._set_scheduler(os.SCHED_OTHER, 0)
        self.granted = True
        return ""

    def after_step(self, on_time: bool, now: float) -> None:
        """After each step of the granted thread: ``on_time`` = the step was paced (it will sleep to a deadline)
        and ended within ``demote_lag_s`` of it; ``now`` = its end (s, monotonic)."""
        if self._last_late is None:       # the first step: the promotion time counts from its end
            self._last_late = now
        if not on_time:
            self._last_late = now
            if self.fifo:
                self._set_scheduler(os.SCHED_OTHER, 0)       # lowering the policy is always permitted
                self.fifo = False
                self.demotions += 1
        elif not self.fifo and now - self._last_late >= self.promote_after_s:
            try:
                self._set_scheduler(os.SCHED_FIFO, self.priority)
            except OSError:            # the permission was taken away meanwhile: stay normal
                self.granted = False
                return
            self.fifo = True

    def describe(self) -> str:
        """The thread's scheduling now, for diagnostics."""
        if self.fifo:
            return f"SCHED_FIFO {self.priority}"
        if self.granted:
            return f"normal (SCHED_FIFO {self.priority} while on time; {self.demotions} demotions)"
        if self.priority and self.error:
            return "normal (SCHED_FIFO not permitted)"
        return "normal"
