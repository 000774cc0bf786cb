"""Live mode's keys in the job's store, named once: what the ranks publish and what the checker
sets. Every publisher reads SIGNAL_KEY once a turn (a counter, `add(key, 0)`: one request); the
checker adds 1 to it whenever it sets one of the keys a publisher acts on (abort, the hand-over
of the checking, a request for the logs), so that a publisher reads those only when one was set."""

KEY_PREFIX = "collcheck/live/"  # + rank: a rank's summary (publisher.py)
ABORT_KEY = KEY_PREFIX + "abort"  # set by the checker: its value is the reason
CHECKER_KEY = KEY_PREFIX + "checker"  # the rank that checks next, set by a checker whose rank exits
SIGNAL_KEY = KEY_PREFIX + "signal"  # a counter: one of the keys above or REQUEST_KEY was set
REQUEST_KEY = KEY_PREFIX + "request"  # the number of the checker's request for the logs (share.py)
NO_REQUEST = b"0"  # its value once the checker has what it asked for (never deleted: nobody waits on a get)
REQUESTS_KEY = KEY_PREFIX + "requests"  # the counter those numbers come from (unique across restarts)
LOG_PREFIX = KEY_PREFIX + "log/"  # + "<request>/<rank>": a rank's answer to a request
FINAL_PREFIX = KEY_PREFIX + "final/"  # + "<rank>": the log a rank left in the store when it closed it


def answer_keys(request: int, rank: int) -> tuple[str, str]:
    """(manifest key, prefix of the chunk keys) of a rank's answer to a request."""
    key = f"{LOG_PREFIX}{request}/{rank}"
    return key, key + "/"


def kind_key(request: int, digest: str) -> str:
    """The counter of a request's answers of one kind (share.kind_digest): the rank that finds it
    at 1 sends its whole log, the others only its end."""
    return f"{LOG_PREFIX}{request}/kind/{digest}"


def arrival_keys(request: int, i: int) -> tuple[str, str]:
    """(the counter of a request's answers, the key of the i-th answer's rank): a rank that has
    answered adds 1 to the counter and writes its rank under the number it got, so that the
    checker reads who answered, not one key per rank."""
    return f"{LOG_PREFIX}{request}/n", f"{LOG_PREFIX}{request}/at/{i}"


def final_keys(rank: int, gen: int | None) -> tuple[str, str]:
    """(manifest key, prefix of the chunk keys) of the log a rank left when it closed it; `gen`
    tells one log of the rank from a later one (collcheck.disable() then enable())."""
    key = f"{FINAL_PREFIX}{rank}"
    return key, f"{key}/{gen}/"
