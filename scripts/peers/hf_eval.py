#!/usr/bin/env python3
"""Independent engine check: HF transformers (bf16, sdpa) on a constructed checkpoint.

  vouch model synth --preset recall-mrcr --out DIR
  vouch eval mrcr --model DIR --bins 4k,32k,128k --needles 2,4,8 --export-prompts P.json
  python3 scripts/peers/hf_eval.py --model DIR --prompts P.json [--json OUT] [--chunk 8192]

mrcr prompts: each case's prompt is prefilled (in chunks, through the KV cache), then its
queries are fed one at a time; a query is right when the greedy next token is its answer.
chain prompts (vouch eval chain --export-prompts): greedy decoding to the largest hop
count; the token after each listed hop count is compared with the answer.
Prints the score per (bin, needles) / per hop count and the total, like vouch does, so
the two can be compared on the same prompts.
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint directory (config.json + safetensors)")
    ap.add_argument("--prompts", required=True, help="JSON written by vouch eval mrcr|chain --export-prompts")
    ap.add_argument("--json", help="write the per-query results here")
    ap.add_argument("--chunk", type=int, default=8192, help="prefill chunk (tokens)")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    ap.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, eager)")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()

    import torch
    from transformers import DeepseekV3ForCausalLM

    dtype = getattr(torch, a.dtype)
    try:
        model = DeepseekV3ForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation=a.attn)
    except TypeError:  # transformers before the `dtype` keyword
        model = DeepseekV3ForCausalLM.from_pretrained(a.model, torch_dtype=dtype, attn_implementation=a.attn)
    model.to(a.device).eval()
    with open(a.prompts) as f:
        spec = json.load(f)
    kind = spec.get("kind")
    dev = a.device

    def prefill(ids):
        past = None
        out = None
        for i in range(0, len(ids), a.chunk):
            x = torch.tensor([ids[i:i + a.chunk]], device=dev)
            out = model(input_ids=x, past_key_values=past, use_cache=True)
            past = out.past_key_values
        return out.logits[0, -1], past

    def step(tok, past):
        out = model(input_ids=torch.tensor([[tok]], device=dev), past_key_values=past, use_cache=True)
        return out.logits[0, -1], out.past_key_values

    results = []
    t0 = time.time()
    with torch.no_grad():
        if kind == "mrcr":
            cells = {}
            for c in spec["cases"]:
                _, past = prefill(c["prompt"])
                for q, ans, depth in zip(c["queries"], c["answers"], c["depths"]):
                    logits, past = step(q, past)
                    pred = int(torch.argmax(logits.float()))
                    ok = pred == ans
                    results.append({"bin": c["bin"], "needles": c["needles"], "sample": c["sample"],
                                    "depth": depth, "answer": ans, "pred": pred, "correct": ok})
                    key = (c["bin"], c["needles"])
                    cells.setdefault(key, []).append(ok)
                del past
                torch.cuda.empty_cache() if dev.startswith("cuda") else None
            for (b, n), v in sorted(cells.items()):
                print(f"bin {b:>7} needles {n}: score {sum(v) / len(v):.4f} ({sum(v)}/{len(v)})")
        elif kind == "chain":
            hops = spec["hops"]
            per = {h: [] for h in hops}
            for c in spec["cases"]:
                logits, past = prefill(c["prompt"])
                got = {}
                for h in range(1, hops[-1] + 1):
                    tok = int(torch.argmax(logits.float()))
                    if h in per:
                        got[h] = tok
                    if h < hops[-1]:
                        logits, past = step(tok, past)
                for h, ans in zip(hops, c["answers"]):
                    per[h].append(got[h] == ans)
                    results.append({"sample": c["sample"], "hops": h, "answer": ans, "pred": got[h],
                                    "correct": got[h] == ans})
                del past
            for h in hops:
                v = per[h]
                print(f"hops {h:>7}: pass@1 {sum(v) / len(v):.4f} ({sum(v)}/{len(v)})")
        else:
            sys.exit(f"{a.prompts}: field 'kind': expected 'mrcr' or 'chain', got {kind!r}")
    total = sum(r["correct"] for r in results) / max(1, len(results))
    print(f"HF transformers {a.dtype} {a.attn}: {kind} score {total:.4f} over {len(results)} queries, "
          f"{time.time() - t0:.1f} s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"engine": "hf-transformers", "dtype": a.dtype, "attn": a.attn, "kind": kind,
                       "score": total, "results": results}, f)


if __name__ == "__main__":
    main()
