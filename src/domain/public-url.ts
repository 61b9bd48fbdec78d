// Whether readers can reach --public-url: the tracking links and the open pixel of a message point
// there (docs/tracking.md), and so do the message URLs of the API. The default,
// http://<--host>:<--port>, names 127.0.0.1 (or 0.0.0.0 in a container): right for local use, out
// of reach of every mail client but one on this machine.

/**
 * True when the URL's host is this machine alone (a loopback address or `localhost`) or no address
 * at all (0.0.0.0, ::, which a listener binds and no client can reach): nobody else reaches it.
 */
export function isLocalOnlyUrl(url: string): boolean {
  let host: string;
  try {
    host = new URL(url).hostname.toLowerCase();
  } catch {
    return false;
  }
  host = host.replace(/^\[|\]$/g, '');
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  if (host === '::1' || host === '::' || host === '0.0.0.0') return true;
  return /^127\.\d+\.\d+\.\d+$/.test(host);
}
