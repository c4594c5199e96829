/**
 * RFC 7396 JSON Merge Patch. Pure: returns a new value and never mutates its inputs.
 * Objects merge recursively; a null member removes the key; arrays and scalars replace;
 * patching an object into a missing or non-object value starts from {}.
 */
import { defineMember } from './json-patch.ts';
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return copy(patch);
  const out: Record<string, unknown> = {};
  if (isObject(target)) for (const k of Object.keys(target)) defineMember(out, k, target[k]);
  for (const k of Object.keys(patch)) {
    const v = patch[k];
    if (v === null) delete out[k];
    else defineMember(out, k, applyMergePatch(Object.prototype.hasOwnProperty.call(out, k) ? out[k] : undefined, v));
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

function copy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(copy);
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) defineMember(out, k, copy(v[k]));
    return out;
  }
  return v;
}
