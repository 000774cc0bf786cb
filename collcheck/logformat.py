"""The on-disk vocabulary shared by the writer (inside the training job) and the reader.

Standard library only: this module is imported by the recording hot path.

A log is a plain msgpack stream of maps. Every map has the key ``k`` naming its
kind (one letter, to keep events small). See docs/log-format.md.

Version history:
  1  first format (collcheck 0.1).
"""

MAGIC = "collcheck-log"
FORMAT_VERSION = 1  # major version: readers refuse a larger one

# Record kinds
HEADER = "H"      # first record: magic, version, rank, world, run id, clocks, ...
STRING = "S"      # interned string: i -> s
SITE = "F"        # interned call site: i -> (file id, line, function id)
TSPEC = "V"       # interned tensor spec list: i -> [[dtype id, [dims]], ...]
THREAD = "T"      # thread: h -> name, ident
GROUP = "G"       # process-group lifecycle: init / new / destroy, members, name
COLL = "C"        # one wire collective (or P2P op), written before it is issued
DONE = "D"        # return / completion times of a COLL, or the error it raised
API = "A"         # an API call that issued several wire ops (object collectives, ...)
STACKS = "W"      # watchdog: all threads' Python stacks while a COLL was stuck
EXCEPTION = "X"   # uncaught exception in the process
TRAILER = "Z"     # clean interpreter exit
DISABLED = "Q"    # recording was disabled by an internal error (message)
NON_MEMBER = "N"  # a collective call torch skipped: this rank is not in the group it named

ALL_KINDS = frozenset(
    (HEADER, STRING, SITE, TSPEC, THREAD, GROUP, COLL, DONE, API, STACKS, EXCEPTION, TRAILER, DISABLED, NON_MEMBER)
)

LOG_SUFFIX = ".msgpack"
SIGTERM_SUFFIX = ".sigterm.txt"  # faulthandler's text dump when torchrun terminates the rank
