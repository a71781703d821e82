"""Process tuning for a long-running daemon: the garbage collector and glibc's allocator."""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import sys
import threading
from collections.abc import Callable
from typing import TypeVar


def tune_gc(gen0: int = 50_000) -> None:
    """Garbage-collector settings for a streaming daemon (process-wide; the CLI calls it).

    Freezes the objects alive now (the loaded model, modules) into the
    permanent generation, so collections never scan them again, and raises
    the first generation's threshold to ``gen0`` allocations, so a batch's
    short-lived records die before they are promoted and trigger full
    collections. Reference cycles are still collected, only less often
    (docs/benchmarks.md has the effect on the engine benchmark).

    Examples
    --------
    >>> import gc
    >>> saved = gc.get_threshold()
    >>> tune_gc()
    >>> gc.get_threshold()[0] >= 50_000, gc.get_freeze_count() > 0
    (True, True)
    >>> gc.unfreeze(); gc.set_threshold(*saved)  # back to the interpreter's settings
    """
    gc.freeze()
    first, second, third = gc.get_threshold()
    gc.set_threshold(max(first, gen0), second, third)


#: glibc ``mallopt`` parameters (``malloc.h``).
_M_TRIM_THRESHOLD = -1


_M_MMAP_THRESHOLD = -3


def tune_malloc(keep_free: int = 64 << 20, mmap_above: int = 32 << 20) -> bool:
    """C ``malloc`` settings for a streaming daemon (glibc only; process-wide; the CLI calls it).

    Every batch allocates and frees the same numpy temporaries (about 100 KiB
    each for 1,024 events). With glibc's defaults the freed memory at the top
    of the heap goes back to the kernel and the next batch faults it in
    again, page by page: hundreds of page faults per batch. This keeps up to ``keep_free`` bytes of
    freed memory for reuse (``M_TRIM_THRESHOLD``) and serves blocks below
    ``mmap_above`` bytes from the heap (``M_MMAP_THRESHOLD``, at most 32 MiB).
    The cost is resident memory: up to ``keep_free`` more than the live data.

    Returns whether both settings took effect (``False`` off glibc, e.g. on
    macOS or musl, where nothing changes).

    Examples
    --------
    >>> import platform
    >>> tune_malloc() == (platform.libc_ver()[0] == "glibc")
    True
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    trim = mallopt(_M_TRIM_THRESHOLD, keep_free)
    mmap = mallopt(_M_MMAP_THRESHOLD, mmap_above)
    return bool(trim == 1 and mmap == 1)


def stop_watchdog(seconds: float) -> None:
    """Bound a stop: if the process is still running ``seconds`` from now, print every
    thread's stack on stderr and exit with status 1.

    The watchdog is :func:`faulthandler.dump_traceback_later`, a C thread that needs
    no interpreter lock: it also ends a process that hangs after the loop, in a
    client library's destructor or an exit handler. Calling it again restarts the
    countdown. An exit here loses nothing that ``kill -9`` would not: the next
    start restores the last checkpoint.

    Examples
    --------
    >>> import faulthandler
    >>> stop_watchdog(3600.0)
    >>> faulthandler.cancel_dump_traceback_later()
    """
    faulthandler.dump_traceback_later(seconds, exit=True, file=sys.stderr)


#: Blocking calls a bounded wait gave up on, still running on their helper threads.
_ABANDONED: list[str] = []

T = TypeVar("T")


class CallTimeout(Exception):
    """A call :func:`call_within` waited for did not finish in time (it keeps running)."""


def call_within(call: Callable[[], T], seconds: float, what: str) -> T:
    """``call()`` on a helper thread, waited for at most ``seconds``.

    The helper is a daemon thread, so a call that never returns cannot keep the
    process alive; such a call is recorded with :func:`abandon`. The call's own
    exception is re-raised here.

    Raises
    ------
    CallTimeout
        Naming ``what``, if the call did not finish in time.

    Examples
    --------
    >>> call_within(lambda: 6 * 7, 1.0, "a sum")
    42
    >>> import time
    >>> call_within(lambda: time.sleep(5), 0.05, "a nap")
    Traceback (most recent call last):
    ...
    stream_nb.engine.runtime.CallTimeout: a nap did not finish within 0.05 s
    """
    value: list[T] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            value.append(call())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name=f"stream-nb {what}", daemon=True).start()
    if not done.wait(seconds):
        abandon(what)
        raise CallTimeout(f"{what} did not finish within {seconds:g} s")
    if failure:
        raise failure[0]
    return value[0]


def abandon(what: str) -> None:
    """Record that the blocking call ``what`` outlived its bound and was left running on
    its (daemon) helper thread; :func:`abandoned` lists them at exit."""
    _ABANDONED.append(what)


def abandoned() -> tuple[str, ...]:
    """The calls :func:`abandon` recorded, oldest first.

    A process that still has one must not wait for it at exit: the client library
    that owns it may block in its destructor. The ``stream-nb`` command then ends
    with ``os._exit`` once its own state is durable.

    Examples
    --------
    >>> before = len(abandoned())
    >>> abandon("a call that never returns")
    >>> abandoned()[before:]
    ('a call that never returns',)
    """
    return tuple(_ABANDONED)
