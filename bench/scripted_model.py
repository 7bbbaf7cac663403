#!/usr/bin/env python3
"""A scripted stand-in for a model behind an OpenAI-compatible endpoint, for exercising an
LLM-driven run where no model is reachable. It answers every prompt kind validly: a world
model with three actions, the given source file for every code request, and tree edits. Every
evaluation in such a run is real; only the "model" is a script.

    python3 bench/scripted_model.py --code FILE --port 8765

`answerer` and `serve` are also what bench/llm_overhead.py runs in-process.
"""
import argparse
import http.server
import json
import threading


def action(title):
    return {"title": title, "description": title, "difficulty": 2, "score": 0.5, "expected_speedup": 1.2,
            "rationale": "scripted", "rating": 5, "confidence": 0.5}


def answerer(code):
    """Answers one prompt text; a code request gets `code(n)`, n counting the calls so far."""
    counter = [0]

    def answer(prompt):
        counter[0] += 1
        if "Build the initial world model" in prompt:
            body = {"classification": "c", "canonical_form": "f", "data_layout": "l",
                    "bottlenecks": [{"regime": r, "hypothesis": "h"} for r in "abc"], "knobs": ["k"],
                    "skeleton": "s", "kernel_families": ["a", "b"], "actions": [action(f"scripted action {i}") for i in range(3)]}
            return "```json\n" + json.dumps(body) + "\n```"
        if "Reflect, then revise the tree" in prompt:
            node = int(prompt.split("## Evidence from the cycle on node ")[1].split()[0])
            body = {"reflection": {"code_summary": "c", "followed_action": True, "belief_changes": "b", "prediction_gap": "g"},
                    "edits": [{"op": "insert", "parent": node, "node": action(f"next {counter[0]}")}]}
            return "```json\n" + json.dumps(body) + "\n```"
        if "Decide what to do with this action" in prompt:
            return '```json\n{"decision": "delete"}\n```'
        if "propose up to 3 new actions" in prompt.lower():
            return '```json\n{"edits": []}\n```'
        return code(counter[0])

    return answer


def serve(answer, port=0):
    """An OpenAI chat-completions server on loopback, answering in a background thread."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompt = next(m["content"] for m in req["messages"] if m["role"] == "user")
            body = json.dumps({"id": "x", "object": "chat.completion", "model": req["model"],
                               "choices": [{"index": 0, "message": {"role": "assistant", "content": answer(prompt)}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 1000, "completion_tokens": 300, "total_tokens": 1300}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", required=True)
    ap.add_argument("--port", type=int, default=8765)
    args = ap.parse_args()
    code = open(args.code).read()
    serve(answerer(lambda _: "```python\n" + code + "\n```"), args.port)
    threading.Event().wait()  # the server thread answers until the process is killed


if __name__ == "__main__":
    main()
