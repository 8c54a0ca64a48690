#!/usr/bin/env node
// KLD of candidate GGUFs (bf16 / q8_0 / q4_0 exports) against a reference GGUF (the f32 export),
// all run by llama.cpp (node-llama-cpp's prebuilt CPU binaries), teacher-forced on text prompts
// tokenized by the reference's tokenizer, over the full vocabulary at every position:
//   node gguf_kld.mjs --ref f32.gguf --cand bf16.gguf,q8_0.gguf,q4_0.gguf [--text FILE] [--threads N] [--json OUT]
// --text FILE: prompts separated by blank lines (default: a few paragraphs in this file).
// Prints per candidate: positions, mean KLD(ref || cand) in nats, median, p99, max, same-top %.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

const die = (m) => { console.error(`gguf_kld.mjs: ${m}`); process.exit(1); };
const a = {};
for (let i = 2; i < process.argv.length; i += 2) {
  if (!process.argv[i].startsWith("--") || i + 1 >= process.argv.length) die(`bad argument '${process.argv[i]}' (see the header)`);
  a[process.argv[i].slice(2)] = process.argv[i + 1];
}
if (!a.ref || !a.cand) die("give --ref F.gguf --cand A.gguf[,B.gguf..]");
const deps = a.deps || process.env.VOUCH_LLAMACPP_DIR || die("set VOUCH_LLAMACPP_DIR (install.sh's folder)");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(deps, "node_modules/node-llama-cpp/dist/index.js")).href);

const TEXTS = a.text ? fs.readFileSync(a.text, "utf8").split(/\n\s*\n/).map((s) => s.trim()).filter(Boolean) : [
  "The committee met on Tuesday to review the budget for the coming year. After a long discussion about maintenance costs, " +
  "the members agreed to postpone the purchase of new equipment until the spring, when prices are usually lower.",
  "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint([fibonacci(i) for i in range(10)])",
  "量子计算机利用量子比特的叠加和纠缠来处理信息。与经典计算机不同，它们在某些问题上可以显著加快计算速度，例如分解大整数和模拟分子结构。",
  "Q: If a train leaves at 3:15 pm and the trip takes 2 hours and 50 minutes, when does it arrive?\nA: It arrives at 6:05 pm, " +
  "because 3:15 plus 2 hours is 5:15, and 50 more minutes is 6:05.",
];
const threads = parseInt(a.threads ?? "0", 10) || os.availableParallelism();
const llama = await getLlama({ gpu: false, build: "never", skipDownload: true, logLevel: LlamaLogLevel.error });
const files = [a.ref, ...a.cand.split(",")];
const models = [];
for (const f of files) models.push(await llama.loadModel({ modelPath: path.resolve(f), gpuLayers: 0 }));
const ref = models[0];
const bos = ref.fileInfo.metadata.tokenizer?.ggml?.bos_token_id;
const seqs = TEXTS.map((t) => [...(bos != null ? [Number(bos)] : []), ...ref.tokenize(t, false)]);
const maxLen = Math.max(...seqs.map((s) => s.length));
const V = Number(ref.fileInfo.metadata[ref.fileInfo.metadata.general.architecture].vocab_size);

// the log-softmax rows of model m on tokens (row i: the distribution after tokens[0..i])
async function logprobRows(m, tokens) {
  const context = await m.createContext({ contextSize: maxLen + 1, sequences: 1, threads, batchSize: 64 });
  const ctx = context._ctx, S = new llama._bindings.AddonSampler(m._model);
  S.applyConfig({ temperature: 0 });
  const rows = [];
  for (let at = 0; at < tokens.length; at += 64) {
    const chunk = tokens.slice(at, at + 64);
    ctx.initBatch(chunk.length);
    const li = ctx.addToBatch(0, at, Uint32Array.from(chunk), Uint32Array.from(chunk.map((_, k) => k)));
    await ctx.decodeBatch();
    for (const idx of li) {
      const r = await ctx.sampleToken(idx, S, false, false, true, false);
      const pairs = r[3], row = new Float64Array(V);
      let mx = -Infinity;
      for (let q = 0; q < pairs.length; q += 2) { row[pairs[q]] = pairs[q + 1]; if (pairs[q + 1] > mx) mx = pairs[q + 1]; }
      let z = 0;
      for (let v = 0; v < V; v++) z += Math.exp(row[v] - mx);
      const lz = mx + Math.log(z);
      for (let v = 0; v < V; v++) row[v] -= lz;
      rows.push(row);
    }
  }
  S.dispose();
  await context.dispose();
  return rows;
}

const res = files.slice(1).map(() => ({ kld: [], same: 0 }));
for (const tokens of seqs) {
  const r0 = await logprobRows(ref, tokens);
  for (let c = 1; c < models.length; c++) {
    const rc = await logprobRows(models[c], tokens);
    for (let i = 0; i < r0.length; i++) {
      let kl = 0, a0 = 0, ac = 0;
      for (let v = 0; v < V; v++) {
        kl += Math.exp(r0[i][v]) * (r0[i][v] - rc[i][v]);
        if (r0[i][v] > r0[i][a0]) a0 = v;
        if (rc[i][v] > rc[i][ac]) ac = v;
      }
      res[c - 1].kld.push(Math.max(0, kl));
      res[c - 1].same += a0 === ac;
    }
  }
}
const q = (x, p) => { const s = [...x].sort((u, v) => u - v); const k = (p / 100) * (s.length - 1), lo = Math.floor(k); return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (k - lo); };
console.log(`reference ${a.ref}; ${seqs.length} texts, ${seqs.reduce((s, x) => s + x.length, 0)} positions, vocab ${V}, llama.cpp ${threads} threads`);
console.log("candidate".padEnd(28) + "mean KLD".padStart(11) + "median".padStart(11) + "p99".padStart(11) + "max".padStart(11) + "same-top%".padStart(11));
const out = [];
files.slice(1).forEach((f, c) => {
  const k = res[c].kld, mean = k.reduce((s, x) => s + x, 0) / k.length;
  const row = { candidate: f, positions: k.length, mean, median: q(k, 50), p99: q(k, 99), max: Math.max(...k), same_top_pct: (100 * res[c].same) / k.length };
  out.push(row);
  console.log(path.basename(f).padEnd(28) + [row.mean, row.median, row.p99, row.max].map((x) => x.toExponential(2).padStart(11)).join("") + row.same_top_pct.toFixed(1).padStart(11));
});
if (a.json) fs.writeFileSync(a.json, JSON.stringify({ reference: a.ref, texts: seqs.length, rows: out }, null, 1));
process.exit(0);
