// The incoming SMTP edge: the bounce listener runs when --smtp-port is set (0 picks a free port).
import type { BackgroundFactory } from '../background.ts';
import { BounceListener } from './bounce-listener.ts';

export const createBounceListener: BackgroundFactory = (services) => {
  const { smtpPort, smtpHost } = services.config;
  if (smtpPort === null || smtpPort === undefined) return null;
  return new BounceListener(services, smtpPort, smtpHost);
};

export { BounceListener };
