#!/usr/bin/env python3
"""Peer for `vouch sweep`: HF transformers' DeepseekV3ForCausalLM decode throughput on the same
checkpoint and grid, in bf16, as two paths:
  hf-eager     eager attention, DynamicCache, plain PyTorch
  hf-compiled  StaticCache + torch.compile(mode="reduce-overhead") (CUDA graphs), the strong setup
Per grid point: the cache is filled by an untimed prefill of `ctx` seeded random tokens (HF has
no synthetic KV fill), then `warmup` + `steps` single-token decode steps, each timed with CUDA
events. Writes records in the sweep's JSON format (see suites/sweep/sweep_suite.c), merged with
`vouch sweep --peer FILE`. The checkpoint is a directory, e.g. one written by
`vouch model synth --preset small --out DIR`.
The output file is rewritten after every point: points not reached yet are listed as not run, so a
run stopped by a time limit (`timeout`, --time-budget) still leaves valid records of what finished.
--time-budget S: no new point starts after S seconds (the rest are not run, with that reason).
torch.compile recompiles for each new shape: the warm-up steps absorb it (params first_step_ms).

usage: hf_decode.py --model DIR --batch 1,2,4 --context 1k,8k [--steps 20] [--warmup 3]
                    [--paths hf-eager,hf-compiled] [--seed 0] [--prefill-chunk N]
                    [--time-budget S] --out FILE
"""
import argparse
import json
import math
import os
import sys
import time


def sizes(s):
    out = []
    for t in s.split(","):
        t = t.strip().lower()
        mul = 1
        if t.endswith("k"):
            mul, t = 1024, t[:-1]
        elif t.endswith("m"):
            mul, t = 1024 * 1024, t[:-1]
        out.append(int(t) * mul)
    return out


def percentile(x, p):
    s = sorted(x)
    pos = p / 100.0 * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def median(x):
    s = sorted(x)
    n = len(s)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def stable_mean(x, warmup):
    y = x[warmup:]
    med = median(y)
    dev = [abs(v - med) for v in y]
    mad = median(dev)
    kept = [v for v, d in zip(y, dev) if d <= 5 * mad]
    return sum(kept) / len(kept), kept


def cv_pct(x):
    if len(x) < 2:
        return None
    m = sum(x) / len(x)
    sd = math.sqrt(sum((v - m) ** 2 for v in x) / (len(x) - 1))
    return 100.0 * sd / abs(m) if m else None


def metric(name, unit, derive, better, samples, value, warmup=None):
    m = {"name": name, "unit": unit, "value": value, "derive": derive, "better": better, "samples": samples}
    if warmup is not None:
        m["warmup"] = warmup
    return m


def record(path, b, ctx, ms, warmup, model_dir, extra):
    timed = ms[warmup:]
    tps = [b / (t * 1e-3) for t in timed]
    st, kept = stable_mean(ms, warmup)
    params = {"workload": "decode", "tp": 1, "batch": b, "context": ctx, "spec_k": 0, "spec_al": 1,
              "routing": "natural", "model": model_dir, "steps": len(timed), "warmup": warmup,
              "timer": "cuda events", "interleaved": "false", "fill_len": ctx}
    params.update(extra)
    return {
        "suite": "sweep", "case_id": f"decode/tp1/b{b}/ctx{ctx}/spec0-1/natural", "path": path,
        "params": params,
        "metrics": [
            metric("step_ms", "ms", "median", "lower", timed, median(timed)),
            metric("step_ms_p90", "ms", "p90", "lower", timed, percentile(timed, 90)),
            metric("step_ms_p99", "ms", "p99", "lower", timed, percentile(timed, 99)),
            metric("step_ms_stable", "ms", "stable_mean", "lower", ms, st, warmup),
            metric("tokens_per_s", "tok/s", "median", "higher", tps, median(tps)),
            metric("step_ms_cv_pct", "%", "value", "lower", [cv_pct(kept)], cv_pct(kept)),
        ],
        "threshold": None, "checks": [], "status": "pass", "reason": "", "trace_ref": None,
    }


def not_run(path, b, ctx, model_dir, why):
    return {"suite": "sweep", "case_id": f"decode/tp1/b{b}/ctx{ctx}/spec0-1/natural", "path": path,
            "params": {"workload": "decode", "tp": 1, "batch": b, "context": ctx, "spec_k": 0, "spec_al": 1,
                       "routing": "natural", "model": model_dir},
            "metrics": [], "threshold": None, "checks": [], "status": "not_run", "reason": why[:250],
            "trace_ref": None}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", default="1")
    ap.add_argument("--context", default="1k")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--paths", default="hf-eager,hf-compiled")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prefill-chunk", type=int, default=4096, help="tokens per sequence per prefill call")
    ap.add_argument("--time-budget", type=float, default=0, help="seconds after which no new point starts (0: none)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import DeepseekV3ForCausalLM

    if not torch.cuda.is_available():
        print("hf_decode.py: needs a CUDA device", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    t_start = time.time()
    load_s = None
    paths = a.paths.split(",")
    grid = [(ctx, b, path) for ctx in sizes(a.context) for b in sizes(a.batch) for path in paths]
    done = {}

    def save():
        """Writes every point: finished ones as run, the rest as not run (not reached)."""
        recs = [done.get(k) or not_run(k[2], k[1], k[0], a.model, "not reached: hf_decode.py was stopped first")
                for k in grid]
        doc = {"schema": "vouch-sweep/1", "tool": "scripts/peers/hf_decode.py", "model": a.model,
               "options": {"workload": "decode", "routing": "natural", "spec_k": 0, "spec_al": 1,
                           "steps": a.steps, "warmup": a.warmup, "seed": a.seed, "paths": paths},
               "wall_s": time.time() - t_start, "model_load_s": load_s, "records": recs}
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, a.out)

    save()
    try:  # straight onto the GPU (no host copy of the weights); older stacks: load, then move
        model = DeepseekV3ForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, attn_implementation="eager",
                                                      device_map="cuda")
    except (ImportError, ValueError, TypeError):
        model = DeepseekV3ForCausalLM.from_pretrained(a.model, dtype=torch.bfloat16, attn_implementation="eager")
        model.to(dev)
    model.eval()
    load_s = time.time() - t_start
    print(f"hf_decode: model loaded in {load_s:.1f} s", file=sys.stderr)
    vocab = model.config.vocab_size
    gen = torch.Generator(device="cpu").manual_seed(a.seed)

    def fill(b, ctx, cache, static):
        """Untimed prefill of ctx random tokens per sequence into cache."""
        ids = torch.randint(0, vocab, (b, ctx), generator=gen).to(dev)
        for p0 in range(0, ctx, a.prefill_chunk):
            chunk = ids[:, p0:p0 + a.prefill_chunk]
            pos = torch.arange(p0, p0 + chunk.shape[1], device=dev)
            model(input_ids=chunk, past_key_values=cache, use_cache=True, cache_position=pos,
                  position_ids=pos.unsqueeze(0).expand(b, -1))
        return ids[:, -1:]

    def make_static(b, max_len):
        from transformers import StaticCache
        try:
            return StaticCache(config=model.config, max_batch_size=b, max_cache_len=max_len, device=dev,
                               dtype=torch.bfloat16)
        except TypeError:
            return StaticCache(config=model.config, max_cache_len=max_len)

    compiled = None
    for ctx, b, path in grid:
        if a.time_budget > 0 and time.time() - t_start > a.time_budget:
            done[(ctx, b, path)] = not_run(path, b, ctx, a.model, f"time budget of {a.time_budget:g} s spent before this point")
            continue
        n_all = a.warmup + a.steps
        try:
            with torch.no_grad():
                static = path == "hf-compiled"
                if static:
                    cache = make_static(b, ctx + n_all + 1)
                    if compiled is None:
                        compiled = torch.compile(model.forward, mode="reduce-overhead", fullgraph=False)
                    fwd = compiled
                else:
                    from transformers import DynamicCache
                    cache = DynamicCache()
                    fwd = model.forward
                t_fill = time.time()
                tok = fill(b, ctx, cache, static) if ctx > 0 else torch.zeros((b, 1), dtype=torch.long, device=dev)
                torch.cuda.synchronize()
                fill_s = time.time() - t_fill
                ms = []
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                t_first = time.time()
                for i in range(n_all):
                    pos = torch.tensor([ctx + i], device=dev)
                    e0.record()
                    out = fwd(input_ids=tok, past_key_values=cache, use_cache=True, cache_position=pos,
                              position_ids=pos.unsqueeze(0).expand(b, -1))
                    e1.record()
                    torch.cuda.synchronize()
                    ms.append(e0.elapsed_time(e1))
                    if i == 0:
                        first_s = time.time() - t_first
                    tok = out.logits[:, -1:].argmax(-1)
                done[(ctx, b, path)] = record(path, b, ctx, ms, a.warmup, a.model,
                                              {"transformers": transformers.__version__, "torch": torch.__version__,
                                               "cache": "StaticCache" if static else "DynamicCache",
                                               "prefill_s": round(fill_s, 3),
                                               "first_step_ms": round(first_s * 1e3, 3)})
                del cache
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:
            torch.cuda.empty_cache()
            done[(ctx, b, path)] = not_run(path, b, ctx, a.model, f"{type(e).__name__}: {e}".splitlines()[0])
        save()
        print(f"hf_decode: {path} b={b} ctx={ctx} done at {time.time() - t_start:.1f} s", file=sys.stderr)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
