// The method table: every API method, by name. Each group file owns its methods.
import { accountMethods } from './account.ts';
import { deliveryMethods } from './delivery.ts';
import { metaMethods } from './meta.ts';
import { reportsMethods } from './reports.ts';
import { sendMethods } from './send.ts';
import type { MethodDef } from './types.ts';
import { webhooksMethods } from './webhooks.ts';

export const ALL_METHODS: readonly MethodDef[] = [
  ...sendMethods,
  ...reportsMethods,
  ...accountMethods,
  ...deliveryMethods,
  ...webhooksMethods,
  ...metaMethods(() => ALL_METHODS),
];

export const METHODS: ReadonlyMap<string, MethodDef> = (() => {
  const map = new Map<string, MethodDef>();
  for (const m of ALL_METHODS) {
    if (map.has(m.name)) throw new Error(`method ${m.name} is defined twice`);
    map.set(m.name, m);
  }
  return map;
})();
