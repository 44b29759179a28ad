// Writes the conversations of a chat JSONL file ({"messages": [{role, content}, ...]} a line) as a Parquet
// file with a `messages` column (list<struct<role, content>> in the 3-level LIST layout) through
// hyparquet-writer, an independent writer: for tests/integration/chat_test.cpp's worked example from Parquet.
// Usage: node messages_parquet.mjs IN.jsonl OUT.parquet
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { parquetWriteBuffer } from 'hyparquet-writer'

const [input, output] = process.argv.slice(2)
if (!input || !output) throw new Error('usage: node messages_parquet.mjs IN.jsonl OUT.parquet')
const rows = readFileSync(input, 'utf8').split('\n').filter(l => l.trim() !== '')
  .map(l => JSON.parse(l).messages.map(m => ({ role: m.role, content: m.content })))
const schema = [
  { name: 'root', num_children: 1 },
  { name: 'messages', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
  { name: 'role', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
  { name: 'content', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
]
mkdirSync(dirname(output), { recursive: true })
// Small row groups and pages, so that the reader crosses both.
writeFileSync(output, new Uint8Array(parquetWriteBuffer({ schema, pageSize: 1024, rowGroupSize: 16, columnData: [{ name: 'messages', data: rows }] })))
