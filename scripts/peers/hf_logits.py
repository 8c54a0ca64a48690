#!/usr/bin/env python3
"""Independent check: load a vouch checkpoint with HF transformers' DeepseekV3ForCausalLM
and dump the logits of every position for the given token ids.

usage: hf_logits.py --model DIR --tokens 1,2,3 --out PREFIX [--dtype float32|bfloat16]
                    [--attn eager|sdpa] [--device cuda|cpu]
writes PREFIX.f32 (float32 little-endian, [n_tokens, vocab]) and PREFIX.json (provenance).
"""
import argparse
import json
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated token ids")
    ap.add_argument("--out", required=True, help="output prefix")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import DeepseekV3ForCausalLM

    dtype = getattr(torch, a.dtype)
    device = a.device if (a.device == "cpu" or torch.cuda.is_available()) else "cpu"
    # HF matmuls on GPU may use TF32; the golden values must be plain fp32.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = DeepseekV3ForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation=a.attn)
    model.to(device).eval()
    ids = [int(t) for t in a.tokens.split(",")]
    with torch.no_grad():
        x = torch.tensor([ids], dtype=torch.long, device=device)
        out = model(input_ids=x, use_cache=False)
        logits = out.logits[0].float().cpu().contiguous()
    with open(a.out + ".f32", "wb") as f:
        f.write(logits.numpy().astype("<f4").tobytes())
    meta = {
        "model": a.model,
        "tokens": ids,
        "shape": list(logits.shape),
        "dtype": a.dtype,
        "attn_implementation": a.attn,
        "device": device,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "top1": logits.argmax(-1).tolist(),
    }
    with open(a.out + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(f"{a.out}: {len(ids)} positions x {logits.shape[1]} logits, transformers {transformers.__version__}")


if __name__ == "__main__":
    sys.exit(main())
