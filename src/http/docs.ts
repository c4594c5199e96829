import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { staticFile, staticReply } from './compression.ts';

// The reference page runs on closed networks: every asset comes from the installed
// swagger-ui-dist package, nothing from a CDN.
const require = createRequire(import.meta.url);
const distDir = dirname(require.resolve('swagger-ui-dist/package.json'));

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'application/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'application/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
};

const INIT_JS = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/api-doc/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    layout: 'StandaloneLayout',
    validatorUrl: null
  });
});
`;

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Inventory Data Service API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="icon" type="image/png" href="/docs/assets/favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/assets/swagger-ui-standalone-preset.js"></script>
  <script src="/docs/assets/init.js"></script>
</body>
</html>
`;

/**
 * GET /docs/assets/{file}, in the content coding `acceptEncoding` prefers, or 304 when
 * `ifNoneMatch` names what the browser has (http/compression.ts).
 */
export async function serveDocsAsset(file: string, acceptEncoding: string | undefined, ifNoneMatch?: string): Promise<Response> {
  if (file === 'init.js') {
    return new Response(INIT_JS, { headers: { 'content-type': 'application/javascript; charset=utf-8' } });
  }
  const type = ASSETS[file];
  if (!type)
    return new Response(JSON.stringify({ error: 'Not Found', message: 'no such asset' }), {
      status: 404,
      headers: { 'content-type': 'application/json' },
    });
  const body = await staticFile(join(distDir, file));
  if (!body) throw new Error(`swagger-ui-dist has no ${file}`);
  const reply = await staticReply(body, acceptEncoding, ifNoneMatch);
  const headers = { 'content-type': type, 'cache-control': 'public, max-age=3600' };
  return new Response(reply.body, { status: reply.status, headers: Object.assign(headers, reply.headers) });
}
