# Sourced (after counters.sh) by the tests that judge servers on text against a real engine no one here
# wrote (test_diverge_text.sh, test_eval_aime_llamacpp.sh): scripts/peers/llamacpp/server.mjs over
# llama.cpp, serving one tiny checkpoint (synth tiny, vocab 129280, hidden 128) exported with
# DeepSeek-V3's tokenizer (and its chat template) as f32 twice (ref and twin: an A/A pair) and as q4_0
# (q: a quantized build), each --max-model-len 256, --parallel 4, served as "tiny-text". Sets R, W, Q
# to their URLs; $t/f32.gguf and $t/q4_0.gguf stay; every server is killed at exit (the PIDs in pids).
# Skipped (77) without node/npm on a workstation; FAILS in CI. $1: the test's name (for finish).
. "$VOUCH_SRC/tests/cli/counters.sh"
. "$VOUCH_SRC/tests/cli/llamacpp_text_lib.sh" # the peer installed, start, url, the EXIT trap

"$VOUCH" model synth --preset tiny --seed 1 --out "$t/m" --set vocab_size=129280 --set hidden_size=128 >/dev/null || bad "synth"
for d in f32 q4_0; do
  "$VOUCH" model export --gguf "$t/m" --dtype $d --tokenizer "$tok" -o "$t/$d.gguf" >/dev/null && ok || bad "export $d"
done

start ref "$t/f32.gguf"
start twin "$t/f32.gguf"
start q "$t/q4_0.gguf"
R=$(url ref) && W=$(url twin) && Q=$(url q) && ok || { bad "servers did not start"; finish "$1"; exit; }
