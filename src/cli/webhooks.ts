// webhook: add an endpoint (its signing secret is shown once), list them, send a test event,
// list deliveries (docs/cli.md). The test event is posted by the running service's dispatcher;
// --wait SECONDS waits for its outcome.
import { setTimeout as sleep } from 'node:timers/promises';
import { unhandled } from './command-args.ts';
import { print, withServices } from './output.ts';
import { isoTime, resolveAccount, table } from './scope.ts';
import { SWITCH, TEXT, type CliCommand, type CommandInput } from './types.ts';

async function webhook({ config, args, flags }: CommandInput): Promise<number> {
  const [sub, arg] = args;
  const json = flags.bool('json');
  const ops = await import('../operations/webhooks.ts');
  return withServices(config, async (services) => {
    const account = await resolveAccount(services, flags);
    switch (sub) {
      case 'add': {
        const events = flags.list('events') as (typeof ops.WEBHOOK_EVENTS)[number][];
        const created = await ops.createWebhook(services, account, {
          url: arg,
          uid: flags.text('uid'),
          events: events.length > 0 ? events : undefined,
          projectUid: flags.text('project'),
        });
        const out = { uid: created.webhook.uid, url: created.webhook.url, events: JSON.parse(created.webhook.events), project_uid: created.projectUid, secret: created.secret };
        print(json, out, `webhook ${out.uid} -> ${out.url}\nsigning secret (shown once): ${out.secret}`);
        return 0;
      }
      case 'list': {
        const out = (await ops.listWebhooks(services, account)).map((v) => ({
          uid: v.webhook.uid,
          url: v.webhook.url,
          status: v.webhook.status,
          events: JSON.parse(v.webhook.events) as string[],
          project_uid: v.projectUid,
        }));
        print(json, out, table(['UID', 'STATUS', 'PROJECT', 'EVENTS', 'URL'], out.map((w) => [w.uid, w.status, w.project_uid ?? 'all', w.events.join(','), w.url]), '(no webhooks)'));
        return 0;
      }
      case 'test': {
        const waitS = flags.int('wait', 0);
        const { sendWebhookTestEvent, readOutboundStates } = await import('../operations/webhook-test.ts');
        const queued = await sendWebhookTestEvent(services, account, arg);
        let state: string = 'pending';
        const deadline = Date.now() + waitS * 1000;
        while (state === 'pending' && Date.now() < deadline) {
          await sleep(250);
          state = (await readOutboundStates(services, [queued.requestId])).get(queued.requestId) ?? 'pending';
        }
        const out = { request_id: queued.requestId, webhook_uid: queued.webhookUid, url: queued.url, state };
        print(json, out, `test event queued as request ${out.request_id} for ${out.url}: ${state}${state === 'pending' && waitS === 0 ? ' (the running service posts it; --wait SECONDS waits for it)' : ''}`);
        return state === 'failed' || (waitS > 0 && state === 'pending') ? 1 : 0;
      }
      case 'deliveries': {
        const views = await ops.listDeliveries(services, account, {
          webhookUid: arg ?? flags.text('webhook'),
          status: flags.text('state') as 'pending' | 'delivered' | 'failed' | undefined,
          limit: flags.int('limit', 50),
        });
        const out = views.map((v) => ({
          id: v.request.id,
          kind: v.request.kind,
          webhook_uid: v.webhookUid,
          event: v.request.event_type,
          state: v.request.state,
          attempts: v.request.attempts,
          last_status_code: v.request.last_status_code,
          last_error: v.request.last_error,
          created_at: isoTime(v.request.created_at),
        }));
        print(
          json,
          out,
          table(['ID', 'STATE', 'EVENT', 'TRIES', 'CODE', 'CREATED', 'ERROR'], out.map((d) => [d.id, d.state, d.event ?? d.kind, d.attempts, d.last_status_code, d.created_at, d.last_error]), '(no deliveries)'),
        );
        return 0;
      }
      default:
        return unhandled(sub);
    }
  });
}

export const webhookCommands: CliCommand[] = [
  {
    name: 'webhook',
    usage: [
      'webhook add URL [--events a,b] [--project UID] [--uid UID] [--account UID] [--json]',
      'webhook list [--json]',
      'webhook test UID [--wait SECONDS] [--json]   queue a signed test event',
      'webhook deliveries [UID] [--state pending|delivered|failed] [--limit N] [--json]',
    ],
    description: 'Webhook endpoints of an account and the requests made to them.',
    flags: {
      json: SWITCH,
      account: TEXT,
      project: TEXT,
      events: { kind: 'list', oneOf: async () => (await import('../operations/webhooks.ts')).WEBHOOK_EVENTS },
      uid: TEXT,
      wait: { kind: 'int', min: 1, max: 600 },
      state: { kind: 'text', oneOf: ['pending', 'delivered', 'failed'] },
      limit: { kind: 'int', min: 1, max: 1000 },
      webhook: TEXT,
    },
    subcommands: { add: { args: ['URL'] }, list: {}, test: { args: ['UID'] }, deliveries: { args: ['[UID]'] } },
    run: webhook,
  },
];
