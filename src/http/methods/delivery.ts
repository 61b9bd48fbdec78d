import { defineMethods } from './types.ts';

export const deliveryMethods = defineMethods([]);
