// What delivery needs of a message, loaded once for all its transmissions: the accepted payload,
// the project and account it belongs to, whether tracking applies, and its composed MIME.
//
// The cache is bounded (entries and payload bytes), least recently used out first. A claimed batch
// is loaded with ONE query for the messages not cached yet. Composition is cached per distinct
// content: one build per message, or per distinct set of recipient variables when the content has
// {{variables}}; never cached when tracking makes every transmission's HTML its own. A message
// submitted over SMTP with tracking keeps its stored MIME cached (one decode and one DKIM key
// lookup per message) and each transmission gets its own copy with its HTML parts rewritten.
import type { Services } from '../services.ts';
import { parsePayload, type MessagePayload } from '../domain/message-payload.ts';
import { mergeVariables, type Variables } from '../domain/variables.ts';
import type { ClaimedTransmission } from '../storage/delivery-queue.ts';
import { readMessagesForDelivery } from '../storage/messages.ts';
import { composeMime, payloadHasVariables, type ComposedMime } from '../domain/compose-mime.ts';
import { rewriteHtmlParts } from '../domain/rewrite-html-parts.ts';
import { messageExtensionNeeds, type ExtensionNeeds } from '../domain/smtp-extensions.ts';
import { findDkimKey, type DkimKey } from './dkim.ts';
import { applyTracking } from './tracking.ts';
import { trackingSigningKey } from '../domain/tracking-token.ts';
import { withFields } from '../domain/objects.ts';

export interface MessageContext {
  id: number;
  uid: string;
  uniqueId: string;
  projectId: number;
  projectUid: string;
  accountId: number;
  createdAt: number;
  payload: MessagePayload;
  hasVariables: boolean;
  tracking: boolean;
  /** the project's `sandbox` setting: the sandbox adapter stands in for SMTP (delivery/sandbox.ts) */
  sandbox: boolean;
  /** composed variants: '' for the shared content, else the recipient's variables JSON */
  variants: Map<string, Promise<ComposedVariant>>;
  bytes: number;
}

export interface ComposedVariant extends ComposedMime {
  dkim: DkimKey | null;
  /** what its bytes need of the receiving server (SMTPUTF8, 8BITMIME), found once per composition */
  needs: ExtensionNeeds;
}

// The messages a worker is delivering now, with their composed content: a batch's recipients and a
// large message's next batches find them here. Bounded tighter than the messages in flight could
// ask: a delivered single-recipient message is never read again, and what the cache keeps the
// heap keeps (measured: 5,000 / 128 MiB held a draining worker's peak RSS ~60 MiB higher and cost
// ~10% more CPU in GC than 1,000 / 32 MiB, docs/decisions/0003-performance.md).
const MAX_ENTRIES = 1_000;
const MAX_BYTES = 32 * 1024 * 1024;

export class MessageContexts {
  private readonly cache = new Map<number, MessageContext>();
  private bytes = 0;

  constructor(private readonly services: Services) {}

  /** Loads the contexts of a claimed batch (one query for those not cached). */
  async load(claimed: readonly ClaimedTransmission[]): Promise<Map<number, MessageContext>> {
    const out = new Map<number, MessageContext>();
    const missing = new Set<number>();
    for (const t of claimed) {
      const hit = this.cache.get(t.message_id);
      if (hit) {
        this.touch(hit);
        out.set(t.message_id, hit);
      } else missing.add(t.message_id);
    }
    if (missing.size > 0) {
      const rows = await readMessagesForDelivery(this.services.store.db, [...missing]);
      for (const row of rows) {
        const payload = parsePayload(row.payload);
        const context: MessageContext = {
          id: row.id,
          uid: row.uid,
          uniqueId: row.unique_id,
          projectId: row.project_id,
          projectUid: row.project_uid,
          accountId: row.account_id,
          createdAt: row.created_at,
          payload,
          hasVariables: payloadHasVariables(payload),
          tracking: this.trackingApplies(payload, row.settings),
          sandbox: projectSetting(row.settings, 'sandbox') === true,
          variants: new Map(),
          bytes: row.payload.length,
        };
        this.remember(context);
        out.set(row.id, context);
      }
    }
    return out;
  }

  /** The MIME of a transmission (without its To line), composed or from the cache. */
  compose(context: MessageContext, t: ClaimedTransmission): Promise<ComposedVariant> {
    const variables = this.variablesOf(context, t);
    if (context.tracking) {
      const target = { transmissionId: t.id, publicUrl: this.services.config.publicUrl };
      const signingKey = trackingSigningKey(this.services);
      const track = (html: string) => applyTracking(html, target, signingKey);
      // Composed content: the HTML is rewritten before it is encoded, one build per transmission.
      if (context.payload.html) return this.build(context, variables, track);
      // Submitted over SMTP (docs/smtp-submission.md): the stored MIME is shared and cached as for
      // any message; this transmission's copy has its text/html parts rewritten, the rest byte
      // for byte. DKIM signs the copy as sent (smtp-client.ts), after this.
      if (context.payload.raw !== undefined) {
        return this.shared(context, t, variables).then((shared) => {
          const mime = rewriteHtmlParts(shared.mime, track);
          // A rewritten part may have become quoted-printable: the copy's own bytes decide.
          return { ...shared, mime, needs: mime === shared.mime ? shared.needs : messageExtensionNeeds(mime) };
        });
      }
    }
    return this.shared(context, t, variables);
  }

  /** The composition every transmission with the same content shares, cached. */
  private shared(context: MessageContext, t: ClaimedTransmission, variables: Variables): Promise<ComposedVariant> {
    const key = context.hasVariables ? (t.variables ?? '') : '';
    let variant = context.variants.get(key);
    if (!variant) {
      variant = this.build(context, variables);
      context.variants.set(key, variant);
      // A failed build is not cached: the next transmission tries again.
      variant.then(
        (v) => {
          context.bytes += v.mime.length;
          if (this.cache.get(context.id) === context) {
            this.bytes += v.mime.length;
            this.evict();
          }
        },
        () => context.variants.delete(key),
      );
    }
    return variant;
  }

  /** Global variables overridden by the recipient's own. */
  variablesOf(context: MessageContext, t: ClaimedTransmission): Variables {
    let own: Variables | null = null;
    if (t.variables) {
      try {
        const parsed = JSON.parse(t.variables);
        if (parsed && typeof parsed === 'object') own = parsed as Variables;
      } catch {
        own = null;
      }
    }
    return mergeVariables(context.payload.variables ?? {}, own);
  }

  private async build(context: MessageContext, variables: Variables, transformHtml?: (html: string) => string): Promise<ComposedVariant> {
    // The Date header: acceptance, or the send_at of a scheduled message (docs/api/send-message.md).
    const composed = await composeMime(context.payload, variables, { date: new Date(context.payload.sendAt ?? context.createdAt), transformHtml });
    const dkim = composed.fromAddress ? await findDkimKey(this.services, context.accountId, composed.fromAddress) : null;
    return withFields(composed, { dkim, needs: messageExtensionNeeds(composed.mime) });
  }

  /** payload.tracking decides; null/absent defers to the project's settings; config.tracking gates all. */
  private trackingApplies(payload: MessagePayload, settingsJson: string): boolean {
    if (!this.services.config.tracking) return false;
    if (payload.tracking === true) return true;
    if (payload.tracking === false) return false;
    try {
      return (JSON.parse(settingsJson) as { tracking?: unknown }).tracking === true;
    } catch {
      return false;
    }
  }

  private touch(context: MessageContext): void {
    this.cache.delete(context.id);
    this.cache.set(context.id, context);
  }

  private remember(context: MessageContext): void {
    const old = this.cache.get(context.id);
    if (old) this.bytes -= old.bytes;
    this.cache.set(context.id, context);
    this.bytes += context.bytes;
    this.evict();
  }

  private evict(): void {
    while (this.cache.size > MAX_ENTRIES || (this.bytes > MAX_BYTES && this.cache.size > 1)) {
      const oldest = this.cache.values().next().value as MessageContext;
      this.cache.delete(oldest.id);
      this.bytes -= oldest.bytes;
    }
  }
}

/** One key of a project's settings JSON (operations/projects.ts declares them); undefined when unreadable. */
function projectSetting(settingsJson: string, key: string): unknown {
  try {
    return (JSON.parse(settingsJson) as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}
