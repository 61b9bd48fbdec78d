// The key that signs open/click tracking links: derived from the deployment's secret key
// (--secret-key or the generated <data>/secret.key), so every process that shares the secret signs
// and verifies the same links, and the secret itself never appears in a URL.
//
// FOR THE TRACKING ENDPOINTS: verify with `trackingSigningKey(services)`: delivery passes exactly
// this string as applyTracking's signingKey.
import type { Services } from '../operations/context.ts';

export function trackingSigningKey(services: Pick<Services, 'secrets'>): string {
  return services.secrets.deriveKey('posthorn tracking key v1');
}
