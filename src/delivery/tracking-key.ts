// The key that signs open/click tracking links: derived from the deployment's secret key
// (--secret-key or the generated <data>/secret.key), so every process that shares the secret signs
// and verifies the same links, and the secret itself never appears in a URL.
//
// FOR THE TRACKING ENDPOINTS: verify with `trackingSigningKey(services)`: delivery passes exactly
// this string as applyTracking's signingKey.
import { createHmac } from 'node:crypto';
import type { Services } from '../operations/context.ts';
import { loadSecretKey } from '../storage/secret-key.ts';

const keys = new WeakMap<object, string>();

export function trackingSigningKey(services: Pick<Services, 'config'>): string {
  const cached = keys.get(services);
  if (cached !== undefined) return cached;
  const key = createHmac('sha256', loadSecretKey(services.config)).update('posthorn tracking key v1').digest('base64');
  keys.set(services, key);
  return key;
}
