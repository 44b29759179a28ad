// The same documents as JSONL and as Parquet (hyparquet-writer: snappy, dictionary where it pays,
// data page v2, 1000-row groups, as a hub shard might be) for bench/hf_prepare/run.sh. Documents are
// the fortune(6) records under /usr/share/games/fortunes, repeated with a counter until MB megabytes.
// Usage: node make_inputs.mjs OUTDIR MB   (uses tests/data/hf_writer/node_modules: scripts/setup.sh installs it)
import { readdirSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
// ES modules resolve packages from the importing file's folder, so the writer is imported by path.
const writerUrl = new URL('../../tests/data/hf_writer/node_modules/hyparquet-writer/src/index.js', import.meta.url)
const { parquetWriteBuffer } = await import(writerUrl)

const [out, mb] = [process.argv[2], Number(process.argv[3] || 50)]
const dir = '/usr/share/games/fortunes'
const records = []
for (const f of readdirSync(dir).sort()) {
  if (f.includes('.')) continue
  for (const r of readFileSync(join(dir, f), 'utf8').split(/\n%\n/)) if (r.trim()) records.push(r)
}
const docs = []
let bytes = 0
for (let i = 0; bytes < mb * 1e6; i++) {
  // Several records a document, so documents are a few KB like web text.
  const d = `#${i}\n` + [0, 1, 2, 3, 4, 5].map(k => records[(i * 7 + k * 131) % records.length]).join('\n\n')
  docs.push(d)
  bytes += Buffer.byteLength(d)
}
mkdirSync(out, { recursive: true })
writeFileSync(join(out, 'docs.jsonl'), docs.map(text => JSON.stringify({ text })).join('\n') + '\n')
const shards = 4
mkdirSync(join(out, 'hf', 'data'), { recursive: true })
for (let s = 0; s < shards; s++) {
  const part = docs.slice(Math.floor(s * docs.length / shards), Math.floor((s + 1) * docs.length / shards))
  const buf = parquetWriteBuffer({ rowGroupSize: 1000, columnData: [{ name: 'text', data: part, type: 'STRING' }] })
  writeFileSync(join(out, 'hf', 'data', `train-0000${s}-of-0000${shards}.parquet`), new Uint8Array(buf))
}
console.log(`${docs.length} documents, ${(bytes / 1e6).toFixed(1)} MB of text`)
