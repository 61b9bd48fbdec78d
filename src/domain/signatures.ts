// Signatures of what Posthorn posts.
//
// Webhooks: X-Posthorn-Signature = "v1=" + hex(HMAC-SHA256(endpoint secret, `${timestamp}.${body}`))
// with X-Posthorn-Timestamp = the Unix time in seconds of this attempt (so a receiver can refuse
// stale replays) and X-Posthorn-Event-Id, stable across retries (receivers de-duplicate on it).
//
// Postbacks: X-PostageApp-Signature = base64(HMAC-SHA1(postback secret, raw message)): what the
// Ruby gem's Rails ingress checks (compatibility.md, "Mailboxes").
import { createHmac } from 'node:crypto';
import { randomToken } from './keys.ts';

export function signWebhook(secret: string, timestampSeconds: number, body: string): string {
  return 'v1=' + createHmac('sha256', secret).update(`${timestampSeconds}.${body}`, 'utf8').digest('hex');
}

export function signPostback(secret: string, rawMessage: string): string {
  return createHmac('sha1', secret).update(rawMessage, 'utf8').digest('base64');
}

/** A new endpoint secret: shown once at creation (and on rotation), stored sealed. */
export function generateWebhookSecret(): string {
  return 'whsec_' + randomToken(32);
}
