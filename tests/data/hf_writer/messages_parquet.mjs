// Writes the conversations of a chat JSONL file ({"messages": [{role, content}, ...]} a line) as a Parquet
// file with a `messages` column (messages_schema.mjs) through hyparquet-writer, an independent writer: for
// tests/integration/chat_test.cpp's worked example from Parquet.
// Usage: node messages_parquet.mjs IN.jsonl OUT.parquet
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import { messagesParquet } from './messages_schema.mjs'

const [input, output] = process.argv.slice(2)
if (!input || !output) throw new Error('usage: node messages_parquet.mjs IN.jsonl OUT.parquet')
const rows = readFileSync(input, 'utf8').split('\n').filter(l => l.trim() !== '')
  .map(l => JSON.parse(l).messages.map(m => ({ role: m.role, content: m.content })))
mkdirSync(dirname(output), { recursive: true })
// Small row groups and pages, so that the reader crosses both.
writeFileSync(output, messagesParquet(rows, 1024, 16))
