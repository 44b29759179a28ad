// Times the npm peers on the same corpus as tokenizer_bench: OpenAI's `tiktoken` (Rust core compiled to
// WASM, encode_ordinary) and `gpt-tokenizer` (pure JavaScript), single thread, best of N runs.
// With a tokenizer.json (Llama 3's), tiktoken is given its ranks and pattern instead (the ids are the
// ranks; the README of ../shared/data notes tiktoken then gives Hugging Face's ids) and gpt-tokenizer,
// which has no Llama 3 encoding, is skipped.
// Prints one JSON object per line. Usage: node peers.mjs CORPUS REPEAT [TOKENIZER_JSON]  (run by run.sh,
// which sets NODE_PATH to bench/.npm/node_modules).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const [corpusPath, repeatArg, tokenizerJson] = process.argv.slice(2);
const repeat = Number(repeatArg || 5);
const bytes = readFileSync(corpusPath);
const text = bytes.toString('utf8');
const require = createRequire(process.env.NODE_PATH + '/');

function time(name, version, encode) {
  let best = Infinity, bestCpu = Infinity, first = 0, tokens = 0;
  for (let r = 0; r < repeat; r++) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    const ids = encode(text);
    const c = process.cpuUsage(c0);
    bestCpu = Math.min(bestCpu, (c.user + c.system) / 1e6);
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    if (r === 0) first = s;
    best = Math.min(best, s);
    tokens = ids.length;
  }
  console.log(JSON.stringify({ what: name, version, threads: 1, mb_per_s: +(bytes.length / best / 1e6).toFixed(2),
                               mb_per_cpu_s: +(bytes.length / bestCpu / 1e6).toFixed(2),
                               first_run_mb_per_s: +(bytes.length / first / 1e6).toFixed(2), tokens,
                               bytes: bytes.length }));
}

const tiktoken = require('tiktoken');
const versionOf = (pkg) => JSON.parse(readFileSync(`${process.env.NODE_PATH}/${pkg}/package.json`, 'utf8')).version;
const tkVersion = versionOf('tiktoken');
if (tokenizerJson) {
  // GPT-2's byte-to-unicode alphabet, inverted: a byte-level token string -> its bytes.
  const cpToByte = new Map();
  let n = 0;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
    cpToByte.set(printable ? b : 256 + n++, b);
  }
  const j = JSON.parse(readFileSync(tokenizerJson, 'utf8'));
  const lines = [];
  for (const [tok, id] of Object.entries(j.model.vocab)) {
    const bytes = Buffer.from([...tok].map((ch) => cpToByte.get(ch.codePointAt(0))));
    lines.push(`${bytes.toString('base64')} ${id}`);
  }
  const specials = Object.fromEntries(j.added_tokens.map((t) => [t.content, t.id]));
  const pattern = j.pre_tokenizer.pretokenizers[0].pattern.Regex;
  const enc = new tiktoken.Tiktoken(lines.join('\n'), specials, pattern);
  time('tiktoken', tkVersion, (t) => enc.encode_ordinary(t));
  enc.free();
  process.exit(0);
}
const enc = tiktoken.get_encoding('gpt2');
time('tiktoken', tkVersion, (t) => enc.encode_ordinary(t));
enc.free();

const gptTokVersion = versionOf('gpt-tokenizer');
const gptTok = await import(require.resolve('gpt-tokenizer/encoding/r50k_base'));
time('gpt-tokenizer', gptTokVersion, (t) => gptTok.encode(t));
