"""tf.errors: a failed loom call inside an estimator method raises the TF
error class of its code (InvalidArgumentError for a wrong feature key, a
label out of range ...). Each is also a loom.LoomError, and
InvalidArgumentError is also a ValueError (what TF raises for the same
mistakes found while it builds the graph)."""
from .. import LoomError
from ._surface import missing

OpError = LoomError


def _cls(name, code, *bases):
    return type(name, (LoomError,) + bases, {"__module__": __name__, "_code": code})


CancelledError = _cls("CancelledError", 1)
UnknownError = _cls("UnknownError", 2)
InvalidArgumentError = _cls("InvalidArgumentError", 3, ValueError)
DeadlineExceededError = _cls("DeadlineExceededError", 4)
NotFoundError = _cls("NotFoundError", 5)
AlreadyExistsError = _cls("AlreadyExistsError", 6)
PermissionDeniedError = _cls("PermissionDeniedError", 7)
ResourceExhaustedError = _cls("ResourceExhaustedError", 8)
FailedPreconditionError = _cls("FailedPreconditionError", 9)
AbortedError = _cls("AbortedError", 10)
OutOfRangeError = _cls("OutOfRangeError", 11)
UnimplementedError = _cls("UnimplementedError", 12)
InternalError = _cls("InternalError", 13)
UnavailableError = _cls("UnavailableError", 14)
DataLossError = _cls("DataLossError", 15)
UnauthenticatedError = _cls("UnauthenticatedError", 16)
_BY_CODE = {c._code: c for c in (CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
                                 NotFoundError, AlreadyExistsError, PermissionDeniedError, ResourceExhaustedError,
                                 FailedPreconditionError, AbortedError, OutOfRangeError, UnimplementedError,
                                 InternalError, UnavailableError, DataLossError, UnauthenticatedError)}


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
