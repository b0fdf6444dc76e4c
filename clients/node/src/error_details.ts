// The google.rpc details every error of the service carries (the grpc-status-details-bin
// trailer), decoded: what Go reads with status.Convert(err).Details() and Python with
// grpc_status.rpc_status.from_call.
import type * as grpc from "@grpc/grpc-js";

import { BadRequest, ErrorInfo, RetryInfo } from "./gen/google/rpc/error_details";
import { Status } from "./gen/google/rpc/status";

export { BadRequest, BadRequest_FieldViolation, ErrorInfo, RetryInfo } from "./gen/google/rpc/error_details";

export interface ErrorDetails {
  /** INVALID_ARGUMENT: one violation per invalid field, naming it and its limit. */
  badRequest?: BadRequest;
  /** Every other error: a stable `reason` (TOKEN_EXPIRED, ROLE_REQUIRED, INTERNAL, ...) in the domain retrieval.v1. */
  errorInfo?: ErrorInfo;
  /** RESOURCE_EXHAUSTED and UNAVAILABLE: how long to wait before trying again. */
  retryInfo?: RetryInfo;
}

const TYPE_PREFIX = "type.googleapis.com/google.rpc.";

/**
 * The details of a failed call; empty when it has none (gRPC's own errors: a deadline passed on the
 * client, an unreachable server, a message over the size limit) or they cannot be read.
 */
export function errorDetails(err: grpc.ServiceError): ErrorDetails {
  const out: ErrorDetails = {};
  const raw = err.metadata?.get("grpc-status-details-bin")[0];
  if (!(raw instanceof Buffer)) return out;
  try {
    for (const detail of Status.decode(raw).details) {
      const kind = detail.typeUrl.startsWith(TYPE_PREFIX) ? detail.typeUrl.slice(TYPE_PREFIX.length) : "";
      if (kind === "BadRequest") out.badRequest = BadRequest.decode(detail.value);
      else if (kind === "ErrorInfo") out.errorInfo = ErrorInfo.decode(detail.value);
      else if (kind === "RetryInfo") out.retryInfo = RetryInfo.decode(detail.value);
    }
  } catch {
    // Not a google.rpc.Status (a proxy's trailer of the same name): the code and message still say what failed.
    return {};
  }
  return out;
}
