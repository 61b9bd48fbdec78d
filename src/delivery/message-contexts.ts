// What delivery needs of a message, loaded once for all its transmissions: the accepted payload,
// the project and account it belongs to, whether tracking applies, and its composed MIME.
//
// The cache is bounded (entries and payload bytes), least recently used out first. A claimed batch
// is loaded with ONE query for the messages not cached yet. Composition is cached per distinct
// content: one build per message, or per distinct set of recipient variables when the content has
// {{variables}}; never cached when tracking makes every transmission's HTML its own. A message
// submitted over SMTP with tracking keeps its stored MIME cached (one decode and one DKIM key
// lookup per message) and each transmission gets its own copy with its HTML parts rewritten.
//
// Content that cannot be composed with its variables (a render past the bounds of
// docs/templates.md "Limits", a value the template cannot render, a header made invalid by a
// substitution) fails the same way every time: that failure is kept per variant like a
// composition, so a message to 10,000 recipients whose render exceeds the bound renders once, not
// 10,000 times, and every copy fails with the same RENDER_FAILED (or INVALID_HEADER). With
// tracking, where each transmission builds its own HTML, the render comes before the rewrite, so
// the first copy of a variant is built alone and the others reuse its failure. A failure that may
// pass (the database away while looking up the DKIM key) is not kept: the next copy tries again.
import type { Services } from '../services.ts';
import { parsePayload, type MessagePayload } from '../domain/message-payload.ts';
import { HeaderValueError } from '../domain/headers.ts';
import { mergeVariables, TemplateRenderError, type Variables } from '../domain/variables.ts';
import { recordComposition } from '../observability/attempts.ts';
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
  /**
   * accepted in sandbox mode (messages.sandbox, fixed at acceptance; docs/sandbox.md): the sandbox
   * adapter stands in for SMTP (delivery/sandbox.ts), whatever the project's setting is now
   */
  sandbox: boolean;
  /**
   * composed variants: '' for the shared content, else the recipient's variables JSON (variantKey);
   * a variant that cannot be composed stays here, rejected, for every copy to fail with
   */
  variants: Map<string, Promise<ComposedVariant>>;
  /**
   * With tracking (each transmission's HTML its own): the first build of each variant, settled:
   * rejected with its failure when the content cannot be composed, so the other copies fail
   * without rendering; fulfilled (they build their own) otherwise
   */
  tracked: Map<string, Promise<void>>;
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
          sandbox: Number(row.sandbox) === 1,
          variants: new Map(),
          tracked: new Map(),
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
      if (context.payload.html) return this.buildTracked(context, variantKey(context, t), variables, track);
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
    const key = variantKey(context, t);
    let variant = context.variants.get(key);
    if (!variant) {
      variant = this.build(context, variables);
      context.variants.set(key, variant);
      // Content that cannot be composed stays cached, failed (every copy fails alike); any other
      // failure is not: the next transmission tries again.
      variant.then(
        (v) => {
          context.bytes += v.mime.length;
          if (this.cache.get(context.id) === context) {
            this.bytes += v.mime.length;
            this.evict();
          }
        },
        (error) => {
          if (!cannotBeComposed(error)) context.variants.delete(key);
        },
      );
    }
    return variant;
  }

  /**
   * A tracked transmission's own build. The first copy of a variant builds first and alone; the
   * others wait for it, then fail with its failure if its content could not be composed (the
   * render, before the tracking rewrite, is the same for them: nothing is rendered again), or
   * build their own.
   */
  private buildTracked(context: MessageContext, key: string, variables: Variables, track: (html: string) => string): Promise<ComposedVariant> {
    const first = context.tracked.get(key);
    if (first) return first.then(() => this.build(context, variables, track));
    const built = this.build(context, variables, track);
    const settled = built.then(
      () => undefined,
      (error) => {
        if (cannotBeComposed(error)) throw error;
        // It may pass next time: the next copy builds first again.
        context.tracked.delete(key);
      },
    );
    settled.catch(() => {}); // its failure is each waiting copy's to handle
    context.tracked.set(key, settled);
    return built;
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
    let composed;
    try {
      composed = await composeMime(context.payload, variables, { date: new Date(context.payload.sendAt ?? context.createdAt), transformHtml });
    } catch (error) {
      if (cannotBeComposed(error)) recordComposition(this.services, 'failed');
      throw error;
    }
    recordComposition(this.services, 'composed');
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

/** The variant a transmission's content is: '' for content without {{variables}}, else its own variables as stored. */
function variantKey(context: MessageContext, t: ClaimedTransmission): string {
  return context.hasVariables ? (t.variables ?? '') : '';
}

/**
 * Whether a composition failed for its content and variables, the same way every time: a render
 * that cannot be done or passes the bounds (TemplateRenderError, docs/templates.md "Limits"), or a
 * header value made invalid by a substitution (HeaderValueError). Anything else may pass later.
 */
function cannotBeComposed(error: unknown): boolean {
  return error instanceof TemplateRenderError || error instanceof HeaderValueError;
}
