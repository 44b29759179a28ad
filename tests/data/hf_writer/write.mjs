// Writes Hugging Face-style dataset files with independent writers (hyparquet-writer for Parquet,
// apache-arrow for Arrow IPC) plus the same documents as JSONL, for tests/data/hf_dataset_test.cpp.
// Usage: node write.mjs OUTDIR
import { mkdirSync, writeFileSync, symlinkSync } from 'node:fs'
import { createHash } from 'node:crypto'
import { join, relative, dirname } from 'node:path'
import { gzipSync } from 'node:zlib'
import { parquetWriteBuffer } from 'hyparquet-writer'
import * as arrow from 'apache-arrow'
import { messagesParquet } from './messages_schema.mjs'

const out = process.argv[2]
if (!out) throw new Error('usage: node write.mjs OUTDIR')
mkdirSync(out, { recursive: true })

const words = ['alpha', 'river', 'stone', 'quiet', 'lamp', 'north', 'paper', 'seven', 'garden', 'echo']
const special = [
  '', 'naïve café — déjà vu', '日本語の文書です。', 'emoji 🚀 and 🌍', 'line one\nline two\ttab', 'quote " and \\ backslash',
]
function documents(n, seed) {
  const docs = []
  let x = seed
  for (let i = 0; i < n; i++) {
    if (i % 7 === 3) { docs.push(special[(i / 7 | 0) % special.length]); continue }
    x = (x * 1103515245 + 12345) % 2147483648
    const len = 2 + x % 30
    const w = []
    for (let k = 0; k < len; k++) { x = (x * 1103515245 + 12345) % 2147483648; w.push(words[x % words.length]) }
    docs.push(`doc ${i} ` + w.join(' ') + '.')
  }
  return docs
}
function conversations(n) {
  const rows = []
  for (let i = 0; i < n; i++) {
    const m = i % 3 === 0 ? [{ role: 'system', content: 'Be brief.' }] : []
    m.push({ role: 'user', content: `what is ${i} times two? ü` })
    m.push({ role: 'assistant', content: i % 4 === 1 ? '' : `${2 * i}` })
    if (i % 5 === 2) { m.push({ role: 'user', content: 'thanks 日本' }, { role: 'assistant', content: 'welcome 🚀' }) }
    rows.push(m)
  }
  return rows
}
const jsonl = rows => rows.map(r => JSON.stringify(r)).join('\n') + '\n'
const docs = documents(150, 11)
const ids = docs.map((_, i) => BigInt(5000 + 3 * i))
writeFileSync(join(out, 'docs.jsonl'), jsonl(docs.map(text => ({ text }))))

// Parquet (data page v2, as hyparquet-writer writes them) in each codec it can use here and each
// string encoding; small pages and row groups so every file has several of both.
const compressors = { GZIP: b => new Uint8Array(gzipSync(b)) }
const variants = [
  { name: 'snappy_dict', codec: 'SNAPPY' },
  { name: 'none_plain', codec: 'UNCOMPRESSED', encoding: 'PLAIN' },
  { name: 'gzip_plain', codec: 'GZIP', encoding: 'PLAIN' },
  { name: 'gzip_dict', codec: 'GZIP' },
  { name: 'snappy_delta_length', codec: 'SNAPPY', encoding: 'DELTA_LENGTH_BYTE_ARRAY' },
  { name: 'none_delta_bytes', codec: 'UNCOMPRESSED', encoding: 'DELTA_BYTE_ARRAY' },
]
mkdirSync(join(out, 'parquet'), { recursive: true })
for (const v of variants) {
  const buf = parquetWriteBuffer({
    codec: v.codec, compressors, pageSize: 300, rowGroupSize: 40, statistics: v.name !== 'none_plain',
    columnData: [
      { name: 'id', data: ids, type: 'INT64', encoding: 'DELTA_BINARY_PACKED' },
      { name: 'text', data: docs, type: 'STRING', encoding: v.encoding },
    ],
  })
  writeFileSync(join(out, 'parquet', v.name + '.parquet'), new Uint8Array(buf))
}
// A column of another type under the text name, and a nullable column with nulls.
const intText = parquetWriteBuffer({ columnData: [{ name: 'text', data: ids, type: 'INT64' }] })
writeFileSync(join(out, 'int_text.parquet'), new Uint8Array(intText))

// messages: list<struct<role, content>> in the 3-level LIST layout (messages_schema.mjs).
const conv = conversations(45)
writeFileSync(join(out, 'chat.jsonl'), jsonl(conv.map(messages => ({ messages }))))
mkdirSync(join(out, 'chat'), { recursive: true })
writeFileSync(join(out, 'chat', 'train-00000-of-00001.parquet'), messagesParquet(conv, 200, 20))

// Arrow IPC: stream and file formats; string, large_string, int, list<string>, struct columns.
function textTable(d, i) {
  const messages = null
  return arrow.tableFromArrays({
    id: BigInt64Array.from(i),
    n32: Int32Array.from(i.map(v => Number(v % 1000n))),
    text: arrow.vectorFromArray(d, new arrow.Utf8()),
    big: arrow.vectorFromArray(d, new arrow.LargeUtf8()),
    tags: arrow.vectorFromArray(d.map(s => s.split(' ').slice(0, 2)),
      new arrow.List(new arrow.Field('item', new arrow.Utf8(), true))),
    meta: arrow.vectorFromArray(i.map(v => ({ k: String(v), v: Number(v) })),
      new arrow.Struct([new arrow.Field('k', new arrow.Utf8(), true), new arrow.Field('v', new arrow.Int32(), true)])),
  })
}
function batched(table, rows) {
  const batches = []
  for (let s = 0; s < table.numRows; s += rows) {
    batches.push(...table.slice(s, Math.min(s + rows, table.numRows)).batches)
  }
  return new arrow.Table(batches)
}
mkdirSync(join(out, 'arrow'), { recursive: true })
const rich = batched(textTable(docs, ids), 32)
writeFileSync(join(out, 'arrow', 'rich.stream.arrow'), arrow.tableToIPC(rich, 'stream'))
writeFileSync(join(out, 'arrow', 'rich.file.arrow'), arrow.tableToIPC(rich, 'file'))
const msgType = new arrow.List(new arrow.Field('item', new arrow.Struct([
  new arrow.Field('role', new arrow.Utf8(), true), new arrow.Field('content', new arrow.Utf8(), true)]), true))
const chatArrow = batched(new arrow.Table({ messages: arrow.vectorFromArray(conv, msgType) }), 16)
writeFileSync(join(out, 'arrow', 'messages.stream.arrow'), arrow.tableToIPC(chatArrow, 'stream'))

// save_to_disk layout: two Arrow stream files, state.json, dataset_info.json.
function saveToDisk(dir, table, split) {
  mkdirSync(dir, { recursive: true })
  const half = Math.floor(table.numRows / 2)
  const parts = [table.slice(0, half), table.slice(half)]
  const files = parts.map((p, k) => {
    const name = `data-${String(k).padStart(5, '0')}-of-${String(parts.length).padStart(5, '0')}.arrow`
    writeFileSync(join(dir, name), arrow.tableToIPC(batched(p, 25), 'stream'))
    return { filename: name }
  })
  writeFileSync(join(dir, 'state.json'), JSON.stringify({
    _data_files: files, _fingerprint: 'f00d', _format_columns: null,
    _format_kwargs: {}, _format_type: null, _output_all_columns: false, _split: split,
  }, null, 2))
  const info = { citation: '', description: '', features: {}, homepage: '', license: '' }
  writeFileSync(join(dir, 'dataset_info.json'), JSON.stringify(info))
}
saveToDisk(join(out, 'saved'), rich, 'train')
const valDocs = documents(40, 77)
writeFileSync(join(out, 'val_docs.jsonl'), jsonl(valDocs.map(text => ({ text }))))
const valIds = valDocs.map((_, i) => BigInt(i))
saveToDisk(join(out, 'saved_dict', 'train'), rich, 'train')
saveToDisk(join(out, 'saved_dict', 'validation'), batched(textTable(valDocs, valIds), 10), 'validation')
writeFileSync(join(out, 'saved_dict', 'dataset_dict.json'), JSON.stringify({ splits: ['train', 'validation'] }))
saveToDisk(join(out, 'saved_chat'), chatArrow, 'train')

// A hub cache repository folder: refs/main -> snapshots/<sha>/ whose files link into blobs/.
function hubRepo(root, files, sha) {
  mkdirSync(join(root, 'blobs'), { recursive: true })
  mkdirSync(join(root, 'refs'), { recursive: true })
  writeFileSync(join(root, 'refs', 'main'), sha)
  for (const [rel, bytes] of Object.entries(files)) {
    const digest = createHash('sha256').update(bytes).digest('hex')
    writeFileSync(join(root, 'blobs', digest), bytes)
    const dest = join(root, 'snapshots', sha, rel)
    mkdirSync(dirname(dest), { recursive: true })
    symlinkSync(relative(dirname(dest), join(root, 'blobs', digest)), dest)
  }
}
const pq = (d, i, opts) => new Uint8Array(parquetWriteBuffer({ rowGroupSize: 30, ...opts, columnData: [
  { name: 'id', data: i, type: 'INT64' }, { name: 'text', data: d, type: 'STRING' }] }))
const cut = 90
hubRepo(join(out, 'hub', 'datasets--testorg--tiny'), {
  'README.md': new TextEncoder().encode('# tiny\n'),
  'data/train-00000-of-00002.parquet': pq(docs.slice(0, cut), ids.slice(0, cut), {}),
  'data/train-00001-of-00002.parquet': pq(docs.slice(cut), ids.slice(cut), { codec: 'GZIP', compressors }),
  'data/validation-00000-of-00001.parquet': pq(valDocs, valIds, {}),
}, '0123456789abcdef0123456789abcdef01234567')
hubRepo(join(out, 'hub', 'datasets--testorg--configs'), {
  'main_cfg/train-00000-of-00001.parquet': pq(docs, ids, {}),
  'other/train-00000-of-00001.parquet': pq(valDocs, valIds, {}),
  'other/test-00000-of-00001.parquet': pq(valDocs.slice(0, 5), valIds.slice(0, 5), {}),
}, 'fedcba9876543210fedcba9876543210fedcba98')
console.log('wrote', out)
