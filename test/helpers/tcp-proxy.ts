// A TCP proxy on 127.0.0.1 in front of a real server, that a test can freeze: while frozen it
// accepts connections and reads what clients send, but forwards nothing either way and opens no
// connection upstream, as a server stopped with SIGSTOP or cut off by a partition would behave (no
// refusal, no reset, no answer). Thawed, it forwards what it held, in order, and carries on. The
// shared server behind it is never stopped.
import net from 'node:net';

export interface TcpProxy {
  readonly port: number;
  /** Stops forwarding (both ways) and connecting upstream. */
  freeze(): void;
  /** Forwards what was held and carries on. */
  thaw(): void;
  /** Connections accepted so far. */
  readonly accepted: number;
  close(): Promise<void>;
}

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  let frozen = false;
  let accepted = 0;
  let held: Array<() => void> = [];
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => s.destroy());
  };
  /** Runs `step` now, or when thawed if frozen (in the order held). */
  const whenThawed = (step: () => void) => (frozen ? held.push(step) : step());

  const server = net.createServer((client) => {
    accepted++;
    track(client);
    client.pause();
    whenThawed(() => {
      if (client.destroyed) return;
      const upstream = net.connect(target.port, target.host);
      track(upstream);
      const forward = (from: net.Socket, to: net.Socket) => {
        from.on('data', (chunk) => whenThawed(() => to.destroyed || to.write(chunk)));
        from.on('end', () => whenThawed(() => to.end()));
        from.on('close', () => whenThawed(() => to.destroy()));
      };
      forward(client, upstream);
      forward(upstream, client);
      client.resume();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    get accepted() {
      return accepted;
    },
    freeze() {
      frozen = true;
    },
    thaw() {
      frozen = false;
      const steps = held;
      held = [];
      for (const step of steps) step();
    },
    async close() {
      frozen = false;
      held = [];
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
