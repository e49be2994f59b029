"""The browser viewer's controls of a run in this process: Pause / Resume and Reset clicks applied to the run
(``viewer_controls``, called between steps; it also gives the pacing origin after a pause), pacing to a multiple
of the wall clock (``pace``), a frame with the shown real-time factor once per viewer update
(``publish_if_due``), and the page kept up with the final state after the run until Ctrl-C
(``serve_until_interrupted``). Used by ``contact-sim run --viewer`` and ``contact-sim campaign FILE --trial K
--viewer``."""

from __future__ import annotations

import signal
import time


def pace(sim_t: float, pace_origin: float, real_time_factor: float) -> None:
    """Sleep until sim time ``sim_t`` (s) is due: ``pace_origin`` + sim_t / real_time_factor of perf_counter wall
    time (``real_time_factor`` 0: as fast as possible, no sleep)."""
    if real_time_factor > 0:
        ahead = sim_t / real_time_factor - (time.perf_counter() - pace_origin)
        if ahead > 0:
            time.sleep(ahead)


def publish_if_due(viewer, sim, frame_clock: tuple, now: float) -> tuple:
    """Hand the viewer the simulator's state when a viewer update is due, with the real-time factor since the last
    frame; ``frame_clock`` = (wall s, sim s) at the last frame, returned updated."""
    if not viewer.due():
        return frame_clock
    wall0, t0 = frame_clock
    viewer.publish_simulator(sim, (sim.t - t0) / (now - wall0) if now > wall0 and sim.t > t0 else None)
    return now, sim.t


def serve_until_interrupted(viewer, sim, out, real_time_factor: float | None) -> None:
    """After the run: keep the viewer's page up, showing the final state and the run's real-time factor, until
    Ctrl-C (or SIGTERM). The page's button shows Resume (nothing advances any more); Reset shows the initial
    state."""
    viewer.publish_simulator(sim, real_time_factor)
    viewer.set_paused(True)
    print(f"run finished; the viewer stays up at {viewer.url} until Ctrl-C (--exit-after-run: do not wait)",
          file=out, flush=True)

    def on_term(_signum, _frame):
        raise KeyboardInterrupt

    previous = previous_int = None
    try:
        previous = signal.signal(signal.SIGTERM, on_term)
        # Ctrl-C ends the wait even when this process was started with SIGINT ignored (a background job of a
        # non-interactive shell inherits SIG_IGN, and Python then installs no KeyboardInterrupt handler)
        previous_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:                      # not the main thread: Ctrl-C / close() only
        pass
    try:
        while viewer.alive:
            for event in viewer.events():
                if event[0] == "reset":
                    sim.reset()
                    print("  reset to the initial state, t = 0 (viewer; the run has ended)", file=out, flush=True)
                viewer.publish_simulator(sim, real_time_factor)
                viewer.set_paused(True)     # a Resume click changes nothing: the run has ended
            time.sleep(0.05)
        print("the viewer process has exited", file=out, flush=True)
    except KeyboardInterrupt:
        print("viewer closed", file=out, flush=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if previous_int is not None:
            signal.signal(signal.SIGINT, previous_int)


def viewer_controls(viewer, sim, out, pace_origin: float, real_time_factor: float, paused: bool = False,
                    resettable: bool = True) -> float:
    """Apply the viewer's Pause / Reset clicks to the run: a pause holds the loop here (the page keeps being
    served) until Resume, a reset puts the simulator back to its initial state (``resettable``; otherwise - a run
    whose controller cannot go back, such as a campaign trial - the click is reported and ignored). ``paused``:
    start held (until Resume). Returns the pacing origin (wall time at which sim time 0 is due), moved so that
    pacing resumes from the current sim time."""
    events = viewer.events()
    if not events and not paused:
        return pace_origin
    while True:
        for event in events:
            if event[0] == "pause":
                if event[1] != paused:
                    print(f"  {'paused' if event[1] else 'resumed'} at t = {sim.t:.3f} s (viewer)", file=out,
                          flush=True)
                paused = event[1]
                viewer.set_paused(paused)
                viewer.publish_simulator(sim)           # the page shows the state the run stopped at
            elif event[0] == "reset" and resettable:
                sim.reset()
                viewer.publish_simulator(sim)
                print("  reset to the initial state, t = 0 (viewer)", file=out, flush=True)
            elif event[0] == "reset":
                print(f"  reset ignored at t = {sim.t:.3f} s: this run's controller cannot go back (viewer); rerun "
                      "the command to start over", file=out, flush=True)
        if not paused:
            break
        time.sleep(0.02)
        events = viewer.events()
    return time.perf_counter() - (sim.t / real_time_factor if real_time_factor > 0 else 0.0)
