#!/usr/bin/env node
// Turns a parquet file of OpenAI's MRCR dataset (openai/mrcr, as published: 2needle.parquet,
// 4needle.parquet, 8needle.parquet, downloaded by you) into the JSONL that
// `vouch eval mrcr --dataset FILE.jsonl` reads: one JSON object per row, with the columns prompt,
// answer, random_string_to_prepend, n_needles, desired_msg_index, total_messages, n_chars as they are.
// Nothing is downloaded here, and nothing runs at build time.
//
//   npm install hyparquet hyparquet-compressors      # once, in any folder (or globally with -g)
//   node scripts/mrcr_parquet_to_jsonl.mjs 2needle.parquet 4needle.parquet 8needle.parquet > mrcr.jsonl
//
// (python3 with pyarrow does the same:
//   python3 -c 'import sys, json, pyarrow.parquet as pq
//   for f in sys.argv[1:]:
//       for r in pq.read_table(f).to_pylist(): print(json.dumps(r))' 2needle.parquet > mrcr.jsonl )
import { open } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const COLUMNS = ['prompt', 'answer', 'random_string_to_prepend', 'n_needles', 'desired_msg_index', 'total_messages', 'n_chars'];

// An npm package from beside this script, else from the current folder's node_modules (where
// `npm install` put it).
async function load(name) {
  try {
    return await import(name);
  } catch {}
  try {
    const path = createRequire(process.cwd() + '/').resolve(name);
    return await import(pathToFileURL(path).href);
  } catch {
    console.error(`mrcr_parquet_to_jsonl: the npm package '${name}' is missing: npm install hyparquet hyparquet-compressors`);
    process.exit(2);
  }
}

// A file as hyparquet's AsyncBuffer: byteLength and slice(start, end) reading from disk, so a
// multi-GB file is not read into memory whole.
async function fileBuffer(path) {
  const fh = await open(path, 'r');
  const { size } = await fh.stat();
  return {
    byteLength: size,
    async slice(start, end = size) {
      const buf = Buffer.alloc(end - start);
      await fh.read(buf, 0, end - start, start);
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength);
    },
    close: () => fh.close(),
  };
}

// JSON has no BigInt: integer columns come back as BigInt from parquet's INT64.
const plain = (v) => (typeof v === 'bigint' ? Number(v) : v);

async function main() {
  const files = process.argv.slice(2);
  if (!files.length) {
    console.error('usage: node scripts/mrcr_parquet_to_jsonl.mjs FILE.parquet... > mrcr.jsonl');
    process.exit(2);
  }
  const { parquetMetadataAsync, parquetReadObjects } = await load('hyparquet');
  const { compressors } = await load('hyparquet-compressors');
  const out = process.stdout;
  let rows = 0;
  for (const path of files) {
    const file = await fileBuffer(path);
    const metadata = await parquetMetadataAsync(file);
    const names = metadata.schema.map((s) => s.name);
    const missing = COLUMNS.filter((c) => !names.includes(c));
    if (missing.length) {
      console.error(`${path}: not an MRCR parquet file: no column ${missing.join(', ')}`);
      process.exit(1);
    }
    // row groups one at a time: the prompts average ~1 MB each
    let start = 0;
    for (const rg of metadata.row_groups) {
      const end = start + Number(rg.num_rows);
      const objs = await parquetReadObjects({ file, metadata, columns: COLUMNS, rowStart: start, rowEnd: end, compressors });
      for (const o of objs) {
        const row = {};
        for (const c of COLUMNS) row[c] = plain(o[c]);
        if (!out.write(JSON.stringify(row) + '\n')) await new Promise((r) => out.once('drain', r));
        rows++;
      }
      start = end;
    }
    await file.close();
  }
  console.error(`mrcr_parquet_to_jsonl: ${rows} rows`);
}

main().catch((e) => {
  console.error(`mrcr_parquet_to_jsonl: ${e.message}`);
  process.exit(1);
});

