// The `variables` of the webhook requests of events, added when a request is posted: an event row
// and its requests store none (domain/events.ts), the message row holds the global ones once and
// each transmission its own. One read per claimed batch finds the batch's transmissions, and one
// more the messages not read lately: a message's global variables are parsed and written as JSON
// once for all its recipients, and kept for the next batches (most requests of a batch, and of the
// next, are of the same few messages), within a bound of entries and characters.
import { eventVariables, readAcceptedPayload, withEventVariables } from '../domain/events.ts';
import type { Variables } from '../domain/variables.ts';
import type { OutboundRequest } from '../storage/outbound-schema.ts';
import type { Tx } from '../storage/store.ts';
import { findMessagePayloads, findVariablesOfTransmissions } from '../storage/webhooks.ts';

/** Messages whose global variables are kept between batches, and their JSON's characters in all. */
const MAX_MESSAGES = 64;
const MAX_CHARS = 32 * 1024 * 1024;

interface GlobalVariables {
  variables: Variables;
  json: string;
}

const NONE: GlobalVariables = { variables: {}, json: '{}' };

export class EventVariables {
  /** by message id, least recently used first */
  private readonly cache = new Map<number, GlobalVariables>();
  private cachedChars = 0;

  /**
   * The body to post of each request that takes its variables at send time (variables_of), by
   * request id; the others are posted as stored. A request whose transmission is gone (its message
   * purged, docs/webhooks.md) gets empty variables.
   */
  async bodiesOf(db: Tx, requests: readonly OutboundRequest[]): Promise<Map<number, string>> {
    const bodies = new Map<number, string>();
    const wanting = requests.filter((r) => r.variables_of !== null);
    if (wanting.length === 0) return bodies;
    const transmissions = new Map(
      (await findVariablesOfTransmissions(db, [...new Set(wanting.map((r) => Number(r.variables_of)))])).map((t) => [t.id, t]),
    );
    const batch = await this.globalsOf(db, [...new Set([...transmissions.values()].map((t) => t.message_id))]);
    for (const request of wanting) {
      const transmission = transmissions.get(Number(request.variables_of));
      const globals = transmission ? (batch.get(transmission.message_id) ?? NONE) : NONE;
      const own = transmission?.variables ?? null;
      // Most recipients have no variables of their own: the message's JSON serves them all.
      const json = own === null || own === '' || own === '{}' ? globals.json : JSON.stringify(eventVariables(globals.variables, own));
      bodies.set(request.id, withEventVariables(request.body, json));
    }
    return bodies;
  }

  /** The global variables of these messages: kept ones, the rest read in one query. */
  private async globalsOf(db: Tx, messageIds: readonly number[]): Promise<Map<number, GlobalVariables>> {
    const out = new Map<number, GlobalVariables>();
    const missing: number[] = [];
    for (const id of messageIds) {
      const kept = this.cache.get(id);
      if (kept === undefined) {
        missing.push(id);
        continue;
      }
      this.cache.delete(id);
      this.cache.set(id, kept);
      out.set(id, kept);
    }
    for (const [id, payload] of await findMessagePayloads(db, missing)) {
      const variables = readAcceptedPayload(payload).globalVariables ?? {};
      const globals = { variables, json: JSON.stringify(variables) };
      out.set(id, globals);
      this.keep(id, globals);
    }
    return out;
  }

  private keep(id: number, globals: GlobalVariables): void {
    if (globals.json.length > MAX_CHARS) return;
    this.cache.set(id, globals);
    this.cachedChars += globals.json.length;
    for (const [oldest, entry] of this.cache) {
      if (this.cache.size <= MAX_MESSAGES && this.cachedChars <= MAX_CHARS) break;
      this.cache.delete(oldest);
      this.cachedChars -= entry.json.length;
    }
  }
}
