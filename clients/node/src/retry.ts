// Whether and how long the client waits before trying a call again. Apart from client.ts, which index.ts
// exports whole, so that the tests read the waits without the package offering them.
import type * as grpc from "@grpc/grpc-js";

import { errorDetails } from "./error_details";

// The backoff between attempts: 0.2 s, doubling, at most 2 s, the same in the three clients.
const FIRST_BACKOFF_MS = 200;
const MAX_BACKOFF_MS = 2_000;

/**
 * The wait after the attempt-th attempt failed with `err`: the backoff, jittered to half to all of
 * it, or the server's RetryInfo delay, jittered to it plus up to half again, when longer. Both are
 * jittered so that clients that failed together do not come back together: the server sends every
 * caller the same delay, and one left as it is brought them all back at once.
 */
export function retryWaitMs(attempt: number, err: grpc.ServiceError): number {
  const backoff = Math.min(FIRST_BACKOFF_MS * 2 ** (attempt - 1), MAX_BACKOFF_MS);
  const delay = errorDetails(err).retryInfo?.retryDelay;
  const delayMs = delay ? delay.seconds * 1000 + delay.nanos / 1e6 : 0;
  return Math.max(backoff / 2 + Math.random() * (backoff / 2), delayMs + Math.random() * (delayMs / 2));
}

/**
 * Whether `err` is the server's UNAVAILABLE for a backend that let its whole timeout pass (ErrorInfo
 * reason BACKEND_TIMEOUT): another attempt would wait as long again, and a frozen MySQL took 4 times
 * its timeout to the UNAVAILABLE.
 */
export function timedOut(err: grpc.ServiceError): boolean {
  return errorDetails(err).errorInfo?.reason === "BACKEND_TIMEOUT";
}
