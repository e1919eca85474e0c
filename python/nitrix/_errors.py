"""Exceptions and warnings: a failing nx_status raises the NitrixError subclass of its code,
carrying the library's message; backend fallbacks are NitrixBackendFallback warnings."""


class NitrixError(Exception):
    """A nitrix call failed. status: the C code's name ("NX_ERR_SHAPE"); message: the library's
    message, which names the op, the argument and what was expected."""

    status = "NX_ERR_UNKNOWN"

    def __init__(self, message, status=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class InvalidArgumentError(NitrixError, ValueError):
    status = "NX_ERR_INVALID_ARG"


class OutOfMemoryError(NitrixError, MemoryError):
    status = "NX_ERR_NOMEM"


class ShapeError(NitrixError, ValueError):
    status = "NX_ERR_SHAPE"


class DTypeError(NitrixError, TypeError):
    status = "NX_ERR_DTYPE"


class ParseError(NitrixError, ValueError):
    status = "NX_ERR_PARSE"


class NitrixIOError(NitrixError, OSError):
    status = "NX_ERR_IO"


class UnsupportedError(NitrixError, NotImplementedError):
    status = "NX_ERR_UNSUPPORTED"


class BackendError(NitrixError, RuntimeError):
    status = "NX_ERR_BACKEND"


class InternalError(NitrixError, RuntimeError):
    status = "NX_ERR_INTERNAL"


# by nx_status value
_BY_STATUS = (None, InvalidArgumentError, OutOfMemoryError, ShapeError, DTypeError, ParseError,
              NitrixIOError, UnsupportedError, BackendError, InternalError)


def error_for(status, message):
    """The exception of a failing status with the library's message."""
    cls = _BY_STATUS[status] if 0 < status < len(_BY_STATUS) else NitrixError
    return cls(message or f"nitrix failed with status {status} and no message")


class NitrixWarning(UserWarning):
    """A warning line of the library's log (other than a backend fallback)."""


class NitrixBackendFallback(NitrixWarning):
    """The backend asked for could not run (part of) a call, so another ran it: slower, same
    results within the op's tolerance. NITRIX_SILENCE_FALLBACK=1 silences these;
    NITRIX_STRICT_BACKEND=1 makes them a BackendError."""
