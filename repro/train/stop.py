"""Stopping a run between updates on SIGINT or SIGTERM, with its work kept.

A scheduler's SIGTERM or a user's Ctrl-C used to end ``repro train`` wherever it was: the updates since
the last checkpoint were lost. While :class:`StopSignals` is active, the first of these signals asks the
loop (:func:`repro.train.loop.run`) to finish the update in flight, write a checkpoint of it (as at any
checkpoint, atomically) and return; the same command then resumes from it (Section 5's schedule and
the data order go on as if never stopped: ``impl.resume.exact``). A second signal stops at once, as
before. Only a single process installs the handlers (a process group's ranks would have to agree on
the step), and only from the main thread; a SLURM job's preemption goes through submitit's own
requeue (:mod:`repro.cluster.job`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType

#: the signals that ask for a stop
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """``with StopSignals() as stop:`` (or ``install()`` ... ``restore()``) ... ``stop.requested`` turns true at the first SIGINT/SIGTERM;
    ``stop.signal`` names it, ``stop.exit_code`` is the shell's code for it (128 + its number)."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self.say = say or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.received: signal.Signals | None = None
        self._previous: dict[int, object] = {}
        self._pid = os.getpid()

    @property
    def requested(self) -> bool:
        return self.received is not None

    @property
    def signal(self) -> str | None:
        return None if self.received is None else self.received.name

    @property
    def exit_code(self) -> int:
        return 0 if self.received is None else 128 + int(self.received)

    def install(self) -> None:
        """Take SIGINT and SIGTERM (from the main thread only: elsewhere Python cannot)."""
        if threading.current_thread() is threading.main_thread():
            self._pid = os.getpid()
            self._previous = {sig: signal.signal(sig, self._handle) for sig in SIGNALS}

    def __enter__(self) -> StopSignals:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def restore(self) -> None:
        """Give the signals back to the handlers they had before."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._pid:   # a forked batch worker (repro.train.prefetch): its parent decides
            return
        if self.received is not None:   # the second: stop at once, as without this handler
            self.restore()
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.received = signal.Signals(signum)
        self.say(f"repro train: {self.received.name}: stopping after the update in flight, with a checkpoint "
                 "(send it again to stop at once)")
