// The SMTP edges: the bounce listener runs when --bounce-port is set, SMTP submission when
// --submission-port or --submission-tls-port is (0 picks a free port).
import type { BackgroundFactory } from '../services.ts';
import { BounceListener } from './bounce-listener.ts';
import { SubmissionListener } from './submission.ts';

export const createBounceListener: BackgroundFactory = (services) => {
  const { bouncePort, bounceHost } = services.config;
  if (bouncePort === null || bouncePort === undefined) return null;
  return new BounceListener(services, bouncePort, bounceHost);
};

export const createSubmissionListener: BackgroundFactory = (services) => {
  const { submissionPort, submissionTlsPort, submissionHost } = services.config;
  const port = submissionPort ?? null;
  const tlsPort = submissionTlsPort ?? null;
  if (port === null && tlsPort === null) return null;
  return new SubmissionListener(services, { port, tlsPort, host: submissionHost });
};

export { BounceListener, SubmissionListener };
