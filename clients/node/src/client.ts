// A small promise-based client for retrieval.v1.RetrievalService on @grpc/grpc-js.
//
// It offers the calls of the Python and Go clients (query, search, health, ingest, delete) with
// the same options, on one channel that carries the caller's identity (x-user-id / x-user-role /
// x-user-groups, or a bearer token) and a default timeout, and tries query, search and health again
// after UNAVAILABLE. `service` is the generated stub for anything else, on the same channel with
// the same identity and timeout.
import { closeSync, openSync, readFileSync, readSync, type Stats, statSync } from "node:fs";
import { isIP } from "node:net";
import { basename, normalize } from "node:path";
import { createSecureContext } from "node:tls";

import * as grpc from "@grpc/grpc-js";

import {
  type DeepPartial,
  DeleteDocumentsResponse,
  DocumentInput,
  HealthResponse,
  IngestDocumentsResponse,
  Mode,
  QueryRequest,
  QueryResponse,
  RetrievalServiceClient,
  RetrievalServiceService,
  SearchResponse,
  Strategy,
} from "./gen/retrieval/v1/retrieval";
import { retryWaitMs, timedOut } from "./retry";

/** Bounds a call that has no deadline of its own (the Python client's default), except ingest and delete. */
export const DEFAULT_TIMEOUT_MS = 60_000;

/**
 * The furthest deadline a call is given, in milliseconds from now: 1e9 s (31 years), the Python
 * client's MAX_TIMEOUT_S. grpc-js cannot write one beyond 1e8 hours and throws outside the call's
 * promise, which never settles (or the process ends); no call tells the two apart.
 */
export const MAX_TIMEOUT_MS = 1e12;

/** How many times query, search and health are tried again after UNAVAILABLE: 4 attempts in all, as in the Python and Go clients. */
export const DEFAULT_RETRIES = 3;

// setTimeout fires at once when asked to wait longer.
const MAX_TIMER_MS = 2 ** 31 - 1;

// Only a call's own deadline bounds these: a large ingest takes minutes to embed, and one cut short
// by a default the caller never chose stops part-way with no answer saying what was stored.
const UNBOUNDED_BY_DEFAULT = new Set<string>([RetrievalServiceService.ingestDocuments.path, RetrievalServiceService.deleteDocuments.path]);

// Larger than the server's own limit (RETRIEVAL_MAX_MESSAGE_MB, 64 MiB by default), so the
// server is the one that says no; also the largest file documentFromFile reads.
const MAX_MESSAGE_BYTES = 256 * 1024 * 1024;

/** TLS settings. An empty object verifies the server against the system's roots. */
export interface TlsOptions {
  /** PEM bundle of the CAs that sign the server's certificate. Unset: the system roots. */
  caFile?: string;
  /** The client's PEM certificate and key, for mutual TLS. Unset: none. */
  certFile?: string;
  keyFile?: string;
  /** Overrides the name checked in the server's certificate. Unset: the target's host. */
  serverName?: string;
}

export interface ClientOptions {
  /** x-user-id (RETRIEVAL_AUTH_MODE none, or a gateway). Unset with no role: anonymous. */
  userId?: string;
  /** x-user-role: SUPER_ADMIN, ADMIN or USER. Unset: USER when userId is set. */
  role?: string;
  /** x-user-groups, comma-separated: the user's groups, for documents granted to `group:<name>`. A group holding a comma is refused, and anything but an array of strings is a TypeError. */
  groups?: string[];
  /** Sent as `authorization: Bearer <token>` (RETRIEVAL_AUTH_MODE jwt); needs TLS beyond loopback. */
  bearerToken?: string;
  /** Connect over TLS (mutual TLS with a client certificate). Unset: plaintext. */
  tls?: TlsOptions;
  /**
   * Bounds each call without a deadline, in milliseconds (default 60,000; 0 and Infinity: no bound,
   * beyond MAX_TIMEOUT_MS: MAX_TIMEOUT_MS; NaN or negative: a RangeError); not ingest and delete.
   */
  timeoutMs?: number;
  /**
   * How many times query, search and health are tried again after UNAVAILABLE, the server's answer
   * while a backend it needs is down, but not when its ErrorInfo reason is BACKEND_TIMEOUT, a backend
   * that let its whole timeout pass (default 3; 0: none); an integer from 0, else a RangeError.
   * Ingest and delete are never retried.
   */
  retries?: number;
  /** More @grpc/grpc-js channel options. */
  channelOptions?: grpc.ChannelOptions;
}

/**
 * Per call: a deadline (a Date or milliseconds since the epoch) wins over the default timeout.
 * Infinity is none, one beyond MAX_TIMEOUT_MS from now is MAX_TIMEOUT_MS from now, and NaN (an
 * invalid Date) rejects with a RangeError.
 */
export interface CallOptions {
  deadline?: Date | number;
}

export interface QueryOptions extends CallOptions {
  /** At most this many contexts (0 or unset: the server's default, 5). */
  topK?: number;
  /** Which retrieval legs run (unset: STRATEGY_SEMANTIC). */
  strategy?: Strategy;
  /** What the call produces (unset: MODE_RETRIEVAL_ONLY, contexts only; MODE_GENERATION adds a cited answer). */
  mode?: Mode;
  /** Let the semantic cache answer and store the call (unset: true). */
  useCache?: boolean;
  /** Restrict retrieval to these documents (anything but an array of strings rejects with a TypeError). */
  documentIds?: string[];
}

export interface SearchOptions extends CallOptions {
  /** At most this many results (0 or unset: the server's default, 5). */
  topK?: number;
}

/**
 * Whether every address `target` names is this machine's, read as gRPC reads it: "host:port",
 * "[v6]:port" or a host alone, after no scheme, "dns:" (with "//authority/" or not) or "ipv4:" /
 * "ipv6:" (a comma-separated list). Any other scheme is refused, and so is a target holding '?' or
 * '#': gRPC reads the host before them, where reading it after the last '/' took
 * "dns:///192.0.2.2:50051?x=/127.0.0.1" for loopback.
 */
function isLoopback(target: string): boolean {
  if (/[?#]/.test(target)) return false;
  let [scheme, path] = ["", target];
  const prefix = /^([A-Za-z][A-Za-z0-9+.-]*):(.*)$/s.exec(target);
  if (prefix && ["dns", "ipv4", "ipv6"].includes(prefix[1])) [scheme, path] = [prefix[1], prefix[2]];
  // "localhost:50051" is a host and its port, "unix:/run/x" or "passthrough:///x" a scheme.
  else if (prefix && !/^\d+$/.test(prefix[2])) return false;
  let authority = "";
  if (scheme && path.startsWith("//")) {
    const end = path.indexOf("/", 2);
    if (end < 0) return false;
    [authority, path] = [path.slice(2, end), path.slice(end + 1)];
  }
  if (scheme.startsWith("ipv") && authority) return false;
  return (scheme.startsWith("ipv") ? path.split(",") : [path]).every((address) => {
    const host = hostOf(address);
    // A DNS server the target names may answer anything for "localhost".
    return (host === "localhost" && !authority) || (isIP(host) === 4 && host.startsWith("127.")) || host === "::1";
  });
}

/** The host of "host:port", "[v6]:port", a host alone or a bare IPv6 address; "" when `address` is none of them. */
function hostOf(address: string): string {
  const bracketed = /^\[([^\]]*)\](?::\d+)?$/.exec(address);
  if (bracketed) return bracketed[1];
  const colons = address.split(":").length - 1;
  if (colons === 1) return /^([^:]*):\d+$/.exec(address)?.[1] ?? "";
  return address.startsWith("[") ? "" : address;
}

/**
 * `value` as gRPC metadata carries it: printable ASCII. Refused otherwise, as by the other clients,
 * with an error that does not repeat it (grpc-js's own error quotes the whole value, a token too).
 */
function metadataValue(name: string, value: string): string {
  if (!/^[\x20-\x7e]*$/.test(value)) {
    throw new Error(`the ${name} must be printable ASCII, as gRPC metadata is (a user id beyond ASCII travels in a token's claims)`);
  }
  return value;
}

/**
 * `value` checked to be an array of strings: a plain-JS caller's string went out as one id per
 * character (ts-proto iterates it), and `delete("doc")` deleted documents "d", "o" and "c".
 */
function stringArray(name: string, value: unknown): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) {
    throw new TypeError(`${name} must be an array of strings (got ${Array.isArray(value) ? "an array holding other values" : typeof value})`);
  }
  return value;
}

/** `groups` as the one x-user-groups value; a group the server would read as another (a comma, space around it, empty) is refused naming it. */
function groupsValue(groups: string[]): string {
  for (const group of groups) {
    metadataValue("group", group);
    if (group.includes(",")) {
      throw new Error(`a group must not contain a comma: x-user-groups separates groups with it (got ${JSON.stringify(group)})`);
    }
    // The server drops space and tab around a group, and an empty one, where a token's such group is refused.
    if (group === "" || group !== group.replace(/^[ \t]+|[ \t]+$/g, "")) {
      throw new Error(`a group must be a name without space around it (got ${JSON.stringify(group)})`);
    }
  }
  return groups.join(",");
}

/**
 * `topK` as the request's int32. Checked here since the encoder would fail a fraction or a number
 * beyond int32 as INTERNAL "Request message serialization failure"; the range it takes is the server's to say.
 */
function int32TopK(topK: number | undefined): number {
  if (topK === undefined) return 0;
  if (!Number.isInteger(topK) || topK < -(2 ** 31) || topK > 2 ** 31 - 1) {
    throw new RangeError(`topK must be an integer from -2147483648 to 2147483647 (got ${topK})`);
  }
  return topK;
}

/** `timeoutMs` as the client keeps it: 0 for no bound (Infinity too). */
function checkedTimeoutMs(timeoutMs: number): number {
  if (typeof timeoutMs !== "number" || Number.isNaN(timeoutMs) || timeoutMs < 0) {
    throw new RangeError(`timeoutMs must be 0 to Infinity milliseconds, 0 and Infinity for no deadline (got ${timeoutMs})`);
  }
  return timeoutMs === Infinity ? 0 : Math.min(timeoutMs, MAX_TIMEOUT_MS);
}

/** A call's own deadline in milliseconds since the epoch, at most MAX_TIMEOUT_MS from now (Infinity: none). */
function clampedDeadline(deadline: Date | number): number {
  const ms = deadline instanceof Date ? deadline.getTime() : deadline;
  if (typeof ms !== "number" || Number.isNaN(ms)) {
    throw new RangeError(`deadline must be a Date or milliseconds since the epoch (got ${String(deadline)})`);
  }
  return ms === Infinity ? ms : Math.min(ms, Date.now() + MAX_TIMEOUT_MS);
}

function channelCredentials(target: string, options: ClientOptions): grpc.ChannelCredentials {
  const tls = options.tls;
  if (!tls) {
    if (options.bearerToken && !isLoopback(target)) {
      throw new Error("a bearer token over plaintext would be readable on the network; set the tls option");
    }
    return grpc.credentials.createInsecure();
  }
  if (Boolean(tls.certFile) !== Boolean(tls.keyFile)) {
    throw new Error("mutual TLS needs both certFile and keyFile");
  }
  const ca = pemFile("caFile", tls.caFile, PEM_CERTIFICATE, CERTIFICATE);
  const key = pemFile("keyFile", tls.keyFile, PEM_PRIVATE_KEY, "private key (a -----BEGIN PRIVATE KEY----- block)");
  const cert = pemFile("certFile", tls.certFile, PEM_CERTIFICATE, CERTIFICATE);
  if (key && cert) {
    // The pair alone, so that its error is told as the pair's: OpenSSL's own ("error:05800074:x509
    // certificate routines::key values mismatch") named neither file.
    try {
      createSecureContext({ key, cert });
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      throw new Error(`tls.certFile ${tls.certFile} and tls.keyFile ${tls.keyFile} are not a certificate and its private key: ${reason}`, { cause: err });
    }
  }
  return grpc.credentials.createSsl(ca, key, cert);
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const CERTIFICATE = "certificate (a -----BEGIN CERTIFICATE----- block)";
// PKCS #8's, and the EC and RSA ones of OpenSSL's older format.
const PEM_PRIVATE_KEY = /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;

/**
 * The file at `path` (null when unset), which must hold a PEM block `block` matches: grpc-js took
 * any other file as no certificate, and every call failed UNAVAILABLE naming no file.
 */
function pemFile(option: string, path: string | undefined, block: RegExp, what: string): Buffer | null {
  if (!path) return null;
  const data = readFileSync(path);
  if (!block.test(data.toString("latin1"))) {
    throw new Error(`tls.${option} ${path} holds no PEM ${what}`);
  }
  return data;
}

export class RetrievalClient {
  /**
   * The generated stub on this client's channel. Its calls carry the client's identity (a key the
   * call's own metadata sets is left to it) and, without a deadline of their own, the default
   * timeout (not ingestDocuments and deleteDocuments); a call given interceptors of its own runs
   * those instead (grpc-js), and then carries neither.
   */
  readonly service: RetrievalServiceClient;
  // #private: util.inspect and console.log of a client would print a private field, and the token in it.
  readonly #identity: grpc.Metadata;
  private readonly timeoutMs: number;
  private readonly retries: number;

  constructor(target = "localhost:50051", options: ClientOptions = {}) {
    const channelOptions: grpc.ChannelOptions = {
      "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
      "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
      ...(options.tls?.serverName ? { "grpc.ssl_target_name_override": options.tls.serverName } : {}),
      ...options.channelOptions,
    };
    // Read from a file, a token ends in a newline.
    options = { ...options, bearerToken: options.bearerToken?.trim() };
    this.#identity = new grpc.Metadata();
    if (options.userId) this.#identity.set("x-user-id", metadataValue("user id", options.userId));
    if (options.role) this.#identity.set("x-user-role", metadataValue("role", options.role));
    const groups = options.groups === undefined ? "" : groupsValue(stringArray("groups", options.groups));
    if (groups) this.#identity.set("x-user-groups", groups);
    if (options.bearerToken) this.#identity.set("authorization", `Bearer ${metadataValue("token", options.bearerToken)}`);
    this.timeoutMs = checkedTimeoutMs(options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    this.retries = options.retries ?? DEFAULT_RETRIES;
    if (!Number.isInteger(this.retries) || this.retries < 0) {
      throw new RangeError(`retries must be an integer from 0 (got ${options.retries})`);
    }
    this.service = new RetrievalServiceClient(target, channelCredentials(target, options), { ...channelOptions, interceptors: [this.#carryIdentityAndTimeout] });
  }

  #carryIdentityAndTimeout: grpc.Interceptor = (options, nextCall) => {
    if (options.deadline === undefined && this.timeoutMs > 0 && !UNBOUNDED_BY_DEFAULT.has(options.method_definition.path)) {
      options = { ...options, deadline: Date.now() + this.timeoutMs };
    }
    return new grpc.InterceptingCall(nextCall(options), {
      start: (metadata, listener, next) => {
        for (const [key, value] of Object.entries(this.#identity.getMap())) {
          if (metadata.get(key).length === 0) metadata.set(key, value);
        }
        next(metadata, listener);
      },
    });
  };

  /** A copy of the identity metadata every call of this client sends. */
  metadata(): grpc.Metadata {
    return this.#identity.clone();
  }

  /**
   * A call's deadline: its own, else the client's default timeout unless `readOnly` is false (ingest
   * and delete). Fixed here, not by the stub's interceptor, for its retries to share it.
   */
  private callOptions(options: CallOptions, readOnly: boolean): Partial<grpc.CallOptions> {
    if (options.deadline !== undefined) return { deadline: clampedDeadline(options.deadline) };
    return readOnly && this.timeoutMs > 0 ? { deadline: Date.now() + this.timeoutMs } : {};
  }

  /**
   * One call, tried again after UNAVAILABLE when `readOnly`: a call that changes nothing answers
   * the second time as it would have the first, where a retried ingest reports the documents its
   * first attempt stored as replaced, and a retried delete the ones it deleted as not found.
   */
  private async unary<Req, Res>(
    method: (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => grpc.ClientUnaryCall,
    request: Req,
    options: CallOptions,
    readOnly = true,
  ): Promise<Res> {
    const callOptions = this.callOptions(options, readOnly);
    for (let attempt = 1; ; attempt++) {
      try {
        return await new Promise<Res>((resolve, reject) => {
          method.call(this.service, request, new grpc.Metadata(), callOptions, (err, res) => (err ? reject(err) : resolve(res)));
        });
      } catch (err) {
        const error = err as grpc.ServiceError;
        if (!readOnly || attempt > this.retries || error.code !== grpc.status.UNAVAILABLE || timedOut(error)) throw err;
        const wait = retryWaitMs(attempt, error);
        // No time would be left for the next attempt: the server's answer says more than a DEADLINE_EXCEEDED would.
        if (wait >= Number(callOptions.deadline ?? Infinity) - Date.now() || wait > MAX_TIMER_MS) throw err;
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
  }

  /** Runs the full retrieval pipeline; the best contexts come first. A topK that is no int32 integer rejects with a RangeError. */
  async query(query: string, options: QueryOptions = {}): Promise<QueryResponse> {
    const request = QueryRequest.fromPartial({
      query,
      topK: int32TopK(options.topK),
      strategy: options.strategy ?? Strategy.STRATEGY_UNSPECIFIED,
      mode: options.mode ?? Mode.MODE_UNSPECIFIED,
      useCache: options.useCache,
      filters: options.documentIds ? { documentIds: stringArray("documentIds", options.documentIds) } : undefined,
    });
    return this.unary(this.service.query, request, options);
  }

  /** One semantic search: flat, deduplicated chunk results, best first. A topK that is no int32 integer rejects with a RangeError. */
  async search(query: string, options: SearchOptions = {}): Promise<SearchResponse> {
    return this.unary(this.service.search, { query, topK: int32TopK(options.topK) }, options);
  }

  /** The service's status and one status per component. */
  health(options: CallOptions = {}): Promise<HealthResponse> {
    return this.unary(this.service.health, {}, options);
  }

  /**
   * Adds or replaces documents (needs ADMIN or SUPER_ADMIN); unreadable files come back in `errors`.
   * Only `options.deadline` bounds it, not the client's default timeout.
   */
  ingest(documents: DeepPartial<DocumentInput>[], options: CallOptions = {}): Promise<IngestDocumentsResponse> {
    return this.unary(this.service.ingestDocuments, { documents: documents.map((d) => DocumentInput.fromPartial(d)) }, options, false);
  }

  /**
   * Removes documents (needs ADMIN or SUPER_ADMIN). Only `options.deadline` bounds it, not the
   * client's default timeout. `documentIds` that is not an array of strings rejects with a TypeError.
   */
  async delete(documentIds: string[], options: CallOptions = {}): Promise<DeleteDocumentsResponse> {
    return this.unary(this.service.deleteDocuments, { documentIds: stringArray("documentIds", documentIds) }, options, false);
  }

  close(): void {
    this.service.close();
  }
}

/**
 * A file as an ingest input; its extension selects the server's loader. The file must be a regular
 * file of at most 256 MiB (what this client sends in one request; the server's own limit, 16 MiB by
 * default, may be lower), checked before it is read, as the Python client's document_from_file does.
 * Its source is the path normalized, as the other clients send it: the server finds a document
 * unchanged by what it stores, and ./docs/a.txt after docs/a.txt was another source.
 */
export function documentFromFile(path: string, fields: DeepPartial<DocumentInput> = {}): DocumentInput {
  return DocumentInput.fromPartial({
    filename: basename(path), content: readFile(path, MAX_MESSAGE_BYTES), source: normalize(path), ...fields,
  });
}

/**
 * The content of the regular file `path`, of at most `limit` bytes, both checked before it is read:
 * readFileSync waited for ever on a FIFO with no writer, and read a file of any size into memory
 * before the server refused it.
 */
function readFile(path: string, limit: number): Buffer {
  const stats = statSync(path);
  if (!stats.isFile()) throw new Error(`${path} is not a regular file (${fileKind(stats)})`);
  const tooLarge = `over the limit of ${limit} bytes (the largest request this client sends)`;
  if (stats.size > limit) throw new Error(`${path}: its size, ${stats.size} bytes, is ${tooLarge}`);
  const fd = openSync(path, "r");
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(limit + 1 - total, 1 << 20));
      const n = readSync(fd, chunk, 0, chunk.length, null);
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
      // It grew since.
      if (total > limit) throw new Error(`${path}: its size is ${tooLarge}`);
    }
    return Buffer.concat(chunks, total);
  } finally {
    closeSync(fd);
  }
}

/** What a file other than a regular one is, for the error that refuses it. */
function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return "a folder";
  if (stats.isFIFO()) return "a FIFO";
  if (stats.isSocket()) return "a socket";
  if (stats.isCharacterDevice()) return "a character device";
  if (stats.isBlockDevice()) return "a block device";
  return "of an unknown kind";
}
