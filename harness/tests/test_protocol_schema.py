"""The worker protocol's lines against its JSON Schema (ksearch_harness/protocol.schema.json,
generated from the Rust types): the samples the Rust side serialised (protocol_samples.json,
written by the same Rust test), and every message the harness's worker writes while it carries
out those requests."""

import copy
import json
import os
import subprocess
import sys
import tempfile
import unittest

HARNESS = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, HARNESS)

from ksearch_harness import protocol  # noqa: E402

with open(protocol.SCHEMA_FILE) as f:
    SCHEMA = json.load(f)
with open(os.path.join(os.path.dirname(__file__), "protocol_samples.json")) as f:
    SAMPLES = json.load(f)

# What the validator below understands: the part of JSON Schema that schemars writes. A keyword
# outside it fails the tests, rather than being skipped.
ANNOTATIONS = {"$schema", "title", "description", "default", "format", "$defs"}
TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    # serde reads 3.0 as no integer: neither is it one here.
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


def same(a, b):
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def errors(schema, value, path="$"):
    """What is wrong with `value` under `schema` (a part of SCHEMA), each naming where."""
    known = ANNOTATIONS | {"$ref", "type", "const", "enum", "minimum", "properties", "required", "additionalProperties",
                           "items", "minItems", "maxItems", "oneOf", "anyOf"}
    if set(schema) - known:
        raise ValueError(f"the schema uses {sorted(set(schema) - known)}, which this validator does not check")
    out = []
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        out += errors(SCHEMA["$defs"][name], value, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(TYPES[t](value) for t in types):
            return out + [f"{path}: expected {' or '.join(types)}, got {json.dumps(value)[:80]}"]
    if "const" in schema and not same(value, schema["const"]):
        out.append(f"{path}: expected {json.dumps(schema['const'])}, got {json.dumps(value)[:80]}")
    if "enum" in schema and not any(same(value, e) for e in schema["enum"]):
        out.append(f"{path}: {json.dumps(value)[:80]} is not one of {schema['enum']}")
    if "minimum" in schema and TYPES["number"](value) and value < schema["minimum"]:
        out.append(f"{path}: {value} is less than {schema['minimum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        out += [f"{path}: `{k}` is missing" for k in schema.get("required", []) if k not in value]
        for k, v in value.items():
            if k in props:
                out += errors(props[k], v, f"{path}.{k}")
            elif schema.get("additionalProperties") is False:
                out.append(f"{path}: `{k}` is not a field here")
            elif isinstance(schema.get("additionalProperties"), dict):
                out += errors(schema["additionalProperties"], v, f"{path}.{k}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
            out.append(f"{path}: {len(value)} items, not between {schema.get('minItems', 0)} and {schema.get('maxItems')}")
        if "items" in schema:
            for i, v in enumerate(value):
                out += errors(schema["items"], v, f"{path}[{i}]")
    for key in ("oneOf", "anyOf"):
        if key in schema:
            each = [errors(s, value, path) for s in schema[key]]
            matched = sum(not e for e in each)
            if matched == 0:
                closest = min(each, key=len)
                out.append(f"{path}: matches none of the {len(each)} alternatives (the closest: {'; '.join(closest)})")
            elif key == "oneOf" and matched > 1:
                out.append(f"{path}: matches {matched} alternatives, where exactly one must match")
    return out


def check(case, line, kind):
    """`line` is a valid `RequestLine` or `WorkerMessageLine` (`kind`)."""
    case.assertEqual(errors({"$ref": f"#/$defs/{kind}"}, line), [], json.dumps(line)[:2000])


def worker_messages(requests):
    """Every message the worker (`python3 -m ksearch_harness --backend mlx --target numpy`)
    writes while it serves `requests`, one JSON line each, as ksearch starts it."""
    rin, win = os.pipe()
    rout, wout = os.pipe()
    env = dict(os.environ, KSEARCH_PROTOCOL_FDS=f"{rin},{wout}",
               PYTHONPATH=os.pathsep.join([HARNESS] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    with tempfile.TemporaryDirectory() as cwd, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([sys.executable, "-m", "ksearch_harness", "--backend", "mlx", "--target", "numpy"], cwd=cwd,
                             env=env, pass_fds=(rin, wout), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        os.close(rin)
        os.close(wout)
        with os.fdopen(win, "w") as w:
            w.write("".join(json.dumps(r) + "\n" for r in requests))
        with os.fdopen(rout) as r:
            lines = r.read().splitlines()
        code = p.wait(timeout=60)
        err.seek(0)
        if code != 0:
            raise AssertionError(f"the worker exited with {code}: {err.read().decode()[-3000:]}")
    return [json.loads(line) for line in lines]


class RustSamples(unittest.TestCase):
    def test_every_sample_the_rust_side_wrote_is_valid(self):
        for line in SAMPLES["requests"]:
            check(self, line, "RequestLine")
        for line in SAMPLES["messages"]:
            check(self, line, "WorkerMessageLine")
        self.assertEqual({m["type"] for m in SAMPLES["messages"]}, {"hello", "progress", "result", "error"})


class WorkerMessages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        evaluate = next(r for r in SAMPLES["requests"] if r["type"] == "evaluate" and r["task"]["backend"] == "mlx")
        wrong = copy.deepcopy(evaluate)
        wrong.update(id=2, timing=None)
        wrong["candidate"]["text"] = "import numpy as np\n\ndef run(a, b, *, m, n, k):\n    return np.zeros((m, n), np.float32)\n"
        broken = copy.deepcopy(evaluate)
        broken.update(id=3, timing=None)
        broken["reference"]["text"] = "raise RuntimeError('broken')\n"
        shutdown = next(r for r in SAMPLES["requests"] if r["type"] == "shutdown")
        cls.sent = [evaluate, wrong, broken, {"protocol": 2, "type": "bogus"}, shutdown]
        cls.got = worker_messages(cls.sent)

    def test_every_message_the_worker_writes_is_valid(self):
        for line in self.got:
            check(self, line, "WorkerMessageLine")
        self.assertEqual({m["type"] for m in self.got}, {"hello", "progress", "result", "error"})

    def test_the_requests_were_carried_out(self):
        results = {m["id"]: m for m in self.got if m["type"] == "result"}
        self.assertEqual(results[1]["status"], "passed", results[1]["message"])
        self.assertEqual([t["role"] for t in results[1]["workloads"][0]["timings"]], ["candidate", "baseline"])
        self.assertEqual([d["role"] for d in results[1]["described"]], ["baseline"])
        self.assertEqual(results[2]["status"], "incorrect")
        errors = [m for m in self.got if m["type"] == "error"]
        self.assertEqual([e.get("id") for e in errors], [3, None])
        # A reference that does not load is the task's fault, which the orchestrator reports
        # as the user's input (exit code 3), not as a broken worker.
        self.assertIs(errors[0].get("task_fault"), True, errors[0])
        self.assertIn("unknown request type", errors[1]["message"])

    def test_the_validator_refuses_what_the_rust_side_would(self):
        result = next(m for m in self.got if m["type"] == "result" and m["id"] == 1)

        def refused(change, part):
            line = copy.deepcopy(result)
            change(line)
            found = errors({"$ref": "#/$defs/WorkerMessageLine"}, line)
            self.assertTrue(any(part in e for e in found), found)

        refused(lambda m: m.pop("status"), "`status` is missing")
        refused(lambda m: m["phases"].update(check_s="0.1"), "$.phases.check_s: expected number")
        refused(lambda m: m["workloads"][0]["timings"][0]["stats"].update(runs=3.0), "stats.runs: expected integer")
        refused(lambda m: m["workloads"][0].update(status="fine"), "is not one of")
        refused(lambda m: m.update(type="verdict"), "matches none of the 4 alternatives")
        refused(lambda m: m.update(protocol=1), "$.protocol: expected 2")
        request = copy.deepcopy(self.sent[0])
        request["task"]["inputs"][0]["dtype"] = "f33"
        self.assertTrue(errors({"$ref": "#/$defs/RequestLine"}, request))


if __name__ == "__main__":
    unittest.main()
