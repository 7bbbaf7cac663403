

# --- Added by `ksearch import flashinfer-bench` -------------------------------------------
# The inputs of one call, for inputs a random draw cannot describe: offsets (`*_indptr`, rising
# from 0 to the axis a constraint ties their last element to, every range non-empty where the
# total allows; of two offsets over the same ranges, each range of the one with the larger total
# is at least as long as the other's, as keys are at least as many as queries in causal
# attention), page or token indices into a cache, lengths that follow from offsets, or (with no
# offsets) that are at most a sequence's pages times their size, and at least a top-k's k. Every other input is drawn as FlashInfer-Bench draws
# random inputs (floats from a standard normal, integers uniform in [-1024, 1024)), scalars
# take the workload's value. The judge calls it with a fresh seed for every call.
_KSEARCH_INPUTS = {plan}


def make_inputs(seed, device, **axes):
    import torch

    dtypes = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64,
              "i32": torch.int32, "i64": torch.int64, "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2,
              "i8": torch.int8, "i16": torch.int16, "bool": torch.bool}
    g = torch.Generator(device=device)
    g.manual_seed(seed & ((1 << 63) - 1))
    made = {}
    ranges = {}  # offsets made so far, by their length: (total, lengths)

    def order(s):
        return (s["kind"] == "lengths", axes[s["total"]] if s["kind"] == "offsets" else 0)

    for spec in sorted(_KSEARCH_INPUTS, key=order):
        shape = [axes[a] for a in spec["shape"]]
        dtype = dtypes[spec["dtype"]]
        kind = spec["kind"]
        if kind == "offsets" and shape[0] in ranges and shape[0] > 1:
            n, total = shape[0], axes[spec["total"]]
            smaller, lengths = ranges[shape[0]]
            extra = torch.randint(0, total - smaller + 1, (max(n - 2, 0),), generator=g, device=device).sort().values
            extra = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), extra, torch.full((1,), total - smaller, device=device)])
            t = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), (lengths + extra[1:] - extra[:-1]).cumsum(0)])
        elif kind == "offsets":
            n, total = shape[0], axes[spec["total"]]
            if total >= n - 1 >= 1:
                # Every range non-empty (an empty one makes a reference's log-sum-exp -inf).
                cuts = (torch.randperm(max(total - 1, 0), generator=g, device=device)[: n - 2] + 1).sort().values
            else:
                cuts = torch.randint(0, total + 1, (max(n - 2, 0),), generator=g, device=device).sort().values
            edges = [torch.zeros(1, dtype=torch.int64, device=device), cuts, torch.full((1,), total, device=device)]
            t = torch.cat(edges)[:n] if n > 1 else torch.zeros(n, dtype=torch.int64, device=device)
            if n > 1 and n not in ranges:
                ranges[n] = (total, (t[1:] - t[:-1]).to(torch.int64))
        elif kind == "indices":
            t = torch.randint(0, max(axes[spec["bound"]], 1), shape, generator=g, device=device)
        elif kind == "up_to":
            most = 1
            for a in spec["most"]:
                most *= axes[a]
            least = min(axes[spec["least"]], most) if spec["least"] else 1
            t = torch.randint(max(least, 1), max(most, 1) + 1, shape, generator=g, device=device)
        elif kind == "page_len":
            t = torch.randint(1, max(axes[spec["bound"]], 1) + 1, shape, generator=g, device=device)
        elif kind == "lengths":
            o = made[spec["of"]].to(torch.int64)
            t = (o[1:] - o[:-1])[: shape[0]]
        elif kind == "const":
            t = torch.full(shape, spec["value"], device=device)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=g, device=device)
        elif dtype.is_floating_point:
            t = torch.randn(shape, generator=g, device=device)
        else:
            t = torch.randint(-1024, 1024, shape, generator=g, device=device)
        made[spec["name"]] = t.to(dtype)
    return [made[s["name"]] for s in _KSEARCH_INPUTS]
