// A `messages` column (list<struct<role, content>> in Parquet's 3-level LIST layout, as Hugging Face chat
// datasets store it) written by hyparquet-writer: shared by write.mjs and messages_parquet.mjs.
import { parquetWriteBuffer } from 'hyparquet-writer'

export const messagesSchema = [
  { name: 'root', num_children: 1 },
  { name: 'messages', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
  { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
  { name: 'element', repetition_type: 'OPTIONAL', num_children: 2 },
  { name: 'role', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
  { name: 'content', type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'OPTIONAL' },
]

// The Parquet file's bytes for `rows` (each an array of {role, content}), in pages of about pageSize bytes
// and row groups of rowGroupSize rows.
export function messagesParquet(rows, pageSize, rowGroupSize) {
  return new Uint8Array(parquetWriteBuffer({
    schema: messagesSchema, pageSize, rowGroupSize, columnData: [{ name: 'messages', data: rows }],
  }))
}
