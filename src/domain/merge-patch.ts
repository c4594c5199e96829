/**
 * RFC 7396 JSON Merge Patch. Pure: returns a new value and never mutates its inputs.
 * Objects merge recursively; a null member removes the key; arrays and scalars replace;
 * patching an object into a missing or non-object value starts from {}.
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return copy(patch);
  const out: Record<string, unknown> = {};
  if (isObject(target)) for (const k of Object.keys(target)) define(out, k, target[k]);
  for (const k of Object.keys(patch)) {
    const v = patch[k];
    if (v === null) delete out[k];
    else define(out, k, applyMergePatch(Object.prototype.hasOwnProperty.call(out, k) ? out[k] : undefined, v));
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Own data property, never the `__proto__` setter. */
function define(o: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(o, key, { value, writable: true, enumerable: true, configurable: true });
}

function copy(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(copy);
  if (isObject(v)) {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(v)) define(out, k, copy(v[k]));
    return out;
  }
  return v;
}
