// Merges spec/base.yaml and spec/parts/*.yaml into one OpenAPI document.
// Usage: node spec/merge.mjs OUT.yaml [part-file ...]   (no part files: all of spec/parts)
import { readFileSync, writeFileSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';

const here = dirname(fileURLToPath(import.meta.url));
const [out, ...only] = process.argv.slice(2);
if (!out) throw new Error('usage: node spec/merge.mjs OUT.yaml [part ...]');
const doc = YAML.parse(readFileSync(join(here, 'base.yaml'), 'utf8'));
const parts = only.length ? only : readdirSync(join(here, 'parts')).filter((f) => f.endsWith('.yaml')).sort().map((f) => join(here, 'parts', f));
const problems = [];
for (const file of parts) {
  const part = YAML.parse(readFileSync(file, 'utf8')) ?? {};
  for (const t of part.tags ?? []) {
    if (doc.tags.some((x) => x.name === t.name)) problems.push(`${file}: tag ${t.name} twice`);
    else doc.tags.push(t);
  }
  for (const [p, item] of Object.entries(part.paths ?? {})) {
    if (doc.paths[p]) problems.push(`${file}: path ${p} twice`);
    doc.paths[p] = item;
  }
  for (const [section, entries] of Object.entries(part.components ?? {})) {
    doc.components[section] ??= {};
    for (const [name, value] of Object.entries(entries ?? {})) {
      if (doc.components[section][name]) problems.push(`${file}: components.${section}.${name} twice`);
      doc.components[section][name] = value;
    }
  }
}
const ids = new Map();
for (const [p, item] of Object.entries(doc.paths)) {
  for (const [m, op] of Object.entries(item)) {
    if (!op || typeof op !== 'object' || !op.operationId) continue;
    if (ids.has(op.operationId)) problems.push(`operationId ${op.operationId} twice (${ids.get(op.operationId)}, ${m} ${p})`);
    ids.set(op.operationId, `${m} ${p}`);
  }
}
writeFileSync(out, '# Written from spec/ by spec/merge.mjs is how it began; edit this file directly now.\n' + YAML.stringify(doc, { lineWidth: 0 }));
console.log(`${ids.size} operations, ${Object.keys(doc.paths).length} paths -> ${out}`);
if (problems.length) { console.error(problems.join('\n')); process.exit(1); }
