// The dashboard's static files, served by Posthorn itself (no CDN: it works on a machine with no
// internet): this directory's assets/ and uPlot's build from node_modules. A fixed list, read once.
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyReply } from 'fastify';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);

const FILES: Record<string, { file: () => string; type: string }> = {
  'style.css': { file: () => path.join(here, 'assets', 'style.css'), type: 'text/css; charset=utf-8' },
  'app.js': { file: () => path.join(here, 'assets', 'app.js'), type: 'text/javascript; charset=utf-8' },
  'charts.js': { file: () => path.join(here, 'assets', 'charts.js'), type: 'text/javascript; charset=utf-8' },
  'preview.js': { file: () => path.join(here, 'assets', 'preview.js'), type: 'text/javascript; charset=utf-8' },
  'uplot.js': { file: () => require.resolve('uplot/dist/uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' },
  'uplot.css': { file: () => require.resolve('uplot/dist/uPlot.min.css'), type: 'text/css; charset=utf-8' },
};

const cache = new Map<string, Buffer>();

export async function serveAsset(reply: FastifyReply, name: string): Promise<FastifyReply> {
  const entry = Object.hasOwn(FILES, name) ? FILES[name] : undefined;
  if (!entry) return reply.code(404).header('content-type', 'text/plain; charset=utf-8').send('Not found');
  let body = cache.get(name);
  if (!body) {
    body = await fs.promises.readFile(entry.file());
    cache.set(name, body);
  }
  return reply.header('content-type', entry.type).header('cache-control', 'public, max-age=300').send(body);
}
