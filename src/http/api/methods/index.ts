// The method table: every API method, by name. Each group file owns its methods.
import { accountMethods } from './account.ts';
import { deliveryMethods } from './delivery.ts';
import { metaMethods } from './meta.ts';
import { reportsMethods } from './reports.ts';
import { sendMethods } from './send.ts';
import { cancelMessageMethods } from './cancel-message.ts';
import { templatePreviewMethods } from './template-preview.ts';
import { messageContentMethods } from './message-content.ts';
import { compileArgs, type ArgsChecker } from '../schema.ts';
import type { MethodDef } from './types.ts';
import { webhooksMethods } from './webhooks.ts';

export const ALL_METHODS: readonly MethodDef[] = [
  ...sendMethods,
  ...cancelMessageMethods, ...templatePreviewMethods,
  ...reportsMethods,
  ...accountMethods,
  ...deliveryMethods,
  ...webhooksMethods,
  ...messageContentMethods,
  ...metaMethods(() => ALL_METHODS),
];

/** A method with its arguments schema compiled (once, here). */
export interface CompiledMethod extends MethodDef {
  readonly checkArgs: ArgsChecker['check'];
}

export const METHODS: ReadonlyMap<string, CompiledMethod> = (() => {
  const map = new Map<string, CompiledMethod>();
  for (const m of ALL_METHODS) {
    if (map.has(m.name)) throw new Error(`method ${m.name} is defined twice`);
    map.set(m.name, { ...m, checkArgs: compileArgs(m.args).check });
  }
  return map;
})();
