import { defineMethods } from './types.ts';

export const webhooksMethods = defineMethods([]);
