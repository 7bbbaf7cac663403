#!/usr/bin/env python3
"""Mamba end to end: mamba-370m built from its published configuration with random f16 weights
(nothing here can download weights), prefill and decode tokens/s, side by side in one run, for
(a) mlx-lm as installed, (b) mlx-lm with kernels exported by ksearch (adapters/mlx_lm_mamba.py),
(c) mamba.py on PyTorch (CUDA, f16; skipped and said so where torch or CUDA is missing).

    python3 bench/mamba_e2e.py (--scan EXPORT_DIR --step EXPORT_DIR | --only-mamba-py) --out OUT.json
        [--lengths 512,1024,2048,4096] [--decode 128] [--prompt 512] [--reps 3] [--max-point-s 60] [--tiny] [--decode-only]

Before timing, (b) is checked against (a): logits of a prompt of the shortest verified length
(the kernels run on verified shapes only) and greedy decoding of 32 tokens. Decode is timed four
ways for (a), (b) and (b) without the adapter's one-kernel convolution step: eager or compiled steps, each token read before the next step is built or
pipelined as mlx-lm's own generation loop is (each checked for the same 32 greedy tokens). mlx-lm is imported
without its package __init__ (which imports the hub client). The columns run in the order (b), (c),
(a), each written to OUT.json as it comes: (a)'s prefill is the slow one. `--tiny` uses a 2-layer model (for a
quick run on MLX's CPU device); its numbers mean nothing."""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
import types

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "adapters"))

import mlx.core as mx  # noqa: E402
import mlx.nn  # noqa: E402
import mlx.utils  # noqa: E402

import mlx_lm_mamba  # noqa: E402

# state-spaces/mamba-370m: d_model 1024, 48 layers, vocabulary 50280, d_state 16, d_conv 4,
# expand 2, dt_rank ceil(1024 / 16) = 64, no bias in the projections, a bias in the convolution.
MAMBA_370M = dict(vocab_size=50280, hidden_size=1024, intermediate_size=2048, state_size=16, num_hidden_layers=48,
                  conv_kernel=4, use_bias=False, use_conv_bias=True, time_step_rank=64)
TINY = dict(MAMBA_370M, num_hidden_layers=2)


def mlx_lm_mamba_module():
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None:
        raise SystemExit("needs mlx-lm (pip install --no-deps mlx-lm)")
    if "mlx_lm" not in sys.modules:
        stub = types.ModuleType("mlx_lm")
        stub.__path__ = list(spec.submodule_search_locations)
        sys.modules["mlx_lm"] = stub
    from mlx_lm.models import mamba

    return mamba


def build_mlx(config, seed):
    mamba = mlx_lm_mamba_module()
    mx.random.seed(seed)
    model = mamba.Model(mamba.ModelArgs(model_type="mamba", **config))
    # dt's bias as Mamba initialises it (softplus⁻¹ of a step in [0.001, 0.1]); the rest random.
    for layer in model.layers:
        dt = mx.exp(mx.random.uniform(-6.9, -2.3, layer.mixer.dt_proj.bias.shape))
        layer.mixer.dt_proj.bias = dt + mx.log(-mx.expm1(-dt))
    model.set_dtype(mx.float16)
    mx.eval(model.parameters())
    return model


def mlx_prefill(model, tokens):
    out = model(tokens, cache=model.make_cache())
    mx.eval(out)
    return out


def mlx_decode(model, prompt, n, step=None, pipelined=False):
    """Greedy decoding of `n` tokens after `prompt`: the tokens and the seconds the n steps took.
    `step(token, cache)` makes a step instead of the model itself (a compiled step). Each token
    is read before the next step is built, unless `pipelined`: then, as mlx-lm's own generation
    loop does (`generate_step`), each step is queued with `mx.async_eval` before the token of
    the step before it is read, so that building a step on the host overlaps the device running
    the last one (mamba.py's loop on PyTorch overlaps them too: it never reads a token)."""
    cache = model.make_cache()
    logits = model(prompt, cache=cache)
    token = mx.argmax(logits[:, -1], axis=-1, keepdims=True)
    mx.eval(token, cache)
    out = []
    pending = None
    t0 = time.perf_counter()
    for _ in range(n):
        logits = step(token, cache) if step else model(token, cache=cache)
        token = mx.argmax(logits[:, -1], axis=-1, keepdims=True)
        if not pipelined:
            mx.eval(token)
            out.append(int(token.item()))
            continue
        mx.async_eval(token)
        if pending is not None:
            out.append(int(pending.item()))
        pending = token
    if pending is not None:
        out.append(int(pending.item()))
    return out, time.perf_counter() - t0


def timed(f, reps, min_s=2.0, max_s=None):
    """Median seconds of one call of f (`samples` below says how many and which)."""
    return statistics.median(samples(f, reps, min_s, max_s))


def samples(f, reps, min_s=2.0, max_s=None):
    """Seconds of each timed call of f: after a warm-up call (which compiles kernels), at least
    `reps` calls and at least `min_s` seconds of them, so that a 30 ms prefill is timed many
    times. With `max_s`, a call begins only while the time spent so far (the warm-up's too) and
    the last call's time together stay within it, and one call always runs: mlx-lm's own prefill
    of 4096 tokens takes about 40 s a call, and four of them leave the rest of the table no time
    in a 10-minute device call."""
    t0 = time.perf_counter()
    f()
    spent = time.perf_counter() - t0
    ts = []
    while not ts or (len(ts) < reps or sum(ts) < min_s) and (max_s is None or spent + ts[-1] <= max_s):
        t0 = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t0)
        spent += ts[-1]
    return ts


def torch_side(config, lengths, prompt_len, decode, reps):
    try:
        import torch
        from mambapy.mamba import Mamba, MambaConfig, RMSNorm
    except ImportError as e:
        return {"skipped": f"mamba.py not run: {e}"}
    try:
        from mambapy.lm import LM
    except ImportError:
        # mambapy.lm imports its Mamba-2 model too, which needs the mamba_ssm package (CUDA
        # extensions not installed here); its Mamba-1 language model is these four modules.
        class LM(torch.nn.Module):
            def __init__(self, cfg, vocab_size):
                super().__init__()
                self.embedding = torch.nn.Embedding(vocab_size, cfg.d_model, padding_idx=0)
                self.mamba = Mamba(cfg)
                self.norm_f = RMSNorm(cfg.d_model, cfg.rms_norm_eps, cfg.mup)
                self.lm_head = torch.nn.Linear(cfg.d_model, vocab_size, bias=False)

            def forward(self, tokens):
                return self.lm_head(self.norm_f(self.mamba(self.embedding(tokens))))

            def step(self, token, caches):
                x, caches = self.mamba.step(self.embedding(token), caches)
                return self.lm_head(self.norm_f(x)), caches
    if not torch.cuda.is_available():
        return {"skipped": "mamba.py not run: no CUDA device for PyTorch"}
    torch.manual_seed(0)
    cfg = MambaConfig(d_model=config["hidden_size"], n_layers=config["num_hidden_layers"], d_state=config["state_size"],
                      d_conv=config["conv_kernel"], dt_rank=config["time_step_rank"])
    model = LM(cfg, vocab_size=config["vocab_size"]).to("cuda", dtype=torch.float16).eval()
    res = {"prefill_tokens_per_s": {}}
    # mamba.py's scan works in f32 (A = -exp(A_log.float())) whatever the weights: autocast
    # brings its f32 activations back to f16 at each projection.
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        for n in lengths:
            tokens = torch.randint(0, config["vocab_size"], (1, n), device="cuda")

            def run():
                model(tokens)
                torch.cuda.synchronize()

            res["prefill_tokens_per_s"][str(n)] = n / timed(run, reps)
        # Decode as mamba.py does it: the prompt step by step into its caches, then greedy steps.
        tokens = torch.randint(0, config["vocab_size"], (1, prompt_len), device="cuda")
        d_inner = cfg.expand_factor * cfg.d_model
        caches = [(None, torch.zeros(1, d_inner, cfg.d_conv - 1, device="cuda", dtype=torch.float16)) for _ in range(cfg.n_layers)]
        for i in range(prompt_len):
            logits, caches = model.step(tokens[:, i], caches)
        token = logits.argmax(-1)
        torch.cuda.synchronize()
        rates = []
        for _ in range(max(reps, 3)):  # the median of at least three, as for MLX's decodes
            t0 = time.perf_counter()
            for _ in range(decode):
                logits, caches = model.step(token, caches)
                token = logits.argmax(-1)
            torch.cuda.synchronize()
            rates.append(decode / (time.perf_counter() - t0))
        res["decode_tokens_per_s"] = statistics.median(rates)
        res["decode_samples"] = rates
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scan")
    ap.add_argument("--step")
    ap.add_argument("--only-mamba-py", action="store_true", help="time mamba.py alone (no exports needed)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--lengths", default="512,1024,2048,4096")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--max-point-s", type=float, default=60.0,
                    help="seconds one prefill length may take, its warm-up included (one timed call always runs)")
    ap.add_argument("--tiny", action="store_true")
    ap.add_argument("--decode-only", action="store_true",
                    help="(a) and (b)'s decodes alone: no prefill, breakdown or mamba.py (to compare MLX settings)")
    args = ap.parse_args()
    lengths = [] if args.decode_only else [int(n) for n in args.lengths.split(",")]
    config = TINY if args.tiny else MAMBA_370M
    if args.only_mamba_py:
        result = {"config": config, "tiny": args.tiny, "mamba_py": torch_side(config, lengths, args.prompt, args.decode, args.reps)}
        print("mamba_py", json.dumps(result["mamba_py"]), flush=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
        return
    if not (args.scan and args.step):
        ap.error("--scan and --step name the exports (or --only-mamba-py)")
    scan = mlx_lm_mamba.load_export(args.scan)
    step = mlx_lm_mamba.load_export(args.step)
    model = build_mlx(config, 0)
    result = {"device": str(mx.default_device()), "mlx": mx.__version__, "config": config, "tiny": args.tiny,
              "scan_export": os.path.abspath(args.scan), "step_export": os.path.abspath(args.step)}

    # The check: (b) against (a) on a prompt of the shortest verified length.
    check_len = min(w["seqlen"] for w in scan.verified)
    prompt = mx.random.randint(0, config["vocab_size"], (1, check_len))
    mlx_lm_mamba.install(model, scan=None, step=None)
    want = mlx_prefill(model, prompt).astype(mx.float32)
    want_tokens, _ = mlx_decode(model, prompt, 32)
    mlx_lm_mamba.install(model, scan=scan, step=step)
    got = mlx_prefill(model, prompt).astype(mx.float32)
    got_tokens, _ = mlx_decode(model, prompt, 32)
    paths = mlx_lm_mamba.stats(model)
    diff = float(mx.abs(got - want).max())
    scale = float(mx.abs(want).max())
    result["check"] = {"prompt_len": check_len, "max_abs_logit_diff": diff, "max_abs_logit": scale,
                       "greedy_32_same": want_tokens == got_tokens, "tokens_mlx_lm": want_tokens, "tokens_kernels": got_tokens,
                       "paths": paths}
    print(json.dumps(result["check"]), flush=True)
    if paths.get("scan kernel", 0) == 0 or paths.get("step kernel", 0) == 0:
        raise SystemExit(f"the kernels did not run (paths {paths}): the export's verified shapes do not cover this model")

    # The columns, each saved as it comes: (b), (b) once more without the adapter's convolution
    # kernel for a decode step (its decode beside (b)'s; a prefill does not use it), (c), and (a)
    # last, whose prefill steps through the tokens one at a time: at the table's lengths it takes
    # most of the run, and a run cut short by its time limit loses only the end of that column.
    def mlx_side(name, s, t, conv):
        mlx_lm_mamba.install(model, scan=s, step=t, conv_step=conv)
        side = {"prefill_tokens_per_s": {}, "prefill_samples_s": {}}
        for n in (lengths if conv else []):
            tokens = mx.random.randint(0, config["vocab_size"], (1, n))
            ts = samples(lambda: mlx_prefill(model, tokens), args.reps, max_s=args.max_point_s)
            side["prefill_tokens_per_s"][str(n)] = n / statistics.median(ts)
            side["prefill_samples_s"][str(n)] = ts
            result[name] = side
            save(args.out, result)
        p = mx.random.randint(0, config["vocab_size"], (1, args.prompt))
        # Each decode: eager or with each step one mx.compile'd function (the adapter's
        # compile_decode); reading each token before the next step, or pipelined as mlx-lm's
        # generation loop is. Each is checked first against the eager tokens read step by step.
        step_fn = mlx_lm_mamba.compile_decode(model)
        eager_tokens, _ = mlx_decode(model, prompt, 32)
        for key, f, pipelined in (("decode_tokens_per_s", None, False),
                                  ("decode_pipelined_tokens_per_s", None, True),
                                  ("decode_compiled_tokens_per_s", step_fn, False),
                                  ("decode_compiled_pipelined_tokens_per_s", step_fn, True)):
            tokens, _ = mlx_decode(model, prompt, 32, f, pipelined)
            side[key.replace("tokens_per_s", "greedy_32_same")] = tokens == eager_tokens
            mlx_decode(model, p, 4, f, pipelined)
            # A decode's rate varied by up to 1.8× between runs of one H100 session: the median
            # of at least three, each kept.
            rates = [args.decode / mlx_decode(model, p, args.decode, f, pipelined)[1] for _ in range(max(args.reps, 3))]
            side[key] = statistics.median(rates)
            side[key.replace("tokens_per_s", "samples")] = rates
        side["paths"] = mlx_lm_mamba.stats(model)
        result[name] = side
        print(name, json.dumps(side), flush=True)
        save(args.out, result)

    result["mlx_env"] = {k: v for k, v in os.environ.items() if k.startswith("MLX_")}
    result["order"] = ["mlx_lm_kernels", "mlx_lm_kernels_without_conv_step"] + ([] if args.decode_only else ["mamba_py"]) + ["mlx_lm"]
    mlx_side("mlx_lm_kernels", scan, step, True)
    mlx_side("mlx_lm_kernels_without_conv_step", scan, step, False)
    if not args.decode_only:
        result["mamba_py"] = torch_side(config, lengths, args.prompt, args.decode, args.reps)
        print("mamba_py", json.dumps(result["mamba_py"]), flush=True)
        save(args.out, result)
    mlx_side("mlx_lm", None, None, True)
    if args.decode_only:
        return
    sections = [("decode_breakdown", lambda: decode_breakdown(model, step, config, args.prompt))]
    if lengths:
        sections.append(("prefill_breakdown", lambda: prefill_breakdown(model, scan, config, max(lengths), args.reps)))
    for key, section in sections:
        try:
            result[key] = section()
        except Exception as e:  # noqa: BLE001 - recorded, and the run goes on
            result[key] = {"error": f"{type(e).__name__}: {e}"}
        mx.clear_cache()
        print(key, json.dumps(result[key]), flush=True)
        save(args.out, result)


def save(path, result):
    """Writes what has been measured so far (again after each section)."""
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


def decode_breakdown(model, step, config, prompt_len):
    """Where a decode step's time goes, ms per token (with the kernels installed): the whole step
    as mlx-lm runs it, the same compiled, the exported state update alone as often as a step calls
    it (once per layer, on the step's shapes), the step without its 48 Mamba blocks (embedding,
    final norm and the vocabulary projection), and the weights' bytes, which a step must read."""
    mlx_lm_mamba.install(model, scan=None, step=step)
    p = mx.random.randint(0, config["vocab_size"], (1, prompt_len))
    n = 64
    out = {}
    mlx_decode(model, p, 4)
    out["step_ms"] = mlx_decode(model, p, n)[1] / n * 1e3
    fn = mlx_lm_mamba.compile_decode(model)
    mlx_decode(model, p, 4, fn)
    out["compiled_step_ms"] = mlx_decode(model, p, n, fn)[1] / n * 1e3
    d, s = config["intermediate_size"], config["state_size"]
    args = [mx.random.normal((1, d, s)), *[mx.random.normal((1, d)).astype(mx.float16) for _ in range(2)],
            -mx.exp(mx.random.normal((d, s))), *[mx.random.normal((1, s)).astype(mx.float16) for _ in range(2)],
            mx.ones((d,)), mx.random.normal((1, d)).astype(mx.float16)]
    layers = config["num_hidden_layers"]

    def kernels_alone():
        outs = [step.fn(*args) for _ in range(layers)]
        mx.eval(outs)
    out["state_update_kernels_ms"] = timed(kernels_alone, 20, 0.5) * 1e3
    backbone = model.backbone
    token = mx.array([[1]])

    def no_blocks():
        x = backbone.norm_f(backbone.embeddings(token))
        mx.eval(backbone.embeddings.as_linear(x) if model.args.tie_word_embeddings else model.lm_head(x))
    out["without_blocks_ms"] = timed(no_blocks, 20, 0.5) * 1e3
    leaves = [v for _, v in mlx.utils.tree_flatten(model.parameters())]
    out["weight_bytes"] = sum(v.nbytes for v in leaves)
    return out


def prefill_breakdown(model, scan, config, n, reps):
    """Where a prefill of `n` tokens goes, ms (with the kernels installed):
    - prefill_ms: the whole prefill;
    - without_scans_ms: the prefill with every scan replaced by a stand-in that reads all its
      inputs (a sum of each, so that MLX computes them: a stand-in that ignored them would leave
      the convolution and the x and dt projections unevaluated) and returns z and a zero state;
    - scans_on_model_inputs_ms: the exported scan on the very arrays the prefill with the
      stand-in passes its 48 calls (recorded, evaluated), one call each;
    - scans_on_real_inputs_ms: the same on the arrays the whole prefill passes them (after the
      first layer these differ: each layer's input then comes from real scans, not stand-ins);
    - scans_one_at_a_time_ms: those 48 calls again, each evaluated before the next is made, as
      the model's layers wait on each other (independent calls may overlap on the GPU);
    - scans_on_random_inputs_ms: the same number of calls on one set of random inputs;
    - in_, x_, dt_ and out_projections_ms, convolutions_ms: each other part of the blocks alone
      (the dt projection with its softplus, the convolution with its SiLU), once per layer."""
    layers = config["num_hidden_layers"]
    d, s = config["intermediate_size"], config["state_size"]
    tokens = mx.random.randint(0, config["vocab_size"], (1, n))
    out = {"length": n}
    mlx_lm_mamba.install(model, scan=scan, step=None)
    out["prefill_ms"] = timed(lambda: mlx_prefill(model, tokens), reps, 1.0) * 1e3

    def together(calls):
        """The scan on each set of arguments in `calls`, evaluated at once."""
        mx.eval([scan.fn(*args) for args in calls])

    real = []

    def records(*args):
        real.append(args)
        return scan.fn(*args)
    mlx_lm_mamba.install(model, scan=mlx_lm_mamba.Export(records, scan.verified, scan.folder), step=None)
    mlx_prefill(model, tokens)
    real_inputs = real[-layers:]
    mx.eval(real_inputs)
    out["scans_on_real_inputs_ms"] = timed(lambda: together(real_inputs), reps, 1.0) * 1e3

    def one_at_a_time():
        for args in real_inputs:
            mx.eval(scan.fn(*args))
    # The 48 calls above share no data, so in one CUDA graph they may run side by side; in the
    # model each waits for the layer before it. Here each is evaluated before the next starts
    # (each evaluation adds one synchronisation).
    out["scans_one_at_a_time_ms"] = timed(one_at_a_time, reps, 1.0) * 1e3
    out["real_inputs_nonfinite"] = sum(int(mx.sum(~mx.isfinite(a.astype(mx.float32))).item()) for args in real_inputs for a in args)
    # The recorded arguments let go (the closures above keep the lists, not their contents).
    real.clear()
    real_inputs.clear()

    recorded = []

    def reads_all(u, dt, A, B, C, D, z):
        # One prefill's calls only: timing runs the prefill many times, and keeping every call's
        # arrays alive ran an 80 GB GPU out of memory once the prefill got fast.
        if len(recorded) < layers:
            recorded.append((u, dt, A, B, C, D, z))
        used = sum(v.astype(mx.float32).sum() for v in (u, dt, A, B, C, D))
        return z + (used * 0).astype(z.dtype), mx.zeros((u.shape[0], u.shape[2], A.shape[1]), mx.float32)
    mlx_lm_mamba.install(model, scan=mlx_lm_mamba.Export(reads_all, scan.verified, scan.folder), step=None)
    out["without_scans_ms"] = timed(lambda: mlx_prefill(model, tokens), reps, 1.0) * 1e3
    mlx_lm_mamba.install(model, scan=scan, step=None)
    if len(recorded) < layers:
        raise SystemExit(f"the prefill called the scan {len(recorded)} times, not once per layer ({layers})")
    model_inputs = recorded[-layers:]
    recorded.clear()
    mx.eval(model_inputs)

    out["scans_on_model_inputs_ms"] = timed(lambda: together(model_inputs), reps, 1.0) * 1e3
    f16 = mx.float16
    u, dt, z = (mx.random.normal((1, n, d)).astype(f16) for _ in range(3))
    B, C = (mx.random.normal((1, n, s)).astype(f16) for _ in range(2))
    A, D = -mx.exp(mx.random.normal((d, s))), mx.ones((d,))
    dt = mx.abs(dt) * 0.01
    mx.eval(u, dt, z, B, C, A, D)

    out["scans_on_random_inputs_ms"] = timed(lambda: together([(u, dt, A, B, C, D, z)] * layers), reps, 1.0) * 1e3
    # Each other part of a block alone, 48 times on the prefill's shapes, as the adapter calls it.
    mixers = [layer.mixer for layer in model.layers]
    rank = config["time_step_rank"]
    hidden = mx.random.normal((1, n, config["hidden_size"])).astype(f16)
    padded = mx.random.normal((1, n + config["conv_kernel"] - 1, d)).astype(f16)
    projected = mixers[0].x_proj(u)
    mx.eval(hidden, padded, projected)
    parts = {
        "in_projections_ms": lambda m: m.in_proj(hidden),
        "convolutions_ms": lambda m: mlx.nn.silu(m.conv1d(padded)),
        "x_projections_ms": lambda m: m.x_proj(u),
        "dt_projections_ms": lambda m: mlx.nn.softplus(m.dt_proj(projected[..., :rank])),
        "out_projections_ms": lambda m: m.out_proj(z),
    }
    for key, part in parts.items():
        out[key] = timed(lambda: mx.eval([part(m) for m in mixers]), reps, 1.0) * 1e3
    return out


if __name__ == "__main__":
    main()
