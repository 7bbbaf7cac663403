"""Worker protocol v2: JSON lines on the descriptors ksearch passes in KSEARCH_PROTOCOL_FDS. Every
line's shape is in SCHEMA_FILE, generated from ksearch's Rust types; the harness's tests check
the messages it writes against it."""

import json
import os

PROTOCOL_VERSION = 2
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "protocol.schema.json")
FDS_VAR = "KSEARCH_PROTOCOL_FDS"
MARKER_PREFIX = b"\x1eksearch-output-end:"


class Channel:
    """Reads requests and writes messages; candidate output never touches these descriptors."""

    def __init__(self, read_fd, write_fd):
        self._reader = os.fdopen(read_fd, "r", encoding="utf-8")
        self._writer = os.fdopen(write_fd, "w", encoding="utf-8")

    @classmethod
    def from_env(cls):
        value = os.environ.pop(FDS_VAR, None)
        if value is None:
            raise SystemExit(f"ksearch_harness is started by ksearch itself; it expects {FDS_VAR}")
        read_fd, write_fd = (int(x) for x in value.split(","))
        return cls(read_fd, write_fd)

    def send(self, message):
        line = json.dumps({"protocol": PROTOCOL_VERSION, **message}, allow_nan=False, separators=(",", ":"), ensure_ascii=False)
        # Text from a runner (an error's message) may hold lone surrogates, which no strict JSON
        # reader takes, escaped or not: they become U+FFFD.
        line = line.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        self._writer.write(line + "\n")
        self._writer.flush()

    def requests(self):
        """Yield parsed requests; malformed ones are answered with an error and skipped."""
        for line in self._reader:
            if not line.strip():
                continue
            try:
                msg = json.loads(line)
            except json.JSONDecodeError as e:
                self.send({"type": "error", "message": f"malformed request: {e}"})
                continue
            if msg.get("protocol") != PROTOCOL_VERSION:
                self.send({"type": "error", "message": f"request of protocol version {msg.get('protocol')}; this worker speaks {PROTOCOL_VERSION}"})
                continue
            yield msg


def end_of_output(eval_id):
    """Mark the end of an evaluation's output on stdout, after flushing what candidate code wrote."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.write(1, MARKER_PREFIX + str(eval_id).encode() + b"\x1e")
    except OSError:
        pass  # a candidate closed stdout: the supervisor waits briefly and moves on
