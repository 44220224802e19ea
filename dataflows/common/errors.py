"""Errors the dataflows raise on purpose, so drivers can map them to exit codes.

`BadInput` is the user's fault (exit 2, one line); `Cancelled` means the caller asked to stop;
anything else is ours or the environment's (exit 1).
"""


class GraphRagError(Exception):
    """Base class for errors with a message meant for the user."""


class BadInput(GraphRagError):
    """The request or the input data is invalid; the message says how."""


class Cancelled(GraphRagError):
    """The caller cancelled the request."""


class DeadlineExceeded(Cancelled):
    """The request ran past its deadline."""


class StoreUnavailable(GraphRagError):
    """The database cannot be reached."""


class StoreFull(StoreUnavailable):
    """The database is reachable but has no room (disk or memory): the statement's transaction
    was rolled back, the connection is sound, and the same work succeeds once room is made."""


class NotFound(BadInput):
    """The request names something the namespace does not hold (a community, an entity, an
    evidence id): still the caller's input (exit 2), but a service answers it with 404."""
