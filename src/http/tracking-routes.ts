// The tracking endpoints (docs/tracking.md), served by the API listener at --public-url:
//   GET /t/o/<token>.gif  the open pixel: a 1x1 GIF, records the first open
//   GET /t/c/<token>      a click: 302 to the signed target URL, records the first click
// A token whose signature does not verify is answered 404 and records nothing, so the redirector
// cannot be used to send anyone anywhere else (src/domain/tracking-token.ts).
// HEAD, which Fastify answers through the GET route without the body, gets the same status and
// headers but records nothing: link scanners check links with HEAD, readers' clients do not.
import { readTrackingToken, trackableUrl, trackingSigningKey } from '../domain/tracking-token.ts';
import { recordClick, recordOpen } from '../operations/tracking.ts';
import type { FastifyInstance } from 'fastify';
import type { Services } from '../services.ts';

const PIXEL = Buffer.from('R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7', 'base64');

export function installTrackingRoutes(app: FastifyInstance, services: Services): void {
  const key = () => trackingSigningKey(services);

  app.get('/t/o/*', async (request, reply) => {
    const file = (request.params as { '*': string })['*'] ?? '';
    const token = file.endsWith('.gif') ? file.slice(0, -4) : '';
    const read = token.length > 0 ? readTrackingToken('open', token, key()) : null;
    if (!read) return reply.code(404).header('content-type', 'text/plain').send('Not found');
    if (request.method !== 'HEAD') {
      try {
        await recordOpen(services, { transmissionId: read.transmissionId, userAgent: userAgentOf(request.headers['user-agent']) });
      } catch (error) {
        // The reader still gets the pixel; a lost open is not worth a broken image.
        request.log.error({ err: error }, 'could not record an open');
      }
    }
    return reply
      .code(200)
      .header('content-type', 'image/gif')
      .header('cache-control', 'no-store, no-cache, must-revalidate, private')
      .send(PIXEL);
  });

  app.get('/t/c/*', async (request, reply) => {
    const token = (request.params as { '*': string })['*'] ?? '';
    const read = token.length > 0 ? readTrackingToken('click', token, key()) : null;
    if (!read || read.kind !== 'click') return reply.code(404).header('content-type', 'text/plain').send('Not found');
    // Delivery signs trackableUrl()'s form of the link; a token signed before it did may carry
    // characters a Location header cannot (non-ASCII, control characters), so the URL is made so
    // again here. A signed URL that does not parse is neither redirected to nor recorded.
    const url = trackableUrl(read.url);
    if (url === null) return reply.code(400).header('content-type', 'text/plain').send('Bad link: its target is not a valid URL');
    if (request.method !== 'HEAD') {
      try {
        await recordClick(services, { transmissionId: read.transmissionId, url, userAgent: userAgentOf(request.headers['user-agent']) });
      } catch (error) {
        // The reader still gets where the link goes.
        request.log.error({ err: error }, 'could not record a click');
      }
    }
    return reply.code(302).header('location', url).header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').send();
  });
}

function userAgentOf(value: string | undefined): string | null {
  return value ? value.slice(0, 300) : null;
}
