"""A SHA-256 whose running state can be saved and taken up again by another process: a resumable
upload is hashed as its bytes arrive, by whichever worker or instance receives each ``PATCH``,
and its file's SHA-256 is then ready at the last byte, not read back and hashed again.

hashlib's objects cannot be saved (only copied within a process), and the libraries that save
them either reach into CPython's private objects or hash far slower than OpenSSL. So this uses
OpenSSL itself, the library hashlib is built on, through its documented ``SHA256_Init`` /
``SHA256_Update`` / ``SHA256_Final`` and its public ``SHA256_CTX``, a plain structure of 112
bytes (its layout fixed since OpenSSL 0.9): the same speed as hashlib (ctypes lets go of the GIL
during each call), and a state that is just those bytes. Where the library or the functions are
missing, or its answer to a known input is wrong, ``available()`` is False and callers fall back
to hashlib and hashing the whole file again.

A saved state is tagged with the machine's byte order and the structure's size: another
machine's is refused (``None`` from ``restore``), so callers hash again rather than trust it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import sys
from typing import Any

_CONTEXT_BYTES = 112  # SHA256_CTX: h[8], Nl, Nh, data[16], num, md_len (32-bit words)
_TAG = f"sha256-ctx/{sys.byteorder}/{_CONTEXT_BYTES}/".encode()


class _Context(ctypes.Structure):
    _fields_ = [("raw", ctypes.c_ubyte * _CONTEXT_BYTES)]


def _libcrypto() -> Any:
    """The libcrypto hashlib loaded (Linux: from the process's mappings), else the system's."""
    import _hashlib  # noqa: F401  (loads it)

    candidates = []
    try:
        with open("/proc/self/maps") as maps:
            candidates += [line.split()[-1] for line in maps if "libcrypto" in line]
    except OSError:
        pass
    found = ctypes.util.find_library("crypto")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            library = ctypes.CDLL(name)
            for function in ("SHA256_Init", "SHA256_Update", "SHA256_Final"):
                getattr(library, function)
        except (OSError, AttributeError):
            continue
        library.SHA256_Init.argtypes = [ctypes.POINTER(_Context)]
        library.SHA256_Update.argtypes = [
            ctypes.POINTER(_Context),
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        library.SHA256_Final.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Context)]
        for entry_point in (library.SHA256_Init, library.SHA256_Update, library.SHA256_Final):
            entry_point.restype = ctypes.c_int
        return library
    return None


class ResumableSha256:
    """``hashlib.sha256()``'s ``update``, ``digest`` and ``hexdigest``, plus ``save``."""

    __slots__ = ("_context",)

    def __init__(self, context: _Context | None = None) -> None:
        if context is None:
            context = _Context()
            _LIBRARY.SHA256_Init(ctypes.byref(context))
        self._context = context

    def update(self, data: Any) -> None:
        context = ctypes.byref(self._context)
        if isinstance(data, bytes):
            _LIBRARY.SHA256_Update(context, data, len(data))
            return
        with memoryview(data) as view:
            if view.readonly:
                self.update(view.tobytes())
                return
            flat = view.cast("B")
            holder = (ctypes.c_char * flat.nbytes).from_buffer(flat)
            _LIBRARY.SHA256_Update(context, holder, flat.nbytes)
            del holder
            flat.release()

    def copy(self) -> ResumableSha256:
        copied = _Context()
        ctypes.pointer(copied)[0] = self._context
        return ResumableSha256(copied)

    def digest(self) -> bytes:
        finished = self.copy()._context
        out = ctypes.create_string_buffer(32)
        _LIBRARY.SHA256_Final(out, ctypes.byref(finished))
        return out.raw

    def hexdigest(self) -> str:
        return self.digest().hex()

    def save(self) -> bytes:
        """The running state, for ``restore`` in any process of a machine like this one."""
        return _TAG + bytes(self._context.raw)

    @classmethod
    def restore(cls, saved: bytes) -> ResumableSha256 | None:
        """A hash taken up from ``save``; None for a state this machine cannot take."""
        if _LIBRARY is None or not saved.startswith(_TAG):
            return None
        raw = saved[len(_TAG) :]
        if len(raw) != _CONTEXT_BYTES:
            return None
        context = _Context()
        ctypes.memmove(ctypes.byref(context), raw, _CONTEXT_BYTES)
        return cls(context)


def _works() -> bool:
    """OpenSSL's answer for a known input, across a save and a restore, is hashlib's."""
    try:
        first = ResumableSha256()
        first.update(b"resumable ")
        second = ResumableSha256.restore(first.save()) if _LIBRARY is not None else None
        if second is None:
            return False
        second.update(bytearray(b"uploads"))
        return second.hexdigest() == hashlib.sha256(b"resumable uploads").hexdigest()
    except (OSError, ValueError, TypeError, AttributeError):
        return False


_LIBRARY = _libcrypto()
_AVAILABLE = _LIBRARY is not None and _works()


def available() -> bool:
    """Whether hashes can be saved here."""
    return _AVAILABLE


def new() -> Any:
    """A running SHA-256: one that can be saved where ``available()``, else hashlib's."""
    return ResumableSha256() if _AVAILABLE else hashlib.sha256()
