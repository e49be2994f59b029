"""The emulated controller manager (no rclpy): loads the controllers of a controllers file that are spawned
(:func:`spawned_controllers`: ``active`` as ``spawner NAME``, ``inactive`` as ``spawner --inactive NAME``; without an
``active`` list every declared controller of an emulated type but the ``inactive`` ones is spawned active), runs
their ``update(time, period)`` every ``period = 1 / update_rate`` s of sim time on the stepping thread, and
switches them (``switch``). Its services (``controller_manager/list_controllers``, ``switch_controller`` ...) are
the transport's (ros/controller_io.py).

Claims: two active controllers never share a command interface, nor command one joint through different
interfaces (a position group and a velocity group on the same joints: ros2_control's manager would let them,
the hardware refuses mixed command modes, as Franka's does in ``prepare_command_mode_switch``). ``switch`` with STRICT (or AUTO, FORCE_AUTO)
fails as a whole on an unknown name, an activation of an active controller, a deactivation of an inactive one, or
a claim conflict, a claimed command interface the hardware does not export (ros2_control's "Unable to activate
controller ... since the command interface ... is not available.") or a claimed state interface it does not export
("... since the state interface ... is not available.": ``j1/acceleration``, a misspelled joint or sensor; at
start-up a ConfigError naming the controllers file); BEST_EFFORT (and 0, as in ros2_control) skips
those and switches the rest. Deactivation comes
before activation, so a trajectory controller can be swapped for a forward controller on the same joints in one
call.

Loans: an activated controller gets exactly the (joint, interface) pairs it claims
(loaned_interfaces.LoanedCommandInterfaces: writing another joint, or another interface of its joints, raises), released when it is deactivated. An
``update`` that returns ReturnType.ERROR or raises deactivates its controller at the end of that cycle, logged
through the transport with ros2_control's line ("Deactivating controllers : [ NAME ] as their update resulted in
an error!"; an exception first as "Caught exception of type : ... while updating controller 'NAME': ..."); the
other controllers and the stepping go on.

:class:`ControllerManagers` runs several robots' managers in one world (each at its own rate).
"""

from __future__ import annotations

import os
import threading

from ..errors import ConfigError
from ..yaml_files import read_mapping
from .command_validation import JointLimits
from .controllers.base import NO_IO, Controller, ControllerContext, ControllerTransport, ReturnType, flatten
from .controllers.registry import CONTROLLER_TYPES, controller_class
from .hardware import STATE_INTERFACES
from .loaned_interfaces import CommandInterfacesView, LoanedCommandInterfaces
from .loop import PublishHook

BEST_EFFORT, STRICT, AUTO, FORCE_AUTO = 1, 2, 3, 4
__all__ = ["BEST_EFFORT", "STRICT", "AUTO", "FORCE_AUTO", "CONTROLLER_TYPES", "ControllerManager",
           "ControllerManagers", "controller_parameters_from_files", "spawned_controllers", "MAX_PARAMS_FILE_BYTES",
           "some_names"]

# the largest controller parameters file (``NAME.params_file``, spawner's -p) read (bytes): 64 KiB, 10 times the
# largest file of ros2_control's and the vendors' stacks (UR's, 6.7 kB). Parsing (pure-Python YAML, 2.5 s per MB)
# holds the GIL, which the stepping thread shares, and the controller checks its parameters between two steps: a
# 5 MB file took 53 s and paused the stepping for up to 1.75 s (issue 44, fuzz finding 7); at 256 KiB (11k
# parameters) a load took 1.2 s and paused the stepping 0.2 s. A larger file is refused before it is read.
MAX_PARAMS_FILE_BYTES = 64 * 1024
SHOWN_NAMES = 10        # names listed in a log line or a service answer; the rest counted ("and 9,990 more")


def some_names(names, limit: int = SHOWN_NAMES) -> str:
    """``names`` as a list for a message: at most ``limit`` of them (each cut to 80 characters), then "and N more"."""
    names = list(names)
    shown = [n if len(str(n)) <= 80 else f"{str(n)[:77]}..." for n in names[:limit]]
    text = repr(shown)
    if len(names) > limit:
        text = f"{text[:-1]}, and {len(names) - limit:,} more]"
    return text


def spawned_controllers(file, active=(), inactive=()):
    """What the spawners ``spawner ACTIVE...`` and ``spawner --inactive INACTIVE...`` would load from ``file``
    (config.ControllersFile): (specs to load in file order, names to activate, warnings (one line each)).

    Without ``active``, every declared controller not in ``inactive`` is spawned active (the emulation's default),
    and one of a type the simulation does not emulate is left out with a warning. A name in ``active`` the file
    does not declare, a spawned controller without a type or of a type not emulated: ConfigError naming the file,
    the controller and (for the type) the supported types. A name in ``inactive`` the file does not declare is a
    warning (a robot's default list may name controllers a user's file does not have)."""
    source = file.source
    active = list(dict.fromkeys(str(n) for n in active))
    inactive = list(dict.fromkeys(str(n) for n in inactive))
    declared = {c.name: c for c in file.controllers}
    both = [n for n in active if n in inactive]
    if both:
        raise ConfigError(f"{source}: {both} are in both active_controllers and inactive_controllers")
    unknown = [n for n in active if n not in declared]
    if unknown:
        raise ConfigError(f"{source}: active_controllers {unknown} are not declared in the file (a spawner would "
                          f"fail: no '<name>: {{type: ...}}' under controller_manager); declared: "
                          f"{', '.join(declared)}")
    warnings = []
    unknown = [n for n in inactive if n not in declared]
    if unknown:
        warnings.append(f"inactive_controllers: {unknown} are not in {source} (ignored); its controllers: "
                        f"{', '.join(declared)}")
    asked = set(active) | set(inactive)
    load, skipped = [], []
    for spec in file.controllers:
        spawned = spec.name in asked or (not active and spec.name not in inactive)
        if not spawned:
            if spec.type not in CONTROLLER_TYPES:
                skipped.append(spec)
            continue
        if not spec.type or "/" not in spec.type:
            raise ConfigError(f"{source}: controller '{spec.name}' needs 'type: <package>/<Class>' under "
                              f"controller_manager.ros__parameters, got {spec.type or None!r}")
        if spec.type not in CONTROLLER_TYPES:
            if spec.name in asked:
                which = "active_controllers" if spec.name in active else "inactive_controllers"
                try:
                    controller_class(spec.type, spec.name, source)
                except ConfigError as exc:
                    raise ConfigError(f"{exc} (spawned by the node parameter {which})") from None
            skipped.append(spec)
            continue
        load.append(spec)
    if skipped:
        warnings.append(f"{source}: not loaded, types the simulation does not emulate (nobody spawns them): "
                        + ", ".join(f"'{c.name}' ({c.type or 'no type'})" for c in skipped))
    start = [c.name for c in load if c.name not in inactive]
    return load, start, warnings


class ControllerManager:
    """Owns the emulated controllers of one robot; see the module docstring."""

    def __init__(self, system, controllers_file, inactive=(), robot=None, joints=None,
                 transport: ControllerTransport | None = None, limits=None,
                 default_rates: dict | None = None, active=()):
        """``inactive``, ``active``: the controllers spawned inactive and active (spawned_controllers);
        ``system``: the hardware System (system.py; its state and command interfaces, command hand-over);
        ``joints``: the robot's actuated joints when the world holds several robots (None: every joint);
        ``transport``: attaches each controller's topics and actions and receives the reports (warnings,
        rejected commands); ``limits``: JointLimits of the model; ``default_rates``: Hz of the broadcasters
        without an update_rate ('joint_states', 'wrench')."""
        self.system = system
        self.hw = system.command          # the command interfaces (the manager claims and loans their rows)
        self.transport = transport if transport is not None else ControllerTransport()
        self.source = controllers_file.source
        self.update_rate = controllers_file.update_rate
        dt = float(system.dt)
        self.every = max(1, int(round(1.0 / (self.update_rate * dt))))
        self.period = self.every * dt
        self.lock = threading.Lock()
        if limits is None:
            limits = JointLimits.from_model(system.sim.model)
        ctx = ControllerContext(state=system.state, command=CommandInterfacesView(system.command),
                                model=system.sim.model, limits=limits, update_rate=self.update_rate, time_step=dt,
                                transport=self.transport, robot=robot,
                                joints=tuple(joints) if joints is not None else None,
                                default_rates=dict(default_rates or {}))
        self.ctx = ctx
        self.specs = {spec.name: spec for spec in controllers_file.controllers}   # declared: name -> spec
        self.controllers = {}
        self.manager_params = dict(getattr(controllers_file, "manager_params", {}))
        load, start_names, warnings = spawned_controllers(controllers_file, active, inactive)
        for note in getattr(controllers_file, "notes", ()):
            self.transport.info(note)
        for message in warnings:
            self.transport.warn_throttled(message)
        for spec in load:
            cls = controller_class(spec.type, spec.name, self.source)
            try:
                self.controllers[spec.name] = cls(spec.name, spec.type, spec.params, ctx)
            except ConfigError as exc:
                raise ConfigError(f"{self.source}: {exc}") from None
        for c in self.controllers.values():      # the transport side: topics, actions, publishers
            io = self.transport.attach(c)
            if io is not None:
                c.io = io
        start = [self.controllers[n] for n in start_names]
        for c in start:
            error = self._unavailable(c)
            if error:
                raise ConfigError(f"{self.source}: {error}")
        error = self._conflicts(start)
        if error:
            raise ConfigError(f"{self.source}: cannot activate every controller at start: {error}; list the ones "
                              f"to load inactive in the node parameter 'inactive_controllers' (or the ones to "
                              f"activate in 'active_controllers')")
        for c in start:
            self._activate(c)
        self.devices = []        # hardware-side devices run with the controllers (add_device)
        self._updaters = []
        self._refresh()
        self.hooks = [PublishHook(f"controller {c.name}", c.publish_every, self._publisher(c),
                                  while_paused=c.republish_while_paused)
                      for c in self.controllers.values() if c.publish_every > 0]
        for c in self.controllers.values():
            extra = c.unhonoured_parameters()
            if extra:
                self.transport.info(f"controller '{c.name}': parameter(s) {some_names(extra)} are not emulated "
                                    f"(ignored)")

    # ------------------------------------------------------------------------------ stepping thread

    def _publisher(self, controller):
        def publish(sim):
            if controller.active:
                controller.io.publish()
        return publish

    def cycle(self, step: int, time: float) -> None:
        """Before the step ``step`` at sim time ``time`` (s): the controllers' update if this manager is due."""
        if step % self.every == 0:
            self.update(time, self.period)

    def update(self, time: float, period: float) -> None:
        """Every active controller's update (stepping thread); those whose update returned ERROR or raised are
        deactivated after the others' (module docstring)."""
        failed, ok = None, ReturnType.OK
        with self.lock:
            for c in self._updaters:
                try:
                    result = c.update(time, period)
                except Exception as exc:        # as ros2_control's manager with handle_exceptions (its default)
                    self.transport.error(f"Caught exception of type : {type(exc).__name__} while updating "
                                         f"controller '{c.name}': {exc}")
                    result = ReturnType.ERROR
                if result is not ok:
                    if failed is None:
                        failed = []
                    failed.append(c)
            if failed is not None:
                self._deactivate_failed(failed)

    def compiled_updates(self, step: int, time: float):
        """(driver/control_period.ControlPeriod, between two steps) Every updating controller's (and device's)
        ``compiled_update`` at the step ``step`` and sim time ``time`` (s) as (controller, what it returned), when
        each update is a compiled pass; None when one needs its Python ``update``."""
        out = []
        due = step % self.every == 0
        for c in self._updaters:
            plan = c.compiled_update(time, due)
            if plan is None:
                return None
            out.append((c, plan))
        return out

    def _deactivate_failed(self, failed) -> None:
        """Deactivate the controllers (or devices) ``failed`` whose update failed (the lock held)."""
        self.transport.error(f"Deactivating controllers : [ {''.join(c.name + ' ' for c in failed)}] as their "
                             f"update resulted in an error!")
        for c in failed:
            try:
                c.on_deactivate()
            except Exception as exc:
                self.transport.error(f"Caught exception of type : {type(exc).__name__} while deactivating "
                                     f"controller '{c.name}': {exc}")
            self._release(c)
            if c in self.devices:
                self.devices.remove(c)
        self._refresh()

    def preempt(self, command) -> None:
        indices = set(command.indices.tolist())
        with self.lock:
            for c in self._updaters:
                c.preempt(indices)

    def reset(self) -> None:
        """After the System's reset (its state interfaces hold the initial state)."""
        with self.lock:
            for c in list(self.controllers.values()) + self.devices:
                c.reset()
                if c.active:
                    c.on_activate()

    def on_model_changed(self, model) -> None:
        """The physics model was rebuilt (stepping thread): every controller, active or not, is told."""
        with self.lock:
            self.ctx.model = model
            for c in list(self.controllers.values()) + self.devices:
                c.on_model_changed(model)

    def shutdown(self) -> None:
        """Finish what waits on the controllers (pending goals) and detach their transport sides (which refer back
        to them: no reference cycle outlives the world)."""
        for c in list(self.controllers.values()) + self.devices:
            c.shutdown()
            c.io = NO_IO

    # ------------------------------------------------------------------------------ activation

    def _refresh(self):
        self._updaters = [c for c in self.controllers.values()
                          if c.active and type(c).update is not Controller.update] + self.devices

    def add_device(self, device) -> None:
        """Run ``device`` (a Controller instance) with the controllers, as a device of the hardware rather than a
        controller: it is not listed, loaded or switched; its command interfaces are claimed in its name from now
        on, so that no controller can be activated on them (the Franka Hand's gripper, which franka_gripper
        commands through libfranka: driver/franka.py ``hand_gripper``). ConfigError if an active controller
        claims one of them. Before the stepping loop starts, or between two steps."""
        with self.lock:
            error = (self._unavailable(device) or
                     self._conflicts([c for c in self.controllers.values() if c.active] + self.devices + [device]))
            if error:
                raise ConfigError(f"{self.source}: {error}")
            self._activate(device)
            self.devices.append(device)
            self._refresh()

    def _conflicts(self, active) -> str:
        """Why ``active`` cannot be active together ('' if they can): two controllers claiming the same command
        interface, or one joint commanded by two controllers through different interfaces (mixed modes)."""
        owner = {}             # joint -> (the controller commanding it, the interfaces it claims)
        for c in active:
            for i in c.command_interfaces():
                joint = i.rpartition("/")[0]
                other, claimed = owner.setdefault(joint, (c.name, []))
                if other == c.name:          # one controller, several interfaces of a joint (position + velocity)
                    claimed.append(i)
                elif i in claimed:
                    return f"'{c.name}' and '{other}' both claim {i}"
                else:
                    return (f"'{c.name}' claims {i} while '{other}' claims {', '.join(claimed)}: mixed command "
                            f"modes on joint '{joint}' (the hardware refuses them)")
        return ""

    def _unavailable(self, c) -> str:
        """Why ``c`` cannot be activated on this hardware ('' if it can): a command interface it claims is not
        exported, else a state interface it claims is not (ros2_control's messages, in its order, then the
        reason)."""
        for i in c.command_interfaces():
            reason = self.hw.unavailable_reason(i)
            if reason:
                return (f"Unable to activate controller '{c.name}' since the command interface '{i}' is not "
                        f"available. ({reason})")
        claimed = c.state_interfaces()
        if claimed:
            available = self.available_state_interfaces()
            for i in claimed:
                if i not in available:
                    owner = i.rpartition("/")[0]
                    offered = sorted(n.rpartition("/")[2] for n in available if n.rpartition("/")[0] == owner)
                    reason = (f"'{owner}' exports the state interfaces {offered}" if offered else
                              f"no joint or sensor '{owner}'")
                    return (f"Unable to activate controller '{c.name}' since the state interface '{i}' is not "
                            f"available. ({reason})")
        return ""

    def available_state_interfaces(self) -> frozenset:
        """The state interfaces ("name/interface") the hardware exports: each actuated joint's and each mimic
        joint's position, velocity and effort (hardware.STATE_INTERFACES), the <ros2_control> block's sensors'
        and those of the sensors the System measures (sensors/base.Sensor.state_interfaces)."""
        names = set(self.hw.available_state_interfaces())
        names.update(f"{mj.name}/{i}" for mj in self.ctx.model.mimic_joints for i in STATE_INTERFACES)
        for sensor in self.system.state.sensors():
            names.update(sensor.state_interfaces())
        return frozenset(names)

    def _activate(self, c):
        names = c.command_interfaces()
        c.assign_interfaces(LoanedCommandInterfaces(self.hw, self.system.commands, names, c.name))
        try:
            c.on_activate()
        except BaseException:
            c.release_interfaces()
            raise
        c.state = "active"
        for i in names:
            self.hw.claims[i] = c.name

    def _release(self, c):
        c.release_interfaces()
        c.state = "inactive"
        for i in c.command_interfaces():
            if self.hw.claims.get(i) == c.name:
                del self.hw.claims[i]

    def _deactivate(self, c):
        c.on_deactivate()
        self._release(c)

    def switch(self, activate, deactivate, strictness: int) -> tuple[bool, str]:
        """Apply a switch_controller request; (ok, message). Between two steps (the stepping thread, or
        ``SteppingLoop.request_call`` from another): (de)activation reads the state interfaces and writes the
        command interfaces, which the stepping thread refills in place (a read from another thread while it runs
        raised numpy's "WRITEBACKIFCOPY base is read-only" and left the service unanswered)."""
        strictness = strictness or BEST_EFFORT
        if strictness not in (BEST_EFFORT, STRICT, AUTO, FORCE_AUTO):
            return False, f"unknown strictness {strictness}; valid: 1 (BEST_EFFORT), 2 (STRICT), 3, 4"
        strict = strictness != BEST_EFFORT
        problems = []
        act, deact = [], []
        unknown = [n for n in dict.fromkeys(list(deactivate) + list(activate)) if n not in self.controllers]
        if len(unknown) == 1:
            problems.append(f"unknown controller '{unknown[0]}'")
        elif unknown:       # 10,000 bogus names: a message of 10 of them, not of 329 kB (issue 44)
            problems.append(f"unknown controllers {some_names(unknown)}")
        for name in deactivate:
            c = self.controllers.get(name)
            if c is None:
                continue
            elif not c.active:
                problems.append(f"'{name}' is not active")
            else:
                deact.append(c)
        for name in activate:
            c = self.controllers.get(name)
            if c is None:
                continue
            elif c.active and c not in deact:
                problems.append(f"'{name}' is already active")
            elif c.state == "unconfigured":
                problems.append(f"'{name}' is unconfigured (configure_controller first)")
            elif unavailable := self._unavailable(c):
                problems.append(unavailable)
            else:
                act.append(c)
        if problems and strict:
            return False, "; ".join(problems)
        with self.lock:
            remaining = [c for c in self.controllers.values() if c.active and c not in deact] + self.devices
            accepted = []
            for c in act:
                error = self._conflicts(remaining + accepted + [c])
                if error:
                    if strict:
                        return False, f"claim conflict: {error}"
                    problems.append(f"not activating '{c.name}': {error}")
                    continue
                accepted.append(c)
            for c in deact:
                self._deactivate(c)
            for c in accepted:
                self._activate(c)
            self._refresh()
        message = (f"activated {[c.name for c in accepted]}, deactivated {[c.name for c in deact]}"
                   + (f"; skipped: {'; '.join(problems)}" if problems else ""))
        return True, message

    # ------------------------------------------------------------------------------ load / unload

    def load(self, spec) -> Controller:
        """Load the controller ``spec`` (config.ControllerSpec: name, type, parameters) as load_controller does: built
        by its type's class from its checked parameters, its transport side attached, 'unconfigured' until
        ``configure``; a broadcaster's publish hook is appended to ``hooks`` (the caller hands it to the stepping
        loop). Between two steps (``SteppingLoop.request_call``), as ``switch``. ConfigError (nothing loaded): a
        controller of that name is loaded, the type is not emulated, a parameter is missing or wrong."""
        if spec.name in self.controllers:
            raise ConfigError(f"a controller named '{spec.name}' is already loaded")
        cls = controller_class(spec.type, spec.name, "load_controller")
        c = cls(spec.name, spec.type, spec.params, self.ctx)
        io = self.transport.attach(c)
        if io is not None:
            c.io = io
        c.state = "unconfigured"
        with self.lock:
            self.controllers[spec.name] = c
        if c.publish_every > 0:
            self.hooks.append(PublishHook(f"controller {c.name}", c.publish_every, self._publisher(c),
                                          while_paused=c.republish_while_paused))
        extra = c.unhonoured_parameters()
        if extra:
            self.transport.info(f"controller '{c.name}': parameter(s) {some_names(extra)} are not emulated (ignored)")
        return c

    def configure(self, name: str) -> None:
        """configure_controller: an unconfigured (or inactive) controller becomes inactive; ConfigError: not
        loaded, or active (the real controller_manager refuses to configure an active controller)."""
        c = self.controllers.get(name)
        if c is None:
            raise ConfigError(f"no controller named '{name}' is loaded")
        if c.active:
            raise ConfigError(f"controller '{name}' is active: deactivate it before configuring it")
        c.state = "inactive"

    def cleanup(self, name: str) -> None:
        """cleanup_controller: an inactive controller becomes unconfigured (configure_controller again before it can
        be activated); ConfigError otherwise (not loaded, active, already unconfigured), as the real one refuses."""
        c = self.controllers.get(name)
        if c is None:
            raise ConfigError(f"no controller named '{name}' is loaded")
        if c.state != "inactive":
            raise ConfigError(f"controller '{name}' cannot be cleaned up from its state '{c.state}' (inactive only)")
        c.state = "unconfigured"

    def unload(self, name: str) -> Controller:
        """unload_controller: the controller is removed (its transport side detached, its publish hook dropped
        from ``hooks``; returns it). Refused (ConfigError) while it is active, as the real controller_manager
        refuses; or when no controller of that name is loaded. Between two steps, as ``switch``."""
        c = self.controllers.get(name)
        if c is None:
            raise ConfigError(f"no controller named '{name}' is loaded")
        if c.active:
            raise ConfigError(f"controller '{name}' is active: deactivate it before unloading it")
        with self.lock:
            del self.controllers[name]
            self._refresh()
        self.hooks = [h for h in self.hooks if h.name != f"controller {name}"]
        c.shutdown()
        self.transport.detach(c)
        c.io = NO_IO
        return c


def controller_parameters_from_files(paths, name: str, namespace: str = "/") -> dict:
    """The parameters of controller ``name`` (in node namespace ``namespace``) in the ROS 2 parameter files
    ``paths`` (a spawner's ``-p`` / ``--param-file``, set as ``<name>.params_file`` on the controller manager),
    later files winning, found under the keys spawner and rcl accept for the controller's node: ``name``,
    ``/ns/name``, ``/**/name``, ``/**/ns/name``, the same nested under ``/**``, and ``/**: ros__parameters``
    (every node). Flattened to dotted names; ``type`` (read by the controller manager) dropped. ConfigError names
    the file when one is unreadable, larger than MAX_PARAMS_FILE_BYTES (not read; its size and the bound in the
    message) or a section is not ``{ros__parameters: {...}}``."""
    ns = "" if namespace.strip("/") == "" else "/" + namespace.strip("/")
    keys = [name, f"{ns}/{name}", f"/**/{name}", f"/**{ns}/{name}"]
    out: dict = {}
    for path in paths:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0                   # read_mapping says what is wrong with it
        if size > MAX_PARAMS_FILE_BYTES:
            raise ConfigError(f"{path}: controller parameters file of {size:,} bytes, larger than the "
                              f"{MAX_PARAMS_FILE_BYTES:,} bytes (64 KiB) one may have: not read, nothing loaded "
                              f"(controller parameters files are a few kB)")
        data = read_mapping(path, "controller parameters file")
        sections = []
        wild = data.get("/**")
        if isinstance(wild, dict):
            if "ros__parameters" in wild:
                sections.append(("/**", wild))
            sections += [(f"/**: {k}", wild[k]) for k in dict.fromkeys(keys) if k in wild]
        sections += [(k, data[k]) for k in dict.fromkeys(keys) if k in data]
        for key, section in sections:
            params = section.get("ros__parameters") if isinstance(section, dict) else None
            if not isinstance(params, dict):
                raise ConfigError(f"{path}: '{key}' must hold a 'ros__parameters' mapping (ROS 2 parameter file "
                                  f"format)")
            out.update(flatten(params))
    out.pop("type", None)
    return out


class ControllerManagers:
    """Several robots' controller managers in one world (each at its own update rate): what the stepping loop
    runs (``cycle``, ``preempt``, ``reset``, ``hooks``) and the node tells (``on_model_changed``, ``shutdown``)."""

    def __init__(self, managers):
        self.managers = list(managers)

    @property
    def hooks(self) -> list:
        """Every manager's publish hooks (a controller loaded or unloaded since changes them)."""
        return [h for cm in self.managers for h in cm.hooks]

    def cycle(self, step: int, time: float) -> None:
        for cm in self.managers:
            cm.cycle(step, time)

    def preempt(self, command) -> None:
        for cm in self.managers:
            cm.preempt(command)

    def reset(self) -> None:
        for cm in self.managers:
            cm.reset()

    def on_model_changed(self, model) -> None:
        for cm in self.managers:
            cm.on_model_changed(model)

    def shutdown(self) -> None:
        for cm in self.managers:
            cm.shutdown()
