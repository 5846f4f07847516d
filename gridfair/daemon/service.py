"""The daemon process: the scheduler, signals, back-off, logging, metrics.

APScheduler (3.x) runs the cycle as an interval job with `max_instances=1` (never two at
once) and `coalesce=True` (a late cycle runs once, not once per missed interval). With
`daemon.poll`, the main thread looks at the pool that often between cycles
(`PoolBackend.changed`: a slot freed, jobs submitted) and on a change runs the cycle at once;
the interval is then the longest wait. While the last cycle left allocations in flight, the
main thread asks the pool for a negotiation again every `RENEGOTIATE_EVERY` seconds. The main
thread waits for SIGTERM/SIGINT; on either, the running cycle stops before its next action
(what it planned but did not carry out stays `planned` in the journal) and the process exits,
0 after SIGTERM (a service stopped) and 130 after SIGINT (the shell's convention). SIGHUP reopens
the log file (after logrotate moved it) and reads the config file again: a valid one is taken
from the next cycle on; a bad one, or one changing what only a restart can (the backend, the
store, the metrics server), is refused with a logged line and the daemon goes on as it was.

After a failed cycle (pool unreachable, timeout, store error) the next ones are skipped for
`interval x 2^(failures-1)` seconds, at most `backoff_max`: a pool that is down is not
hammered, and the first cycle after it returns runs as usual.
"""

from __future__ import annotations

import logging
import logging.handlers
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from gridfair.daemon.advert import ad_name, daemon_ad
from gridfair.daemon.backends import ActionFailed, PoolBackend, backend_class, require_slots
from gridfair.daemon.config import Config
from gridfair.daemon.cycle import CycleReport, CycleRunner, read_with_timeout
from gridfair.daemon.faults import FaultPoints
from gridfair.daemon.metrics import NullMetrics, PrometheusMetrics
from gridfair.daemon.store import Store, StoreError, private_file
from gridfair.errors import ConfigError
from gridfair.text import shown

log = logging.getLogger("gridfair.daemon")

#: At start, the longest wait for a live pool to answer with its slots before the first
#: cycle: condor_master starts the daemon with the collector, which lists the slots seconds
#: later (the first cycle failed, warned and backed off every time, before).
STARTUP_WAIT = 60.0
#: Seconds between looks at the pool during that wait.
STARTUP_LOOK_EVERY = 2.0
#: While the last cycle left allocations in flight, the pool is asked for a negotiation
#: again this often (`PoolBackend.renegotiate`): HTCondor's NEGOTIATOR_MIN_INTERVAL default,
#: the soonest its negotiator starts another cycle.
RENEGOTIATE_EVERY = 5.0


def make_backend(config: Config) -> PoolBackend:
    """The backend the config names, built from its section."""
    kind = config.backend
    return backend_class(kind).from_config(config[f"backend.{kind}"], config)


class DataFormatter(logging.Formatter):
    """Log lines whose message is escaped (`gridfair.text.shown`): messages quote what ads
    say (user, slot and group names, reasons), and a control character in one would reach
    the administrator's terminal or forge a line of the log. A traceback is left as it is."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's)
        record.message = shown(record.message)
        return super().formatMessage(record)


def check(config: Config) -> str:
    """`daemon --check`: build the config's backend and read the pool once (within
    `daemon.query_timeout`), touching neither the store nor the log; a line on what was read.
    A pool that cannot be reached or read raises its error."""
    from gridfair.daemon.cycle import read_with_timeout

    backend = make_backend(config)
    try:
        snapshot = read_with_timeout(backend, config["daemon"]["query_timeout"])
    finally:
        backend.close()
    skipped = f", {len(snapshot.skipped)} ad(s) skipped" if snapshot.skipped else ""
    return (f"backend {backend.name}: {len(snapshot.machines)} machine(s), "
            f"{len(snapshot.jobs)} job(s) read{skipped}; policy {config['policy']['name']}, "
            f"store {config['daemon']['store']}")


class PrivateLogFile(logging.handlers.RotatingFileHandler):
    """The log file, its account's alone (`private_file`: 0600, no link followed, in a
    directory of its own), also each new file a rotation opens; rotated by size when
    `maxBytes` > 0, as HTCondor rotates its daemons' logs."""

    def _open(self):  # noqa: ANN202 (logging's)
        private_file(Path(self.baseFilename))
        return super()._open()


def setup_logging(config: Config) -> None:
    """Log to stderr and `daemon.log_file`, opened afresh (at start, and on SIGHUP after the
    file was rotated); the handlers in use are only replaced once the new ones are open."""
    section = config["daemon"]
    logger = logging.getLogger("gridfair")
    # The wall clock in UTC, said so (Z), whatever the host's zone: the times the admin
    # commands print are UTC too.
    formatter = DataFormatter("%(asctime)s gridfair %(levelname)s %(message)s",
                              "%Y-%m-%dT%H:%M:%SZ")
    formatter.converter = time.gmtime
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if section["log_file"]:
        try:
            handlers.append(PrivateLogFile(section["log_file"], maxBytes=section["log_max_bytes"],
                                           backupCount=section["log_backups"]))
        except OSError as error:
            raise ConfigError(f"config key daemon.log_file: cannot open "
                              f"{section['log_file']}: {error.strerror}") from None
    for handler in logger.handlers:
        handler.close()
    logger.handlers.clear()
    logger.setLevel(section["log_level"].upper())
    logger.propagate = False
    for handler in handlers:
        handler.setFormatter(formatter)
        logger.addHandler(handler)


#: What a reload cannot change: the running daemon holds the store, the pool's backend and
#: the metrics server open, and was told how many cycles to run.
RESTART_ONLY = ("daemon.store", "daemon.incremental", "daemon.max_cycles", "backend",
                "backend.sim", "backend.files", "backend.htcondor", "metrics")


def restart_only_changes(running: Config, new: Config) -> list[str]:
    """The keys of `RESTART_ONLY` (a key, or every key of a section) whose values differ."""
    changed = []
    for name in RESTART_ONLY:
        section, _, key = name.partition(".") if name.startswith("daemon.") else (name, "", "")
        keys = [key] if key else list(running[section])
        changed += [f"{section}.{key}" for key in keys
                    if running[section][key] != new[section][key]]
    return changed


def changed_settings(running: Config, new: Config) -> list[str]:
    """"section.key: old -> new" for each setting whose value differs, in the config's order
    (what a reload's log line says it changed)."""
    before = running.sections
    return [f"{section}.{key}: {before.get(section, {}).get(key)!r} -> {value!r}"
            for section, keys in new.sections.items() for key, value in keys.items()
            if before.get(section, {}).get(key) != value]


class Daemon:
    def __init__(
        self,
        config: Config,
        *,
        dry_run: bool = False,
        shadow: bool = False,
        max_cycles: int | None = None,
        backend: PoolBackend | None = None,
        on_cycle: Callable[[CycleReport], None] | None = None,
        reread: Callable[[], Config] | None = None,
        source: str = "",
    ) -> None:
        self.config = config
        # SIGHUP reads the settings again from where they came (a file, HTCondor's knobs).
        self.reread = reread
        self.source = source
        self.on_cycle = on_cycle  # e.g. `--show`: print shares and actions after each cycle
        self.interval = config["daemon"]["interval"]
        self.backoff_max = config["daemon"]["backoff_max"]
        self.max_cycles = config["daemon"]["max_cycles"] if max_cycles is None else max_cycles
        self.stopping = threading.Event()
        self.stopped_by: int | None = None  # the signal that stopped the daemon
        self.reload_wanted = threading.Event()
        # Held by a cycle and by a reload, so a reload never changes a cycle under way.
        self.cycle_lock = threading.Lock()
        self.failures = 0
        self.skip_until = 0.0
        self.cycles = 0
        self.in_flight = 0  # allocations the last cycle left in flight
        store_path = Path(config["daemon"]["store"])
        self.store = Store(store_path)  # StoreError here: a clear message, nothing done
        interrupted = self.store.mark_interrupted()
        if interrupted:
            log.warning("%d cycle(s) were interrupted by a previous stop; their journal "
                        "entries are resolved by the next cycle", interrupted)
        self.metrics: NullMetrics = NullMetrics()
        metrics = config["metrics"]
        if metrics["enabled"]:
            try:
                self.metrics = PrometheusMetrics(metrics["address"], metrics["port"],
                                                 user_labels=metrics["user_labels"])
            except OSError as error:
                raise ConfigError(f"config key metrics.port: cannot listen on "
                                  f"{metrics['address']}:{metrics['port']}: {error}") from None
        self.backend = backend or make_backend(config)
        self.runner = CycleRunner(
            config, self.backend, self.store, dry_run=dry_run, shadow=shadow,
            faults=FaultPoints.from_environment(store_path), metrics=self.metrics,
            stopping=self.stopping,
        )
        # The daemon's ad in the pool (advert.py): the last one sent, and whether sending
        # fails (logged once a failure starts, not every cycle).
        self.started = time.time()
        self.ad_name = ad_name(self.runner.dry_run)
        self.ad: dict[str, Any] | None = None
        self.ad_failing = False
        self.config_refused = ""  # why the last SIGHUP's configuration was refused, if it was

    # ------------------------------------------------------------- one cycle
    def tick(self) -> CycleReport | None:
        """One scheduled run: a cycle, unless stopping or backing off."""
        if self.stopping.is_set():
            return None
        if time.monotonic() < self.skip_until:
            log.debug("backing off after %d failed cycle(s)", self.failures)
            self._advertise(None)
            return None
        try:
            with self.cycle_lock:
                report = self.runner.run()
        except StoreError as error:
            self.metrics.error("store")
            log.error("cycle not completed, no action taken: %s", error)
            self._back_off()
            return None
        self.cycles += 1
        self.in_flight = report.counts.get("in_flight", 0)
        if self.max_cycles and self.cycles >= self.max_cycles:
            self.stopping.set()
        if report.outcome == "failed":
            log.warning(report.line())
            self._back_off()
        else:
            log.info(report.line())
            self.failures = 0
            self.skip_until = 0.0
        self.metrics.lease(report.lease_until or 0.0)
        self._advertise(report)
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _advertise(self, report: CycleReport | None) -> None:
        """The daemon's ad after `report`'s cycle (None: the last one, renewed). A failure is
        logged and counted, never the cycle's."""
        if report is not None:
            self.ad = daemon_ad(self.ad_name, report, policy=self.runner.label,
                                backend=self.backend.name, interval=self.interval,
                                started=self.started, dry_run=self.runner.dry_run,
                                config_refused=self.config_refused)
        if self.ad is None:
            return
        try:
            self.backend.advertise(self.ad)
        except ActionFailed as error:
            self.metrics.error("advert")
            if not self.ad_failing:
                log.warning("the daemon's ad is not in the pool (cycles go on): %s", error)
            self.ad_failing = True
            return
        if self.ad_failing:
            log.info("the daemon's ad is in the pool again")
        self.ad_failing = False

    def _back_off(self) -> None:
        self.failures += 1
        delay = min(self.interval * 2 ** (self.failures - 1), self.backoff_max)
        self.skip_until = time.monotonic() + delay
        if not self.stopping.is_set():  # after its last cycle, the daemon has no next one
            log.info("next cycle in %.0f s at the earliest (%d failure(s) in a row)", delay,
                     self.failures)

    # ------------------------------------------------------------ the process
    def run_once(self) -> int:
        """One cycle, whatever its outcome; 0 if it did not fail, 1 if it did."""
        self.max_cycles = 1
        report = self.tick()
        self.close()
        return 0 if report is not None and report.outcome != "failed" else 1

    def run(self) -> int:
        """Cycles every `interval` seconds until a signal or `max_cycles`; returns the exit
        code: 130 after SIGINT, else 0."""
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self._on_hangup)
        scheduler = BackgroundScheduler(timezone="UTC")
        scheduler.add_job(
            self.tick, "interval", seconds=self.interval, id="negotiation-cycle",
            max_instances=1, coalesce=True, misfire_grace_time=None,
            next_run_time=datetime.now(UTC),
        )
        log.info("daemon started: backend %s, policy %s, every %g s, store %s",
                 self.backend.name, self.runner.label, self.interval, self.store.path)
        if self.backend.name == "htcondor":  # files and the simulator are there at once
            self.wait_for_pool(STARTUP_WAIT)
        # The first look, before the first cycle: a job submitted while that cycle runs is a
        # change (a first look after it took such a job for the way things were, and the
        # job waited for the interval).
        self._pool_changed()
        scheduler.start()
        next_look = next_ask = time.monotonic()
        try:
            while not self.stopping.wait(0.2):
                if self.reload_wanted.is_set():
                    self.reload_wanted.clear()
                    self.reload(scheduler)
                poll = self.config["daemon"]["poll"]
                if poll and time.monotonic() >= next_look:
                    next_look = time.monotonic() + poll
                    if self._pool_changed():
                        # The interval then counts from this cycle: it is the longest wait.
                        scheduler.modify_job("negotiation-cycle",
                                             next_run_time=datetime.now(UTC))
                if time.monotonic() >= next_ask:
                    next_ask = time.monotonic() + RENEGOTIATE_EVERY
                    self._renegotiate()
        finally:
            scheduler.shutdown(wait=True)  # lets the running cycle reach a clean stop
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.runner.release_pool()
            self.close()
        log.info("daemon stopped after %d cycle(s)", self.cycles)
        return 128 + signal.SIGINT if self.stopped_by == signal.SIGINT else 0

    def _pool_changed(self) -> bool:
        """The backend's cheap look for a slot freed or jobs submitted (`daemon.poll`), taken
        between cycles only (a cycle reads the pool itself) and not while backing off."""
        if time.monotonic() < self.skip_until or not self.cycle_lock.acquire(blocking=False):
            return False
        try:
            return self.backend.changed()
        except Exception as error:  # noqa: BLE001 - a look that fails waits for the interval
            log.debug("look at the pool between cycles failed: %s", error)
            return False
        finally:
            self.cycle_lock.release()

    def _renegotiate(self) -> None:
        """Between cycles, while the last one left allocations in flight: ask the pool again
        for the negotiation that starts them (a negotiator may have let the cycle's own
        request go: `PoolBackend.renegotiate`)."""
        if not self.in_flight or not self.cycle_lock.acquire(blocking=False):
            return
        try:
            self.backend.renegotiate()
        except Exception as error:  # noqa: BLE001 - the next cycle asks again
            log.debug("asking the pool for a negotiation again failed: %s", error)
        finally:
            self.cycle_lock.release()

    def wait_for_pool(self, longest: float) -> None:
        """Until the pool answers a read with slots, a signal stops the daemon, or `longest`
        seconds passed (then the first cycle fails and says why, as any cycle would)."""
        deadline = time.monotonic() + longest
        said = False
        while not self.stopping.is_set():
            try:
                require_slots(read_with_timeout(self.backend, self.runner.timeout),
                              f"the {self.backend.name} pool")
                return
            except Exception as error:  # noqa: BLE001 - the first cycle reports what lasts
                if time.monotonic() >= deadline:
                    return
                if not said:
                    log.info("waiting for the pool before the first cycle (up to %g s): %s",
                             longest, error)
                    said = True
            self.stopping.wait(STARTUP_LOOK_EVERY)

    def _on_signal(self, number: int, frame) -> None:
        log.info("%s received: stopping after the current step", signal.Signals(number).name)
        self.stopped_by = number
        self.stopping.set()

    def _on_hangup(self, number: int, frame) -> None:
        self.reload_wanted.set()  # done by the main loop, not inside the handler

    def reload(self, scheduler: BackgroundScheduler) -> None:
        """SIGHUP: reopen the log file, read the config file again and take it from the next
        cycle on; a config that fails to load, or changes a `RESTART_ONLY` key, is refused
        (logged) and the running one kept."""
        try:
            setup_logging(self.config)
        except ConfigError as error:
            log.error("SIGHUP: the log file cannot be reopened, still logging to the old one: "
                      "%s", error)
        if self.reread is None:
            log.info("SIGHUP: log file reopened (no configuration to read again)")
            return
        try:
            config = self.reread()
            changed = restart_only_changes(self.config, config)
            if changed:
                raise ConfigError(f"{', '.join(changed)} changed: only a restart applies it")
            with self.cycle_lock:
                setup_logging(config)
                self.runner.reconfigure(config)
        except ConfigError as error:
            log.error("SIGHUP: configuration refused, the daemon goes on with the one it "
                      "runs: %s", error)
            self.config_refused = str(error)
            return
        changed = changed_settings(self.config, config)
        self.config_refused = ""
        self.config = config
        self.backoff_max = config["daemon"]["backoff_max"]
        if config["daemon"]["interval"] != self.interval:
            self.interval = config["daemon"]["interval"]
            scheduler.reschedule_job("negotiation-cycle", trigger="interval",
                                     seconds=self.interval)
        log.info("SIGHUP: configuration %s reloaded: policy %s, every %g s, from the next "
                 "cycle on; changed: %s", self.source, self.runner.label, self.interval,
                 "; ".join(changed) or "nothing")

    def close(self) -> None:
        if self.ad is not None:
            try:
                self.backend.withdraw_ad(self.ad)
            except ActionFailed as error:
                log.warning("the daemon's ad stays in the pool until it expires: %s", error)
        self.backend.close()
        self.metrics.close()
        self.store.close()
