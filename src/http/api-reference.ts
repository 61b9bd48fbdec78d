// The API's reference, served by Posthorn itself (docs/api/README.md, "Reference"):
//   GET /openapi.json  the OpenAPI 3.1 document generated from the method table (http/openapi.ts)
//   GET /docs          Swagger UI rendering it (and its "Try it out", to this server), entirely from this server: the swagger-ui-dist files
//                      and our initializer script, no CDN and no inline script, under a strict
//                      Content-Security-Policy (the page works offline and runs only our scripts).
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { ALL_METHODS } from './api/methods/index.ts';
import { buildOpenApiDocument } from './openapi.ts';
import type { Services } from '../services.ts';

const require = createRequire(import.meta.url);
// The package's absolute-path module only: its main module evaluates the two 1 MB bundles (23 MiB
// of memory per process) to hand out the same directory.
const SWAGGER_DIR = (require('swagger-ui-dist/absolute-path.js') as () => string)();

/** Only what the page loads; each read once, on first request. */
const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: 'swagger-ui.css', type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', type: 'text/javascript; charset=utf-8' },
};

export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI's own stylesheet only (its components set styles through the DOM, which CSP allows).
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Posthorn API reference</title>
<link rel="stylesheet" href="/docs/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

const INIT = `// Posthorn: render /openapi.json (served by this server).
window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({
    url: '/openapi.json',
    dom_id: '#swagger-ui',
    deepLinking: true,
    presets: [SwaggerUIBundle.presets.apis],
    // "Try it out" posts the example (with the reader's key) to this server: the page's own
    // origin, whatever --public-url the document names, as connect-src 'self' allows.
    supportedSubmitMethods: ['post'],
    requestInterceptor: function (request) {
      var at = request.url.indexOf('/v.1.1/');
      if (at >= 0) request.url = window.location.origin + request.url.slice(at);
      return request;
    },
    validatorUrl: null,
  });
});
`;

function withPolicy(reply: FastifyReply, type: string): FastifyReply {
  return reply
    .header('content-type', type)
    .header('content-security-policy', DOCS_CSP)
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-cache');
}

export function installApiReference(app: FastifyInstance, services: Services): void {
  let document: string | null = null;
  const cache = new Map<string, Buffer>();
  const documentText = () => {
    if (document === null) {
      const pkg = JSON.parse(fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
      document = JSON.stringify(buildOpenApiDocument(ALL_METHODS, { serverUrl: services.config.publicUrl, version: pkg.version }));
    }
    return document;
  };

  app.get('/openapi.json', async (_request, reply) =>
    reply.header('content-type', 'application/json; charset=utf-8').header('access-control-allow-origin', '*').send(documentText()),
  );
  // The page names its assets by absolute paths, so /docs/ serves it as well.
  for (const url of ['/docs', '/docs/']) app.get(url, async (_request, reply) => withPolicy(reply, 'text/html; charset=utf-8').send(PAGE));
  app.get('/docs/init.js', async (_request, reply) => withPolicy(reply, 'text/javascript; charset=utf-8').send(INIT));
  app.get<{ Params: { asset: string } }>('/docs/:asset', async (request, reply) => {
    const asset = ASSETS[request.params.asset];
    if (!asset) return reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('Not found');
    let body = cache.get(asset.file);
    if (!body) {
      body = fs.readFileSync(path.join(SWAGGER_DIR, asset.file));
      cache.set(asset.file, body);
    }
    return withPolicy(reply, asset.type).header('cache-control', 'public, max-age=86400').send(body);
  });
}
