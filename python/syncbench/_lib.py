"""_lib.py: finds and loads libsyncbench.so (SYNCBENCH_LIB, the checkout's build tree, or `make install`'s
prefix), declares the C API's prototypes (include/syncbench.h) and turns its error codes into exceptions."""
import ctypes
import glob
import os

SONAME = "libsyncbench.so.0"
_lib = None
_where = None

# codes of include/syncbench.h
OK, ERR_INVAL, ERR_NOMEM, ERR_TIMEOUT, ERR_PEER, ERR_UNSUP, ERR_MISMATCH, ERR_RANGE, ERR_STATE, ERR_AUTH = (
    0, -1, -2, -3, -6, -8, -9, -10, -20, -21)
F32, F16, BF16 = 0, 1, 2
SUM, AVG = 0, 1


class SyncbenchError(RuntimeError):
    """A failed syncbench call: .code is the C API's SB_ERR_* code, the message its detail."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


class SyncbenchTimeout(SyncbenchError, TimeoutError):
    """A collective (or joining the job) ran past its timeout; the message names whom it waited for."""


class PeerError(SyncbenchError):
    """A peer died or went away; the message names it."""


class MismatchError(SyncbenchError, ValueError):
    """The workers disagree (count, dtype or op, with the engine's "check" option)."""


class InvalidError(SyncbenchError, ValueError):
    """A bad argument the library refused (an unknown engine or option, a bad rank)."""


_CLASSES = {ERR_TIMEOUT: SyncbenchTimeout, ERR_PEER: PeerError, ERR_MISMATCH: MismatchError,
            ERR_INVAL: InvalidError, ERR_RANGE: InvalidError}


def _candidates():
    env = os.environ.get("SYNCBENCH_LIB")
    if env:
        yield env
        return
    # the checkout's build tree: python/syncbench/ -> the checkout, or a venv inside it (peers/.venv)
    d = os.path.dirname(os.path.abspath(__file__))
    for _ in range(8):
        d = os.path.dirname(d)
        hits = [os.path.join(d, "build", SONAME)] + sorted(
            glob.glob(os.path.join(d, "build-*", SONAME)), key=lambda p: -os.path.getmtime(p))
        for h in hits:
            if os.path.exists(h) and os.path.exists(os.path.join(d, "include", "syncbench.h")):
                yield h
    yield SONAME  # the dynamic loader's path (LD_LIBRARY_PATH, ldconfig)
    for prefix in (os.environ.get("PREFIX"), "/usr/local", os.path.expanduser("~/.local")):
        if prefix:
            yield os.path.join(prefix, "lib", SONAME)


def load():
    """The loaded library (ctypes.CDLL), loading it on first use; ImportError names where it looked."""
    global _lib, _where
    if _lib is not None:
        return _lib
    tried = []
    for c in _candidates():
        try:
            lib = ctypes.CDLL(c)
        except OSError as e:
            tried.append("%s (%s)" % (c, e))
            continue
        _declare(lib)
        _lib, _where = lib, c
        return lib
    raise ImportError("syncbench: cannot load %s: build it (make) or install it (make install), or set "
                      "SYNCBENCH_LIB to its path; tried: %s" % (SONAME, "; ".join(tried)))


def where():
    """The path the library was loaded from."""
    load()
    return _where


class CommCfg(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("world", ctypes.c_int), ("init_method", ctypes.c_char_p),
                ("timeout_ms", ctypes.c_int), ("transport", ctypes.c_char_p)]


def _declare(lib):
    P, I, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    PP = ctypes.POINTER(ctypes.c_void_p)
    protos = {
        "syncbench_version": (I, []), "syncbench_version_string": (ctypes.c_char_p, []),
        "sb_strerror": (ctypes.c_char_p, [I]), "sb_last_error": (ctypes.c_char_p, []),
        "sb_comm_new": (I, [PP, ctypes.POINTER(CommCfg)]), "sb_comm_free": (None, [PP]),
        "sb_comm_rank": (I, [P]), "sb_comm_world": (I, [P]), "sb_comm_local_rank": (I, [P]),
        "sb_comm_local_world": (I, [P]), "sb_comm_barrier": (I, [P, I]),
        "sb_engine_new": (I, [PP, P, ctypes.c_char_p, I]), "sb_engine_free": (None, [PP]),
        "sb_engine_name": (ctypes.c_char_p, [P]), "sb_engine_rank": (I, [P]), "sb_engine_size": (I, [P]),
        "sb_engine_is_server": (I, [P]), "sb_engine_serve": (I, [P]),
        "sb_allreduce": (I, [P, P, S, I, I, I]), "sb_allreduce_async": (I, [P, P, S, I, I, I, PP]),
        "sb_wait": (I, [P, I]), "sb_test": (I, [P]), "sb_req_free": (None, [PP]),
        "sb_broadcast": (I, [P, P, S, I, I]), "sb_barrier": (I, [P, I]),
    }
    for name, (res, args) in protos.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


def error(code, what=None):
    """The exception for a failed call's code, with this thread's detail from the library."""
    lib = load()
    detail = lib.sb_last_error().decode(errors="replace") or lib.sb_strerror(code).decode()
    msg = "%s: %s" % (what, detail) if what else detail
    return _CLASSES.get(code, SyncbenchError)(code, msg)


def check(code, what=None):
    """Raise the exception of a negative code; return it otherwise."""
    if code < 0:
        raise error(code, what)
    return code


def ms(seconds):
    """Seconds (None: the communicator's default) as the C API's milliseconds (<= 0: default)."""
    if seconds is None:
        return 0
    if seconds <= 0:
        raise ValueError("timeout must be > 0 seconds, got %r" % (seconds,))
    return max(1, int(seconds * 1000))
