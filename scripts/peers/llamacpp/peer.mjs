#!/usr/bin/env node
// llama.cpp as a peer engine for vouch, through node-llama-cpp's prebuilt CPU binaries
// (installed by scripts/peers/llamacpp/install.sh; nothing is downloaded or built here).
//
//   node peer.mjs check  --gguf F.gguf --model DIR
//       reads the GGUF back with @huggingface/gguf and checks every metadata key llama.cpp's
//       deepseek2 reads, every tensor's name and shape, and every tensor's bytes against the
//       checkpoint's safetensors (the k_b / v_b split, the stacked experts, the RoPE row order)
//   node peer.mjs logits --gguf F.gguf --out PREFIX (--tokens 1,2,3 | --random N [--seed S] [--vocab V])
//       teacher-forced logits of every position: PREFIX.f32 (float32 [n, vocab]) and PREFIX.json
//       (tokens, shape, engine), for `vouch model peer-diverge --peer PREFIX`
//   node peer.mjs eval   --gguf F.gguf --prompts P.json --json OUT [--min-score 0.99]
//       the constructed evals (vouch eval mrcr|chain --export-prompts P.json) scored on
//       llama.cpp's greedy tokens; records in vouch's format (suite "evals")
//   node peer.mjs decode --gguf F.gguf --context 0,256 --out FILE [--steps 16] [--warmup 3]
//       single-token decode step times after an untimed prefill of `context` seeded tokens;
//       records in the sweep's format, merged with `vouch sweep --peer FILE`
// Common: --deps DIR (the install folder; default $VOUCH_LLAMACPP_DIR), --threads N (0: the cores),
// --gpu cuda (every layer on the GPU; needs install.sh --cuda), --path NAME (the records' path
// name, default llama.cpp-cpu, or llama.cpp-cuda with --gpu cuda).
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";

function die(msg) {
  console.error(`peer.mjs: ${msg}`);
  process.exit(1);
}

function parseArgs(argv) {
  const a = { _: [] };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (!k.startsWith("--")) { a._.push(k); continue; }
    if (i + 1 >= argv.length) die(`option ${k} needs a value`);
    a[k.slice(2)] = argv[++i];
  }
  return a;
}

const args = parseArgs(process.argv.slice(2));
const cmd = args._[0];
const deps = args.deps || process.env.VOUCH_LLAMACPP_DIR;
if (!cmd || !["check", "logits", "eval", "decode"].includes(cmd))
  die("usage: peer.mjs check|logits|eval|decode --gguf FILE ... (see the header of peer.mjs)");
if (!deps) die("give --deps DIR or set VOUCH_LLAMACPP_DIR (the folder install.sh installed into)");
const dep = (p) => pathToFileURL(path.join(deps, "node_modules", p)).href;
const need = (k) => args[k] ?? die(`option --${k} is required for ${cmd}`);
const sizes = (s) => s.split(",").map((t) => {
  t = t.trim().toLowerCase();
  const m = t.endsWith("k") ? 1024 : 1;
  const v = parseInt(m > 1 ? t.slice(0, -1) : t, 10);
  if (!Number.isFinite(v) || v < 0) die(`bad size '${t}'`);
  return v * m;
});

// ---- records in vouch's JSON format (suites/engine/record.c) ----
function metric(name, unit, derive, better, samples, value, warmup) {
  const m = { name, unit, value, derive, better, samples };
  if (warmup !== undefined) m.warmup = warmup;
  return m;
}
function median(x) {
  const s = [...x].sort((a, b) => a - b), n = s.length;
  return n % 2 ? s[(n - 1) / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}
function percentile(x, p) {
  const s = [...x].sort((a, b) => a - b), pos = (p / 100) * (s.length - 1), lo = Math.floor(pos);
  const hi = Math.min(lo + 1, s.length - 1);
  return s[lo] + (s[hi] - s[lo]) * (pos - lo);
}
function cv(x) {
  if (x.length < 2) return null;
  const m = x.reduce((a, b) => a + b, 0) / x.length;
  return (100 * Math.sqrt(x.reduce((a, v) => a + (v - m) ** 2, 0) / (x.length - 1))) / Math.abs(m);
}
function writeJson(file, doc) {
  fs.writeFileSync(file + ".tmp", JSON.stringify(doc, null, 1));
  fs.renameSync(file + ".tmp", file);
}

// ---- a seeded stream of token ids (mulberry32) ----
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// ---- llama.cpp through node-llama-cpp ----
async function openModel(contextSize) {
  const { getLlama, LlamaLogLevel } = await import(dep("node-llama-cpp/dist/index.js"));
  // build "never" + skipDownload: only the prebuilt binaries of @node-llama-cpp/linux-x64 are used
  const gpu = args.gpu === "cuda" ? "cuda" : args.gpu === undefined ? false : die("--gpu: only 'cuda' is known");
  const llama = await getLlama({ gpu, build: "never", skipDownload: true, logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: need("gguf"), gpuLayers: gpu ? "max" : 0 });
  const threads = parseInt(args.threads ?? "0", 10) || os.availableParallelism();
  const ctx = await model.createContext({
    contextSize, batchSize: Math.min(contextSize, 512), sequences: 1, threads: threads || undefined,
  });
  const version = JSON.parse(fs.readFileSync(path.join(deps, "node_modules/node-llama-cpp/package.json"))).version;
  const info = JSON.parse(fs.readFileSync(path.join(deps, "node_modules/node-llama-cpp/llama/binariesGithubRelease.json")));
  const vocab = Number(model.fileInfo.metadata?.deepseek2?.vocab_size ?? 0);
  return { llama, model, ctx, seq: ctx.getSequence(), vocab,
           engine: `llama.cpp ${info.release} via node-llama-cpp ${version} (${gpu || "cpu"})`, threads: ctx.currentThreads };
}

const defaultPath = () => args.path || (args.gpu === "cuda" ? "llama.cpp-cuda" : "llama.cpp-cpu");
const logitsOpt = { generateNext: { logits: true } };
const greedyOpt = { generateNext: { token: true, options: { temperature: 0 } } };

function argmaxOf(map) {
  let best = -1, bv = -Infinity;
  for (const [t, v] of map) if (v > bv || (v === bv && t < best)) { bv = v; best = t; }
  return best;
}

// Feeds tokens (after what the sequence holds); returns the last position's greedy next token.
async function feedGreedy(seq, toks) {
  const items = toks.map((t, i) => (i === toks.length - 1 ? [t, greedyOpt] : t));
  const res = await seq.controlledEvaluate(items);
  return res[toks.length - 1].next.token;
}

async function cmdLogits() {
  const given = args.tokens ? args.tokens.split(",").map((t) => parseInt(t, 10)) : null;
  const n = given ? given.length : parseInt(need("random"), 10);
  if (!(n >= 2)) die("give at least 2 tokens (--tokens or --random N)");
  const m = await openModel(Math.max(32, n + 1));
  const vocab0 = parseInt(args.vocab ?? String(m.vocab), 10), r = rng(parseInt(args.seed ?? "1", 10));
  const toks = given ?? Array.from({ length: n }, () => Math.floor(r() * vocab0) % vocab0);
  const res = await m.seq.controlledEvaluate(toks.map((t) => [t, logitsOpt]));
  const vocab = m.vocab || res[0].next.logits.size; // a logit missing from the map stays NaN (vouch counts it)
  const out = new Float32Array(toks.length * vocab).fill(NaN);
  res.forEach((r, i) => { for (const [t, v] of r.next.logits) out[i * vocab + t] = v; });
  const prefix = need("out");
  fs.writeFileSync(prefix + ".f32", Buffer.from(out.buffer));
  writeJson(prefix + ".json", { engine: defaultPath(), detail: m.engine, model: args.gguf, tokens: toks,
                                shape: [toks.length, vocab], threads: m.threads });
  console.log(`${prefix}: ${toks.length} positions x ${vocab} logits from ${m.engine}`);
}

async function cmdEval() {
  const spec = JSON.parse(fs.readFileSync(need("prompts")));
  const minScore = parseFloat(args["min-score"] ?? "0.99");
  const pathName = defaultPath();
  let maxLen = 0;
  for (const c of spec.cases) maxLen = Math.max(maxLen, c.prompt.length + (c.queries?.length ?? 0) + (spec.hops?.at(-1) ?? 0) + 2);
  const m = await openModel(maxLen);
  const cells = new Map(), results = [];
  const t0 = Date.now();
  if (spec.kind === "mrcr") {
    for (const c of spec.cases) {
      await m.seq.clearHistory();
      await m.seq.evaluateWithoutGeneratingNewTokens(c.prompt);
      for (let q = 0; q < c.queries.length; q++) {
        const pred = await feedGreedy(m.seq, [c.queries[q]]);
        const ok = pred === c.answers[q];
        results.push({ bin: c.bin, needles: c.needles, sample: c.sample, depth: c.depths[q], answer: c.answers[q], pred, correct: ok });
        const key = `mrcr_bin${c.bin}_n${c.needles}`;
        if (!cells.has(key)) cells.set(key, { params: { bin: c.bin, needles: c.needles }, bits: [] });
        cells.get(key).bits.push(ok ? 1 : 0);
      }
    }
  } else if (spec.kind === "chain") {
    const hops = spec.hops;
    for (const h of hops) cells.set(`chain_hops${h}_t0`, { params: { hops: h, temperature: 0 }, bits: [] });
    for (const c of spec.cases) {
      await m.seq.clearHistory();
      let tok = await feedGreedy(m.seq, c.prompt);
      const got = {};
      for (let h = 1; h <= hops.at(-1); h++) {
        if (hops.includes(h)) got[h] = tok;
        if (h < hops.at(-1)) tok = await feedGreedy(m.seq, [tok]);
      }
      hops.forEach((h, i) => {
        const ok = got[h] === c.answers[i];
        results.push({ sample: c.sample, hops: h, answer: c.answers[i], pred: got[h], correct: ok });
        cells.get(`chain_hops${h}_t0`).bits.push(ok ? 1 : 0);
      });
    }
  } else die(`${args.prompts}: field 'kind': expected 'mrcr' or 'chain', got ${JSON.stringify(spec.kind)}`);
  const records = [];
  for (const [id, cell] of cells) {
    const score = cell.bits.reduce((a, b) => a + b, 0) / cell.bits.length;
    const pass = score >= minScore;
    records.push({ suite: "evals", case_id: id, path: pathName,
                   params: { model: args.gguf, engine: m.engine, ...cell.params },
                   metrics: [metric("score", "", "mean", "higher", cell.bits, score)],
                   threshold: { metric: "score", op: ">=", bound: minScore }, checks: [],
                   status: pass ? "pass" : "fail", reason: pass ? "" : `score ${score.toFixed(4)} < ${minScore}`, trace_ref: null });
    console.log(`${id}: ${pathName} score ${score.toFixed(4)} (${cell.bits.reduce((a, b) => a + b, 0)}/${cell.bits.length})`);
  }
  const total = results.filter((r) => r.correct).length / Math.max(1, results.length);
  console.log(`${m.engine}: ${spec.kind} score ${total.toFixed(4)} over ${results.length} queries, ${((Date.now() - t0) / 1e3).toFixed(1)} s`);
  writeJson(need("json"), { records, engine: m.engine, kind: spec.kind, score: total, results });
}

async function cmdDecode() {
  const ctxs = sizes(args.context ?? "0"), steps = parseInt(args.steps ?? "16", 10), warmup = parseInt(args.warmup ?? "3", 10);
  const pathName = defaultPath();
  const m = await openModel(Math.max(...ctxs) + steps + warmup + 2);
  const vocab = m.vocab || die(`${args.gguf}: no deepseek2.vocab_size`);
  const r = rng(parseInt(args.seed ?? "1", 10));
  const records = [];
  for (const ctx of ctxs) {
    await m.seq.clearHistory();
    const fill = Array.from({ length: Math.max(1, ctx) }, () => Math.floor(r() * vocab) % vocab);
    const tFill = process.hrtime.bigint();
    let tok = await feedGreedy(m.seq, fill);
    const fillS = Number(process.hrtime.bigint() - tFill) / 1e9;
    const ms = [];
    for (let i = 0; i < warmup + steps; i++) {
      const t = process.hrtime.bigint();
      tok = await feedGreedy(m.seq, [tok]);
      ms.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    const timed = ms.slice(warmup), tps = timed.map((t) => 1e3 / t);
    const y = ms.slice(warmup), med = median(y), mad = median(y.map((v) => Math.abs(v - med)));
    const kept = y.filter((v) => Math.abs(v - med) <= 5 * mad);
    records.push({
      suite: "sweep", case_id: `decode/tp1/b1/ctx${ctx}/spec0-1/natural`, path: pathName,
      params: { workload: "decode", tp: 1, batch: 1, context: ctx, spec_k: 0, spec_al: 1, routing: "natural",
                model: args.gguf, steps, warmup, timer: "wall clock (process.hrtime, one greedy token per call)",
                interleaved: "false", fill_len: ctx, engine: m.engine, threads: m.threads, prefill_s: fillS },
      metrics: [
        metric("step_ms", "ms", "median", "lower", timed, median(timed)),
        metric("step_ms_p90", "ms", "p90", "lower", timed, percentile(timed, 90)),
        metric("step_ms_p99", "ms", "p99", "lower", timed, percentile(timed, 99)),
        metric("step_ms_stable", "ms", "stable_mean", "lower", ms, kept.reduce((a, b) => a + b, 0) / kept.length, warmup),
        metric("tokens_per_s", "tok/s", "median", "higher", tps, median(tps)),
        metric("step_ms_cv_pct", "%", "value", "lower", [cv(kept)], cv(kept)),
      ],
      threshold: null, checks: [], status: "pass", reason: "", trace_ref: null,
    });
    console.log(`${pathName} ctx ${ctx}: step ${median(timed).toFixed(3)} ms median, ${median(tps).toFixed(1)} tok/s (${m.threads} threads)`);
  }
  writeJson(need("out"), { schema: "vouch-sweep/1", tool: "scripts/peers/llamacpp/peer.mjs", model: args.gguf,
                           options: { workload: "decode", routing: "natural", spec_k: 0, spec_al: 1, steps, warmup },
                           records });
}

// ---- check: the GGUF read back by @huggingface/gguf against the checkpoint ----
function readSafetensors(dir) {
  const files = fs.existsSync(path.join(dir, "model.safetensors.index.json"))
    ? [...new Set(Object.values(JSON.parse(fs.readFileSync(path.join(dir, "model.safetensors.index.json"))).weight_map))]
    : ["model.safetensors"];
  const t = new Map();
  for (const f of files) {
    const buf = fs.readFileSync(path.join(dir, f));
    const hl = Number(buf.readBigUInt64LE(0));
    const hdr = JSON.parse(buf.subarray(8, 8 + hl).toString());
    for (const [name, e] of Object.entries(hdr)) {
      if (name === "__metadata__") continue;
      const raw = buf.subarray(8 + hl + e.data_offsets[0], 8 + hl + e.data_offsets[1]);
      t.set(name, { shape: e.shape, data: toF32(raw, e.dtype) });
    }
  }
  return t;
}
function toF32(raw, dtype) {
  const n = dtype === "F32" ? raw.length / 4 : raw.length / 2, out = new Float32Array(n);
  const dv = new DataView(raw.buffer, raw.byteOffset, raw.length), u = new Uint32Array(1), f = new Float32Array(u.buffer);
  for (let i = 0; i < n; i++) {
    if (dtype === "F32") out[i] = dv.getFloat32(4 * i, true);
    else if (dtype === "BF16") { u[0] = dv.getUint16(2 * i, true) << 16; out[i] = f[0]; }
    else die(`safetensors dtype ${dtype} not handled by the check`);
  }
  return out;
}

async function cmdCheck() {
  const { gguf } = await import(dep("@huggingface/gguf/dist/index.mjs"));
  const file = need("gguf"), dir = need("model");
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, "config.json")));
  const { metadata: md, tensorInfos, tensorDataOffset } = await gguf(path.resolve(file), { allowLocalFile: true });
  let bad = 0;
  const fail = (msg) => { bad++; console.error(`check: ${file}: ${msg}`); };
  const A = "deepseek2";
  const nope = cfg.qk_nope_head_dim, rope = cfg.qk_rope_head_dim, vdim = cfg.v_head_dim, R = cfg.kv_lora_rank;
  const H = cfg.num_attention_heads, D = cfg.hidden_size, E = cfg.n_routed_experts ?? 0;
  const yarn = cfg.rope_scaling && (cfg.rope_scaling.type ?? cfg.rope_scaling.rope_type) === "yarn";
  const f32 = (x) => Math.fround(x);
  const want = {
    "general.architecture": A,
    [`${A}.block_count`]: cfg.num_hidden_layers, [`${A}.context_length`]: cfg.max_position_embeddings,
    [`${A}.embedding_length`]: D, [`${A}.feed_forward_length`]: cfg.intermediate_size,
    [`${A}.attention.head_count`]: H, [`${A}.attention.head_count_kv`]: 1,
    [`${A}.rope.freq_base`]: f32(cfg.rope_theta), [`${A}.attention.layer_norm_rms_epsilon`]: f32(cfg.rms_norm_eps),
    [`${A}.vocab_size`]: cfg.vocab_size, [`${A}.leading_dense_block_count`]: E ? Math.min(cfg.first_k_dense_replace, cfg.num_hidden_layers) : cfg.num_hidden_layers,
    [`${A}.attention.q_lora_rank`]: cfg.q_lora_rank ?? 0, [`${A}.attention.kv_lora_rank`]: R,
    [`${A}.attention.key_length`]: R + rope, [`${A}.attention.value_length`]: R,
    [`${A}.attention.key_length_mla`]: nope + rope, [`${A}.attention.value_length_mla`]: vdim,
    [`${A}.expert_feed_forward_length`]: cfg.moe_intermediate_size, [`${A}.expert_count`]: E,
    [`${A}.expert_used_count`]: cfg.num_experts_per_tok, [`${A}.expert_shared_count`]: cfg.n_shared_experts ?? 0,
    [`${A}.expert_weights_scale`]: f32(cfg.routed_scaling_factor), [`${A}.expert_gating_func`]: 2,
    [`${A}.expert_group_count`]: cfg.n_group ?? 1, [`${A}.expert_group_used_count`]: cfg.topk_group ?? 1,
    [`${A}.rope.dimension_count`]: rope, "tokenizer.ggml.model": "test",
  };
  if (cfg.norm_topk_prob) want[`${A}.expert_weights_norm`] = true;
  if (yarn) {
    const y = cfg.rope_scaling;
    Object.assign(want, {
      [`${A}.rope.scaling.type`]: "yarn", [`${A}.rope.scaling.factor`]: f32(y.factor),
      [`${A}.rope.scaling.original_context_length`]: y.original_max_position_embeddings,
      [`${A}.rope.scaling.yarn_beta_fast`]: f32(y.beta_fast ?? 32), [`${A}.rope.scaling.yarn_beta_slow`]: f32(y.beta_slow ?? 1),
    });
    if (y.mscale_all_dim) want[`${A}.rope.scaling.yarn_log_multiplier`] = f32(0.1 * y.mscale_all_dim);
  }
  for (const [k, v] of Object.entries(want)) {
    const got = typeof md[k] === "bigint" ? Number(md[k]) : md[k];
    if (got !== v) fail(`metadata ${k}: got ${JSON.stringify(got)}, want ${JSON.stringify(v)}`);
  }
  const known = new Set([...Object.keys(want), "general.name", "general.alignment", "version", "tensor_count", "kv_count", "tokenizer.ggml.tokens"]);
  for (const k of Object.keys(md)) if (!known.has(k)) fail(`metadata ${k}: not expected`);
  const toks = md["tokenizer.ggml.tokens"];
  if (!Array.isArray(toks) || toks.length !== cfg.vocab_size || toks[255] !== (255).toString(16))
    fail(`metadata tokenizer.ggml.tokens: want ${cfg.vocab_size} ids in hex`);

  // expected tensors: name -> {ne (innermost first), f32 elements in GGUF order}
  const st = readSafetensors(dir), exp = new Map();
  const src = (n) => st.get(n) ?? die(`${dir}: tensor ${n} missing`);
  const plain = (n) => ({ ne: [...src(n).shape].reverse(), data: src(n).data });
  const rows = (t, order, cols) => { const o = new Float32Array(order.length * cols); order.forEach((r, i) => o.set(t.data.subarray(r * cols, (r + 1) * cols), i * cols)); return o; };
  const ropeOrder = (n, blk) => Array.from({ length: n }, (_, i) => {
    const b = Math.floor(i / blk), k = i % blk, first = blk - rope;
    if (cfg.rope_interleave !== false || k < first) return i;
    const j = k - first;
    return b * blk + first + (j % 2 ? rope / 2 + (j - 1) / 2 : j / 2);
  });
  exp.set("token_embd.weight", plain("model.embed_tokens.weight"));
  exp.set("output_norm.weight", plain("model.norm.weight"));
  if (!cfg.tie_word_embeddings) exp.set("output.weight", plain("lm_head.weight"));
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    const p = `model.layers.${l}.`, b = `blk.${l}.`;
    exp.set(b + "attn_norm.weight", plain(p + "input_layernorm.weight"));
    const qn = cfg.q_lora_rank ? "self_attn.q_b_proj.weight" : "self_attn.q_proj.weight";
    if (cfg.q_lora_rank) {
      exp.set(b + "attn_q_a.weight", plain(p + "self_attn.q_a_proj.weight"));
      exp.set(b + "attn_q_a_norm.weight", plain(p + "self_attn.q_a_layernorm.weight"));
    }
    const q = src(p + qn);
    exp.set(b + (cfg.q_lora_rank ? "attn_q_b.weight" : "attn_q.weight"),
            { ne: [q.shape[1], q.shape[0]], data: rows(q, ropeOrder(q.shape[0], nope + rope), q.shape[1]) });
    const kva = src(p + "self_attn.kv_a_proj_with_mqa.weight");
    const kvaOrder = Array.from({ length: R + rope }, (_, i) => (i < R ? i : R + ropeOrder(rope, rope)[i - R]));
    exp.set(b + "attn_kv_a_mqa.weight", { ne: [D, R + rope], data: rows(kva, kvaOrder, D) });
    exp.set(b + "attn_kv_a_norm.weight", plain(p + "self_attn.kv_a_layernorm.weight"));
    const kvb = src(p + "self_attn.kv_b_proj.weight");
    const kb = new Float32Array(H * R * nope), vb = new Float32Array(H * vdim * R);
    for (let h = 0; h < H; h++) {
      for (let c = 0; c < R; c++) for (let k = 0; k < nope; k++) kb[(h * R + c) * nope + k] = kvb.data[(h * (nope + vdim) + k) * R + c];
      for (let j = 0; j < vdim; j++) for (let c = 0; c < R; c++) vb[(h * vdim + j) * R + c] = kvb.data[(h * (nope + vdim) + nope + j) * R + c];
    }
    exp.set(b + "attn_k_b.weight", { ne: [nope, R, H], data: kb });
    exp.set(b + "attn_v_b.weight", { ne: [R, vdim, H], data: vb });
    exp.set(b + "attn_output.weight", plain(p + "self_attn.o_proj.weight"));
    exp.set(b + "ffn_norm.weight", plain(p + "post_attention_layernorm.weight"));
    if (!E || l < cfg.first_k_dense_replace) {
      for (const w of ["gate", "up", "down"]) exp.set(b + `ffn_${w}.weight`, plain(p + `mlp.${w}_proj.weight`));
      continue;
    }
    exp.set(b + "ffn_gate_inp.weight", plain(p + "mlp.gate.weight"));
    if (st.has(p + "mlp.gate.e_score_correction_bias")) exp.set(b + "exp_probs_b.bias", plain(p + "mlp.gate.e_score_correction_bias"));
    for (const w of ["gate", "up", "down"]) {
      const e0 = src(p + `mlp.experts.0.${w}_proj.weight`), per = e0.data.length, all = new Float32Array(per * E);
      for (let e = 0; e < E; e++) all.set(src(p + `mlp.experts.${e}.${w}_proj.weight`).data, e * per);
      exp.set(b + `ffn_${w}_exps.weight`, { ne: [e0.shape[1], e0.shape[0], E], data: all });
    }
    if (cfg.n_shared_experts)
      for (const w of ["gate", "up", "down"]) exp.set(b + `ffn_${w}_shexp.weight`, plain(p + `mlp.shared_experts.${w}_proj.weight`));
  }
  const fd = fs.openSync(file, "r");
  const byName = new Map(tensorInfos.map((t) => [t.name, t]));
  for (const name of byName.keys()) if (!exp.has(name)) fail(`tensor ${name}: not expected`);
  let compared = 0;
  for (const [name, e] of exp) {
    const t = byName.get(name);
    if (!t) { fail(`tensor ${name}: missing`); continue; }
    const shape = t.shape.map(Number);
    if (shape.join(",") !== e.ne.join(",")) { fail(`tensor ${name}: shape [${shape}], want [${e.ne}]`); continue; }
    const dt = Number(t.dtype); // ggml type: 0 F32, 30 BF16
    if (dt !== 0 && dt !== 30) { fail(`tensor ${name}: ggml type ${dt}, want F32 or BF16`); continue; }
    if (e.ne.length === 1 && dt !== 0) fail(`tensor ${name}: 1-D tensors must be F32 (llama.cpp's converter keeps them so)`);
    const n = e.data.length, raw = Buffer.alloc(n * (dt === 0 ? 4 : 2));
    fs.readSync(fd, raw, 0, raw.length, Number(tensorDataOffset + t.offset));
    const got = toF32(raw, dt === 0 ? "F32" : "BF16");
    let mism = 0, first = -1;
    for (let i = 0; i < n; i++) if (got[i] !== e.data[i] && !(Number.isNaN(got[i]) && Number.isNaN(e.data[i]))) { mism++; if (first < 0) first = i; }
    if (mism) fail(`tensor ${name}: ${mism}/${n} elements differ (first at ${first}: ${got[first]} vs ${e.data[first]})`);
    compared += n;
  }
  fs.closeSync(fd);
  if (bad) die(`${bad} problem(s) in ${file}`);
  console.log(`check: ${file}: ${Object.keys(want).length} metadata keys, ${exp.size} tensors, ${compared} elements match ${dir}`);
}

const run = { check: cmdCheck, logits: cmdLogits, eval: cmdEval, decode: cmdDecode }[cmd];
run().then(() => process.exit(0), (e) => die(e?.stack || String(e)));
