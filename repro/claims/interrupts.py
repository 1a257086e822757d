"""Whether a KeyboardInterrupt is the user's Ctrl-C, or raised by the code under test.

An implementation may not end a check or an audit: ``sys.exit(0)`` or ``raise KeyboardInterrupt``
inside an adapter method (or a model it returned) is recorded as that claim's error, and the
run goes on (:func:`repro.claims.runner.run_claim`). The user's Ctrl-C must still stop it. The two
look alike once raised; so, in the main thread, SIGINT's handler is replaced by one that notes
that a signal came before it raises KeyboardInterrupt as Python's own does.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

_signalled = False


def _on_sigint(signum: int, frame: Any) -> None:
    global _signalled
    _signalled = True
    raise KeyboardInterrupt


def watch() -> None:
    """Note every SIGINT from now on (where Python's default handler is installed, main thread only);
    called before each claim, it forgets a signal noted before."""
    global _signalled
    _signalled = False
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


def from_user(err: BaseException) -> bool:
    """Whether ``err`` ends the run: a KeyboardInterrupt after a SIGINT (or one that could not be told
    apart: another handler than the watch's), never a SystemExit raised by the code under test, nor a
    KeyboardInterrupt while SIGINT is ignored (a process started in the background by a shell that
    has no job control, ``cmd &`` in a script, inherits SIGINT ignored: no Ctrl-C can reach it)."""
    if not isinstance(err, KeyboardInterrupt):
        return False
    handler = signal.getsignal(signal.SIGINT)
    if handler is signal.SIG_IGN:
        return False
    return _signalled or handler is not _on_sigint
