import { applyJsonPatch, checkDocumentLimits, JsonPatchError, JSON_PATCH_LIMITS } from './json-patch.ts';
import { applyMergePatch } from './merge-patch.ts';

/** Principal settings documents: a JSON object root, at most 2 MiB and 64 nested containers. */

export const JSON_PATCH_MEDIA_TYPE = 'application/json-patch+json';
export const MERGE_PATCH_MEDIA_TYPES: readonly string[] = ['application/json', 'application/merge-patch+json'];

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A complete new document (PUT): object root, size and depth limits. Throws JsonPatchError. */
export function checkSettingsDocument(doc: unknown): Record<string, unknown> {
  if (!isObject(doc)) throw new JsonPatchError('invalid_result', 'the settings document must be a JSON object');
  checkDocumentLimits(doc, 'the settings document');
  return doc;
}

/**
 * The document after a PATCH, by media type: JSON Patch for application/json-patch+json, JSON
 * Merge Patch for application/json and application/merge-patch+json. Throws JsonPatchError.
 */
export function patchSettings(current: unknown, contentType: string, body: unknown): Record<string, unknown> {
  if (contentType === JSON_PATCH_MEDIA_TYPE) {
    return applyJsonPatch(current, body, { requireObjectRoot: true }) as Record<string, unknown>;
  }
  if (!MERGE_PATCH_MEDIA_TYPES.includes(contentType) && contentType !== '') {
    throw new JsonPatchError('invalid_patch', `unsupported patch media type ${contentType}`);
  }
  if (!isObject(body)) throw new JsonPatchError('invalid_patch', 'a merge patch must be a JSON object');
  // The patch is bounded before the recursive merge walks it.
  checkDocumentLimits(body, 'the merge patch', { maxDepth: JSON_PATCH_LIMITS.maxDepth });
  return checkSettingsDocument(applyMergePatch(current, body));
}
