/**
 * The request plane carries one request envelope from a caller to a chosen worker instance and
 * brings back an acknowledgement; responses travel separately (the call-home response plane).
 * `tcp` and `nats` implement these two interfaces with Dynamo's framing.
 */

/** Where an instance receives requests, as written in its discovery record (`transport`). */
export type Transport = { tcp: string } | { nats_tcp: string };

/**
 * Accepts one request for an endpoint. Returns `''` to acknowledge (processing continues in the
 * background) or an error text that the plane sends back instead, e.g.
 * `Server unavailable: worker is shutting down`.
 */
export type RequestAcceptor = (envelope: Uint8Array, headers: Record<string, string>) => string;

/** The worker side: serves endpoints of this process. */
export interface RequestPlaneServer {
  readonly kind: 'tcp' | 'nats';
  /** Starts serving `endpoint` of `namespace/component`; returns the transport to advertise. */
  serve(namespace: string, component: string, endpoint: string, instanceId: bigint, accept: RequestAcceptor): Promise<Transport>;
  /** Stops serving one endpoint; later requests for it are refused as unavailable. */
  unserve(namespace: string, component: string, endpoint: string): Promise<void>;
  /** Stops everything. */
  close(): Promise<void>;
}

/** The caller side: delivers envelopes to instances. */
export interface RequestPlaneClient {
  readonly kind: 'tcp' | 'nats';
  /**
   * Sends one envelope to `transport` and resolves once the worker acknowledged it. Rejects with
   * `CannotConnect` (unreachable, timed out, or the worker refused the request; the message
   * carries the worker's text) so the caller can try another instance.
   */
  send(transport: Transport, envelope: Uint8Array, headers: Record<string, string>): Promise<void>;
  /** Closes pooled connections. */
  close(): Promise<void>;
}
