// VERP return paths (docs/domains-and-bounces.md): every transmission goes out with its own envelope sender
// on the bounce domain, so a bounce names the transmission it is about without any parsing of its
// body. The address carries a short HMAC tag of the transmission id, so nobody can forge a bounce
// for another transmission by guessing ids (a forged bounce would fail mail and suppress an address).
//
//   bounce-<transmission id>-<tag>@<bounce domain>    tag = first 16 hex of HMAC-SHA256(tagKey, id)
//
// FOR DELIVERY: call `returnPathFor(config.bounceDomain, id, verpTagKey(services))`. The bounce
// listener (src/smtp/) verifies the tag and refuses, with 550, any address without a valid one, so
// an untagged return path (the 2-argument form) would have its bounces refused.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { SecretBox } from './secret-box.ts';

const PREFIX = 'bounce-';
const TAG_HEX = 16;

/** The envelope sender of one transmission: bounces to it identify the transmission. */
export function returnPathFor(bounceDomain: string, transmissionId: number, tagKey?: string): string {
  const domain = bounceDomain.toLowerCase();
  if (tagKey === undefined) return `${PREFIX}${transmissionId}@${domain}`;
  return `${PREFIX}${transmissionId}-${tagFor(tagKey, transmissionId)}@${domain}`;
}

/**
 * The transmission id a bounce recipient address names, or null when it is not one of ours. With
 * `tagKey` (the listener always passes it) only a correctly tagged address parses; without it only
 * the untagged form does (the round trip of the 2-argument returnPathFor).
 */
export function transmissionIdFromReturnPath(address: string, bounceDomain: string, tagKey?: string): number | null {
  const bare = address.trim().replace(/^<(.*)>$/, '$1').toLowerCase();
  const at = bare.lastIndexOf('@');
  if (at < 0 || bare.slice(at + 1) !== bounceDomain.toLowerCase().replace(/\.$/, '')) return null;
  const m = /^bounce-([1-9]\d{0,15})(?:-([0-9a-f]+))?$/.exec(bare.slice(0, at));
  if (!m) return null;
  const id = Number(m[1]);
  if (!Number.isSafeInteger(id)) return null;
  const tag = m[2];
  if (tagKey === undefined) return tag === undefined ? id : null;
  if (tag === undefined || tag.length !== TAG_HEX) return null;
  const expected = Buffer.from(tagFor(tagKey, id), 'ascii');
  return timingSafeEqual(expected, Buffer.from(tag, 'ascii')) ? id : null;
}

function tagFor(tagKey: string, transmissionId: number): string {
  return createHmac('sha256', tagKey).update(`verp:${transmissionId}`).digest('hex').slice(0, TAG_HEX);
}

/**
 * The VERP tag key of this deployment, derived from the secret key (--secret-key or the generated
 * key file), so every process of a deployment that shares the secret computes the same tags.
 */
export function verpTagKey(services: { readonly secrets: Pick<SecretBox, 'deriveKey'> }): string {
  return services.secrets.deriveKey('posthorn verp tag key v1');
}
