"""tf.errors: a failed loom call inside an estimator method raises the TF
error class of its code (InvalidArgumentError for a wrong feature key, a
label out of range ...). Each is also a loom.LoomError, and
InvalidArgumentError is also a ValueError (what TF raises for the same
mistakes found while it builds the graph)."""
from .. import LoomError
from ._surface import missing

OpError = LoomError


# TF's error classes by loom_code (TF's canonical codes)
_NAMES = ["CancelledError", "UnknownError", "InvalidArgumentError", "DeadlineExceededError", "NotFoundError",
          "AlreadyExistsError", "PermissionDeniedError", "ResourceExhaustedError", "FailedPreconditionError",
          "AbortedError", "OutOfRangeError", "UnimplementedError", "InternalError", "UnavailableError",
          "DataLossError", "UnauthenticatedError"]
_BY_CODE = {}
for _code, _name in enumerate(_NAMES, start=1):
    _bases = (LoomError, ValueError) if _name == "InvalidArgumentError" else (LoomError,)
    _BY_CODE[_code] = globals()[_name] = type(_name, _bases, {"__module__": __name__, "_code": _code})
InvalidArgumentError = _BY_CODE[3]
NotFoundError = _BY_CODE[5]
FailedPreconditionError = _BY_CODE[9]
OutOfRangeError = _BY_CODE[11]


def from_loom(e):
    """The tf.errors class instance for a LoomError (same code and message)."""
    cls = _BY_CODE.get(e.code)
    if cls is None or isinstance(e, cls):
        return e
    msg = str(e)
    prefix = e.code_name + ": "
    return cls(e.code, msg[len(prefix):] if msg.startswith(prefix) else msg)


def __getattr__(name):
    raise missing("errors.", name)
