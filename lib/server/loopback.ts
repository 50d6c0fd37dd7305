/**
 * Whether an address, a host to listen on, or a request's Host header stays on this machine.
 * @internal
 * @module
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

/** Whether an IP address (v4, v6 or v4-mapped v6) is a loopback address. @internal */
export function isLoopbackAddress(address: string): boolean {
  const ip = address.toLowerCase().replace(/^::ffff:/, '');
  if (isIP(ip) === 4) return ip.startsWith('127.');
  return ip === '::1' || ip === '0:0:0:0:0:0:0:1';
}

/**
 * Whether listening on `host` accepts connections from this machine only: a loopback address, or a name whose
 * every address is one (`localhost`). A name that does not resolve is not loopback; listening on it fails anyway.
 * @internal
 */
export async function isLoopbackHost(host: string): Promise<boolean> {
  if (isIP(host)) return isLoopbackAddress(host);
  try {
    const addresses = await lookup(host, { all: true });
    return addresses.length > 0 && addresses.every((a) => isLoopbackAddress(a.address));
  } catch {
    return false;
  }
}

/**
 * Whether a request's Host header names this machine: `localhost` (or a `.localhost` name) or a loopback address,
 * with any port. A web page can make a browser send requests to 127.0.0.1 under its own domain name (DNS rebinding);
 * its Host header then carries that name, and this check refuses it.
 * @internal
 */
export function isLoopbackHostHeader(header: string | undefined): boolean {
  if (!header) return false;
  const host = header.startsWith('[') ? header.slice(1, header.indexOf(']')) : header.replace(/:\d*$/, '');
  const name = host.toLowerCase();
  return name === 'localhost' || name.endsWith('.localhost') || (isIP(name) !== 0 && isLoopbackAddress(name));
}
