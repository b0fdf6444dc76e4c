// The live tests call the server that tests/contract/test_clients.py starts and seeds
// (RETRIEVAL_TEST_TARGET); the TLS test runs a small TLS server of its own, since it checks what
// the client puts on the wire.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { inspect } from "node:util";
import { after, before, beforeEach, describe, test } from "node:test";

import * as grpc from "@grpc/grpc-js";

import { Any } from "../src/gen/google/protobuf/any";
import { Status } from "../src/gen/google/rpc/status";
import {
  Access,
  documentFromFile,
  ErrorInfo,
  errorDetails,
  MAX_TIMEOUT_MS,
  Mode,
  RetrievalClient,
  RetrievalServiceService,
  RetryInfo,
  ServingStatus,
  Strategy,
  StreamQueryRequest,
  type ClientOptions,
  type HealthResponse,
  type QueryResponse,
} from "../src";
import { retryWaitMs } from "../src/retry";

const target = process.env.RETRIEVAL_TEST_TARGET;
const live = { skip: target ? false : "RETRIEVAL_TEST_TARGET is not set: tests/contract/test_clients.py starts a seeded server and sets it" };

const clients: RetrievalClient[] = [];
function client(options: ClientOptions = {}, at = target): RetrievalClient {
  const c = new RetrievalClient(at, options);
  clients.push(c);
  return c;
}
after(() => clients.forEach((c) => c.close()));

const ids = (r: QueryResponse) => r.contexts.map((c) => c.documentId);
const code = (p: Promise<unknown>) =>
  p.then(
    () => grpc.status.OK,
    (err: grpc.ServiceError) => err.code,
  );

describe("against the live server", live, () => {
  test("health", async () => {
    const r = await client().health();
    assert.ok([ServingStatus.SERVING_STATUS_SERVING, ServingStatus.SERVING_STATUS_DEGRADED].includes(r.status), `status ${r.status}`);
    assert.ok(r.version);
    assert.ok(r.components.some((c) => c.name === "vector_store" && c.status === ServingStatus.SERVING_STATUS_SERVING));
  });

  test("query, hybrid", async () => {
    const r = await client().query("How does reciprocal rank fusion combine rankings?", {
      topK: 2,
      strategy: Strategy.STRATEGY_HYBRID,
      useCache: false,
    });
    assert.ok(r.contexts.length >= 1 && r.contexts.length <= 2, `${r.contexts.length} contexts`);
    const top = r.contexts[0];
    assert.equal(top.documentId, "fusion-guide");
    assert.equal(top.metadata?.title, "Reciprocal rank fusion");
    assert.ok(top.childChunks.length > 0 && top.childChunks[0].chunkId.startsWith(`${top.parentChunkId}c`));
    const m = r.metrics!;
    assert.equal(m.strategyUsed, Strategy.STRATEGY_HYBRID);
    assert.equal(m.cacheHit, false);
    assert.ok(m.stages.length > 0 && m.totalMs > 0);
  });

  test("search", async () => {
    const r = await client().search("semantic cache entries expire", { topK: 3 });
    assert.ok(r.results.length >= 1 && r.results.length <= 3);
    assert.equal(r.results[0].documentId, "cache-notes");
    assert.ok([...r.results[0].text].length <= 800);
  });

  test("private documents follow the identity", async () => {
    const q = "salary review raise";
    const anonymous = await client().query(q, { topK: 5, strategy: Strategy.STRATEGY_HYBRID });
    assert.ok(!ids(anonymous).includes("alice-salary"), "an anonymous caller read alice's private document");
    const alice = await client({ userId: "alice", role: "USER" }).query(q, { topK: 5, strategy: Strategy.STRATEGY_HYBRID });
    assert.equal(ids(alice)[0], "alice-salary");
  });

  test("ingest, query, delete as an admin", async () => {
    const doc = {
      documentId: "node-client-note",
      filename: "note.txt",
      title: "Node client note",
      content: Buffer.from("The Node client ingested this note about marigold kites."),
      access: Access.ACCESS_PUBLIC,
    };
    assert.equal(await code(client({ userId: "bob", role: "USER" }).ingest([doc])), grpc.status.PERMISSION_DENIED);
    const admin = client({ userId: "ops", role: "ADMIN" });
    const ingested = await admin.ingest([doc]);
    assert.deepEqual(ingested.errors, []);
    assert.equal(ingested.documents.length, 1);
    assert.ok(ingested.documents[0].childChunks >= 1);
    const found = await admin.query("marigold kites", { documentIds: ["node-client-note"], useCache: false });
    assert.deepEqual(ids(found), ["node-client-note"]);
    assert.deepEqual((await admin.delete(["node-client-note"])).deleted, ["node-client-note"]);
    const again = await admin.delete(["node-client-note"]);
    assert.deepEqual([again.deleted, again.notFound], [[], ["node-client-note"]]);
  });

  test("an invalid argument names the field", async () => {
    await assert.rejects(client().query("anything", { topK: 1000 }), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
      assert.match(err.details, /top_k/);
      const violations = errorDetails(err).badRequest?.fieldViolations ?? [];
      assert.deepEqual(violations.map((v) => v.field), ["top_k"]);
      assert.match(violations[0].description, /between 1 and 100/);
      return true;
    });
  });

  test("an error's reason is read from its details", async () => {
    await assert.rejects(client({ userId: "bob", role: "USER" }).delete(["fusion-guide"]), (err: grpc.ServiceError) => {
      assert.equal(err.code, grpc.status.PERMISSION_DENIED);
      assert.deepEqual(errorDetails(err), { errorInfo: { reason: "ROLE_REQUIRED", domain: "retrieval.v1", metadata: {} } });
      return true;
    });
  });

  test("deadlines", async () => {
    assert.equal(await code(client().search("rank fusion", { topK: 1, deadline: Date.now() - 1000 })), grpc.status.DEADLINE_EXCEEDED);
    assert.equal(await code(client({ timeoutMs: 1 }).search("rank fusion", { topK: 1 })), grpc.status.DEADLINE_EXCEEDED);
    // A call's deadline wins over the client's default timeout.
    const r = await client({ timeoutMs: 1 }).search("rank fusion", { topK: 1, deadline: Date.now() + 60_000 });
    assert.equal(r.results.length, 1);
  });
});

test("a bearer token needs TLS beyond loopback", () => {
  for (const loopback of [
    "127.0.0.1:50051", "localhost:50051", "localhost", "[::1]:50051", "::1", "dns:///localhost:50051",
    "dns:127.0.0.1:50051", "dns://192.0.2.53/127.0.0.1:50051", "ipv4:127.0.0.1:50051,127.0.0.2:50051", "ipv6:[::1]:50051",
  ]) {
    new RetrievalClient(loopback, { bearerToken: "t" }).close();
  }
  // gRPC reads the host before '?' or '#', so each of these names 192.0.2.2.
  for (const remote of [
    "retrieval.example:50051", "192.0.2.2:50051", "dns:///192.0.2.2:50051?x=/127.0.0.1", "dns:///192.0.2.2:50051#/localhost",
    "ipv4:192.0.2.2:50051#/localhost", "passthrough:///192.0.2.2:50051?/localhost", "ipv4:127.0.0.1:50051,192.0.2.2:50051",
    "dns://192.0.2.53/localhost:50051", "dns:///192.0.2.2/127.0.0.1:50051", "localhost:50051@192.0.2.2", "unix:///run/retrieval.sock",
  ]) {
    assert.throws(() => new RetrievalClient(remote, { bearerToken: "t" }), /a bearer token over plaintext/, remote);
  }
});

test("groups travel as one x-user-groups value, and a group holding a comma is refused", () => {
  const c = new RetrievalClient("127.0.0.1:50051", { userId: "dave", groups: ["eng", "hr"] });
  try {
    assert.deepEqual(c.metadata().get("x-user-groups"), ["eng,hr"]);
  } finally {
    c.close();
  }
  // The server splits the value on commas: "eng,hr" would be two groups.
  assert.throws(
    () => new RetrievalClient("127.0.0.1:50051", { userId: "dave", groups: ["sales", "eng,hr"] }),
    (err: Error) => err.message === 'a group must not contain a comma: x-user-groups separates groups with it (got "eng,hr")',
  );
  assert.throws(() => new RetrievalClient("127.0.0.1:50051", { groups: ["zoë"] }), (err: Error) => /group must be printable ASCII/.test(err.message) && !err.message.includes("zoë"));
  // The server drops space around a group, and an empty one: " hr" read hr's documents.
  for (const group of [" hr", "hr ", ""]) {
    assert.throws(
      () => new RetrievalClient("127.0.0.1:50051", { userId: "dave", groups: [group] }),
      (err: Error) => err.message === `a group must be a name without space around it (got ${JSON.stringify(group)})`,
    );
  }
});

test("identity values are what gRPC metadata carries, and the token is never shown", () => {
  // The same rule as the other clients, refused without repeating the value (grpc-js's error quoted it).
  assert.throws(() => new RetrievalClient("127.0.0.1:50051", { userId: "zoë" }), (err: Error) => /printable ASCII/.test(err.message) && !err.message.includes("zoë"));
  assert.throws(
    () => new RetrievalClient("127.0.0.1:50051", { bearerToken: "secret\u0000token" }),
    (err: Error) => /token must be printable ASCII/.test(err.message) && !err.message.includes("secret"),
  );
  const c = new RetrievalClient("127.0.0.1:50051", { bearerToken: "secret-token" });
  try {
    assert.ok(!inspect(c, { depth: 10, showHidden: true }).includes("secret-token"));
    assert.equal(c.metadata().get("authorization")[0], "Bearer secret-token");
  } finally {
    c.close();
  }
});

describe("against a local server that records each call", () => {
  let server: grpc.Server;
  let addr: string;
  const calls: { method: string; deadline: grpc.Deadline; request: unknown; metadata: grpc.Metadata }[] = [];
  before(async () => {
    server = new grpc.Server();
    const recorded =
      <Res>(method: string, response: Res) =>
      (call: grpc.ServerUnaryCall<unknown, Res>, callback: grpc.sendUnaryData<Res>) => {
        calls.push({ method, deadline: call.getDeadline(), request: call.request, metadata: call.metadata });
        callback(null, response);
      };
    server.addService(RetrievalServiceService, {
      query: recorded("query", { contexts: [], suggestions: [] }),
      search: recorded("search", { results: [], resultsNotListed: 0 }),
      ingestDocuments: recorded("ingestDocuments", { documents: [], errors: [], documentsNotListed: 0 }),
      deleteDocuments: recorded("deleteDocuments", { deleted: [], notFound: [] }),
      streamQuery: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        calls.push({ method: "streamQuery", deadline: call.getDeadline(), request: call.request, metadata: call.metadata });
        call.end();
      },
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    addr = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());
  beforeEach(() => calls.splice(0));

  // Go and TypeScript had no way to ask for an answer (MODE_GENERATION) but through the stub.
  test("a query's mode is sent, and unset is the server's default", async () => {
    const c = client({}, addr);
    await c.query("aardvarks", { mode: Mode.MODE_GENERATION });
    await c.query("aardvarks");
    assert.deepEqual(
      calls.map((x) => (x.request as { mode: Mode }).mode),
      [Mode.MODE_GENERATION, Mode.MODE_UNSPECIFIED],
    );
  });

  // A 1 MB ingest of 16 documents took longer than the default 60 s and was cut short, storing part
  // of the batch with no answer saying which: only a call's own deadline bounds ingest and delete.
  test("the default timeout does not bound an ingest or a delete, only a call's own deadline does", async () => {
    const c = client({}, addr);
    await c.ingest([{ documentId: "d", filename: "d.txt", content: Buffer.from("Aardvarks dig.") }]);
    await c.delete(["d"]);
    await c.search("aardvarks");
    await c.ingest([], { deadline: Date.now() + 60_000 });
    await c.delete([], { deadline: Date.now() + 60_000 });
    const unbounded = calls.map((x) => [x.method, x.deadline === Infinity]);
    assert.deepEqual(unbounded, [["ingestDocuments", true], ["deleteDocuments", true], ["search", false], ["ingestDocuments", false], ["deleteDocuments", false]]);
  });

  // They went out anonymous and unbounded, where Go's Service() carries both.
  test("calls through `service` carry the identity and the default timeout", async () => {
    const alice = client({ userId: "alice", role: "USER" }, addr);
    const unary = <Res>(call: (cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown) =>
      new Promise<Res>((resolve, reject) => call((err, res) => (err ? reject(err) : resolve(res))));
    await unary((cb) => alice.service.search({ query: "aardvarks", topK: 0 }, cb));
    await unary((cb) => alice.service.deleteDocuments({ documentIds: [] }, cb));
    // The call's own metadata (not doubled) and deadline, none here.
    await unary((cb) => alice.service.search({ query: "aardvarks", topK: 0 }, alice.metadata(), { deadline: Infinity }, cb));
    const stream = alice.service.streamQuery(StreamQueryRequest.fromPartial({ query: { query: "aardvarks" } }));
    await new Promise((resolve, reject) => stream.on("data", () => {}).on("end", resolve).on("error", reject));
    assert.deepEqual(
      calls.map((x) => [x.method, x.metadata.get("x-user-id"), x.metadata.get("x-user-role"), x.deadline === Infinity]),
      [
        ["search", ["alice"], ["USER"], false],
        ["deleteDocuments", ["alice"], ["USER"], true],
        ["search", ["alice"], ["USER"], true],
        ["streamQuery", ["alice"], ["USER"], false],
      ],
    );
  });

  // A plain-JS caller's string went out as one id per character: delete("doc") deleted "d", "o" and "c".
  test("document ids and groups that are no array of strings are a TypeError naming them, and are not sent", async () => {
    const c = client({}, addr);
    for (const [value, got] of [["doc", "string"], [["doc", 7], "an array holding other values"], [null, "object"]]) {
      const refused = (name: string) => (err: Error) => err instanceof TypeError && err.message === `${name} must be an array of strings (got ${got})`;
      await assert.rejects(c.delete(value as string[]), refused("documentIds"));
      assert.throws(() => new RetrievalClient(addr, { groups: value as string[] }), refused("groups"));
      // A null filter is no filter, as an unset one.
      if (value !== null) await assert.rejects(c.query("aardvarks", { documentIds: value as string[] }), refused("documentIds"));
    }
    assert.equal(calls.length, 0);
  });

  // grpc-js threw "Deadline is too far in the future" outside the call's promise, which never settled.
  test("a far deadline is MAX_TIMEOUT_MS from now, Infinity none, and NaN or a negative timeout a RangeError", async () => {
    await client({ timeoutMs: Number.MAX_SAFE_INTEGER }, addr).search("aardvarks");
    await client({}, addr).query("aardvarks", { deadline: new Date(8.64e15) });
    await client({ timeoutMs: Infinity }, addr).search("aardvarks");
    await client({}, addr).search("aardvarks", { deadline: Infinity });
    const bounds = calls.map((x) => x.deadline === Infinity || Number(x.deadline) - Date.now() <= MAX_TIMEOUT_MS);
    const unbounded = calls.map((x) => x.deadline === Infinity);
    assert.deepEqual([bounds, unbounded], [[true, true, true, true], [false, false, true, true]]);
    for (const timeoutMs of [NaN, -1]) {
      assert.throws(
        () => new RetrievalClient(addr, { timeoutMs }),
        (err: Error) => err instanceof RangeError && err.message === `timeoutMs must be 0 to Infinity milliseconds, 0 and Infinity for no deadline (got ${timeoutMs})`,
      );
    }
    await assert.rejects(client({}, addr).health({ deadline: new Date(NaN) }), (err: Error) => err instanceof RangeError && /^deadline must be a Date or milliseconds since the epoch/.test(err.message));
    assert.equal(calls.length, 4);
  });

  // 1.5 or 2 ** 31 failed as INTERNAL "Request message serialization failure".
  test("a topK that is no int32 integer is a RangeError naming it, and is not sent", async () => {
    const c = client({}, addr);
    for (const topK of [1.5, 2 ** 31, -(2 ** 31) - 1, NaN, Infinity]) {
      const refused = (err: Error) => err instanceof RangeError && err.message === `topK must be an integer from -2147483648 to 2147483647 (got ${topK})`;
      await assert.rejects(c.query("aardvarks", { topK }), refused);
      await assert.rejects(c.search("aardvarks", { topK }), refused);
    }
    assert.equal(calls.length, 0);
    // Integers of int32 are sent, for the server to say which it takes.
    await c.query("aardvarks", { topK: 2 ** 31 - 1 });
    await c.search("aardvarks", { topK: -(2 ** 31) });
    assert.deepEqual(
      calls.map((x) => (x.request as { topK: number }).topK),
      [2 ** 31 - 1, -(2 ** 31)],
    );
  });
});

/** An UNAVAILABLE as the server sends it: ErrorInfo `reason`, and a RetryInfo of `retryDelayMs` unless undefined. */
function unavailable(reason: string, retryDelayMs?: number): grpc.ServiceError {
  const details = [Any.fromPartial({ typeUrl: "type.googleapis.com/google.rpc.ErrorInfo", value: Buffer.from(ErrorInfo.encode({ reason, domain: "retrieval.v1", metadata: {} }).finish()) })];
  if (retryDelayMs !== undefined) {
    const retryDelay = { seconds: Math.floor(retryDelayMs / 1000), nanos: (retryDelayMs % 1000) * 1e6 };
    details.push(Any.fromPartial({ typeUrl: "type.googleapis.com/google.rpc.RetryInfo", value: Buffer.from(RetryInfo.encode({ retryDelay }).finish()) }));
  }
  const metadata = new grpc.Metadata();
  metadata.set("grpc-status-details-bin", Buffer.from(Status.encode({ code: grpc.status.UNAVAILABLE, message: "down", details }).finish()));
  return Object.assign(new Error("down"), { code: grpc.status.UNAVAILABLE, details: "down", metadata });
}

describe("against a local server answering UNAVAILABLE while a backend is down", () => {
  let server: grpc.Server;
  let addr: string;
  // Each method's first `failures` calls are answered as the server does while a backend is down
  // (`reason` BACKEND_TIMEOUT: frozen, without a RetryInfo).
  let failures = 0;
  let retryDelayMs = 0;
  let reason = "BACKEND_UNAVAILABLE";
  const attempts: Record<string, number[]> = {};
  before(async () => {
    server = new grpc.Server();
    const flaky =
      <Res>(method: string, response: Res) =>
      (_call: grpc.ServerUnaryCall<unknown, Res>, callback: grpc.sendUnaryData<Res>) => {
        const seen = (attempts[method] ??= []);
        seen.push(performance.now());
        if (seen.length > failures) return callback(null, response);
        callback(unavailable(reason, reason === "BACKEND_TIMEOUT" ? undefined : retryDelayMs));
      };
    server.addService(RetrievalServiceService, {
      query: flaky("query", { contexts: [], suggestions: [] }),
      search: flaky("search", { results: [], resultsNotListed: 0 }),
      health: flaky("health", { status: ServingStatus.SERVING_STATUS_SERVING, components: [], version: "flaky" }),
      ingestDocuments: flaky("ingestDocuments", { documents: [], errors: [], documentsNotListed: 0 }),
      deleteDocuments: flaky("deleteDocuments", { deleted: [], notFound: [] }),
    });
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    addr = `127.0.0.1:${port}`;
  });
  after(() => server.forceShutdown());
  beforeEach(() => {
    Object.keys(attempts).forEach((method) => delete attempts[method]);
    reason = "BACKEND_UNAVAILABLE";
  });
  const tries = (method: string) => attempts[method]?.length ?? 0;

  // The client gave up at once.
  test("query, search and health are tried again, after the RetryInfo delay", async () => {
    [failures, retryDelayMs] = [1, 300];
    const c = client({}, addr);
    await c.query("aardvarks");
    await c.search("aardvarks");
    await c.health();
    for (const method of ["query", "search", "health"]) {
      assert.equal(tries(method), 2, method);
      // Less a millisecond: libuv times its timers in whole milliseconds.
      assert.ok(attempts[method][1] - attempts[method][0] >= retryDelayMs - 1, `${method}: the second attempt came before the RetryInfo delay`);
    }
  });

  test("retries stop at their count and before the deadline", async () => {
    [failures, retryDelayMs] = [100, 1];
    assert.equal(await code(client({}, addr).query("aardvarks")), grpc.status.UNAVAILABLE);
    assert.equal(tries("query"), 4);
    assert.equal(await code(client({ retries: 0 }, addr).search("aardvarks")), grpc.status.UNAVAILABLE);
    assert.equal(tries("search"), 1);
    // A RetryInfo delay beyond the deadline: no wait that could only end in DEADLINE_EXCEEDED.
    [failures, retryDelayMs] = [1, 3_600_000];
    assert.equal(await code(client({}, addr).health()), grpc.status.UNAVAILABLE);
    assert.equal(tries("health"), 1);
    for (const retries of [-1, 1.5]) {
      assert.throws(() => new RetrievalClient(addr, { retries }), (err: Error) => err instanceof RangeError && err.message === `retries must be an integer from 0 (got ${retries})`);
    }
  });

  // The server let a frozen backend's whole timeout pass: each attempt waited as long again, 4
  // times MYSQL_TIMEOUT_S to the UNAVAILABLE. It says so with BACKEND_TIMEOUT and no RetryInfo.
  test("a backend that timed out is not asked again", async () => {
    [failures, reason] = [100, "BACKEND_TIMEOUT"];
    const c = client({}, addr);
    assert.equal(await code(c.query("aardvarks")), grpc.status.UNAVAILABLE);
    assert.equal(await code(c.health()), grpc.status.UNAVAILABLE);
    assert.deepEqual([tries("query"), tries("health")], [1, 1]);
  });

  // A retried ingest would report the documents its first attempt stored as replaced, a retried
  // delete the ones it deleted as not found.
  test("ingest and delete are not retried", async () => {
    [failures, retryDelayMs] = [1, 1];
    const c = client({}, addr);
    assert.equal(await code(c.ingest([{ documentId: "d", filename: "d.txt", content: Buffer.from("Aardvarks dig.") }])), grpc.status.UNAVAILABLE);
    assert.equal(await code(c.delete(["d"])), grpc.status.UNAVAILABLE);
    assert.deepEqual([tries("ingestDocuments"), tries("deleteDocuments")], [1, 1]);
  });
});

// Every UNAVAILABLE of the server asks for 1 s, longer than the first backoffs: each wait was
// exactly 1 s, and clients that failed together came back together, in lockstep.
test("the server's retry delay is jittered, never shortened", () => {
  const err = unavailable("BACKEND_UNAVAILABLE", 1000);
  const waits = Array.from({ length: 20 }, () => [1, 2, 3].map((attempt) => retryWaitMs(attempt, err))).flat();
  for (const wait of waits) assert.ok(wait >= 1000 && wait <= 1500, `a wait of ${wait} ms, want 1,000 to 1,500`);
  assert.ok(new Set(waits).size > 1, `every wait was ${waits[0]} ms: clients that failed together come back together`);
});

// readFileSync waited for ever on a FIFO with no writer, and read a file of any size into memory
// before the server refused it.
test("documentFromFile reads regular files within the limit only", () => {
  const dir = mkdtempSync(join(tmpdir(), "retrieval-files-"));
  try {
    writeFileSync(join(dir, "note.md"), "# Aardvarks");
    const doc = documentFromFile(join(dir, "note.md"), { documentId: "note" });
    assert.deepEqual([doc.filename, doc.content.toString(), doc.documentId], ["note.md", "# Aardvarks", "note"]);
    // The source was the path as typed: ./docs/a.txt after docs/a.txt was embedded again.
    mkdirSync(join(dir, "sub"));
    for (const spelled of [`${dir}/./note.md`, `${dir}//note.md`, `${dir}/sub/../note.md`]) {
      assert.equal(documentFromFile(spelled).source, join(dir, "note.md"), spelled);
    }
    execFileSync("mkfifo", [join(dir, "fifo")]);
    // Sparse: refused from its size, before a byte is read.
    const limit = 256 * 1024 * 1024;
    writeFileSync(join(dir, "large.txt"), "");
    truncateSync(join(dir, "large.txt"), limit + 1);
    for (const [path, message] of [
      [dir, `${dir} is not a regular file (a folder)`],
      [join(dir, "fifo"), `${join(dir, "fifo")} is not a regular file (a FIFO)`],
      [join(dir, "large.txt"), `its size, ${limit + 1} bytes, is over the limit of ${limit} bytes`],
    ]) {
      assert.throws(() => documentFromFile(path), (err: Error) => err.message.includes(message), path);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("TLS", () => {
  let dir: string;
  const path = (name: string) => join(dir, name);
  let server: grpc.Server | undefined;
  let addr: string;

  // A CA, a server certificate for 127.0.0.1 and a client certificate, made with openssl.
  function issue(name: string, extensions: string): void {
    const ssl = (...args: string[]) => execFileSync("openssl", args, { stdio: "pipe" });
    ssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path(`${name}-key.pem`), "-out", path(`${name}.csr`), "-subj", `/CN=${name}`);
    writeFileSync(path(`${name}.ext`), extensions);
    ssl("x509", "-req", "-in", path(`${name}.csr`), "-CA", path("ca.pem"), "-CAkey", path("ca-key.pem"), "-CAcreateserial", "-days", "1", "-extfile", path(`${name}.ext`), "-out", path(`${name}.pem`));
  }

  before(async () => {
    // Made here, not when the suite is declared: after() removes it even when this fails (no openssl).
    dir = mkdtempSync(join(tmpdir(), "retrieval-tls-"));
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", path("ca-key.pem"), "-out", path("ca.pem"), "-days", "1", "-subj", "/CN=test CA"], { stdio: "pipe" });
    issue("server", "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    issue("client", "extendedKeyUsage=clientAuth\n");
    const echo = new grpc.Server();
    server = echo;
    // Health answers with the identity metadata it received.
    echo.addService(RetrievalServiceService, {
      health: (call: grpc.ServerUnaryCall<unknown, HealthResponse>, callback: grpc.sendUnaryData<HealthResponse>) => {
        const components = ["x-user-id", "x-user-role", "x-user-groups", "authorization"].map((name) => ({
          name,
          status: ServingStatus.SERVING_STATUS_SERVING,
          detail: call.metadata.get(name).join(","),
        }));
        callback(null, { status: ServingStatus.SERVING_STATUS_SERVING, components, version: "echo" });
      },
    });
    const credentials = grpc.ServerCredentials.createSsl(
      readFileSync(path("ca.pem")),
      [{ private_key: readFileSync(path("server-key.pem")), cert_chain: readFileSync(path("server.pem")) }],
      true,
    );
    const port = await new Promise<number>((resolve, reject) =>
      echo.bindAsync("127.0.0.1:0", credentials, (err, p) => (err ? reject(err) : resolve(p))),
    );
    addr = `127.0.0.1:${port}`;
  });
  // The folder holds private keys: it goes with the server.
  after(() => {
    server?.forceShutdown();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("mutual TLS carries the identity and the token", async () => {
    const c = new RetrievalClient(addr, {
      tls: { caFile: path("ca.pem"), certFile: path("client.pem"), keyFile: path("client-key.pem") },
      userId: "alice",
      role: "ADMIN",
      groups: ["eng", "Sales EMEA"],
      bearerToken: "token-123\n", // as read from a file
    });
    try {
      const r = await c.health();
      assert.deepEqual(Object.fromEntries(r.components.map((x) => [x.name, x.detail])), {
        "x-user-id": "alice",
        "x-user-role": "ADMIN",
        "x-user-groups": "eng,Sales EMEA",
        authorization: "Bearer token-123",
      });
    } finally {
      c.close();
    }
  });

  test("without a client certificate the handshake fails", async () => {
    const c = new RetrievalClient(addr, { tls: { caFile: path("ca.pem") }, timeoutMs: 10_000 });
    try {
      assert.equal(await code(c.health()), grpc.status.UNAVAILABLE);
    } finally {
      c.close();
    }
  });

  test("a client certificate needs its key", () => {
    assert.throws(() => new RetrievalClient(addr, { tls: { certFile: path("client.pem") } }), /certFile and keyFile/);
  });

  // OpenSSL's bare "error:05800074:x509 certificate routines::key values mismatch" named no file.
  test("a client certificate and a key that are no pair are refused, naming both files", () => {
    const tls = { caFile: path("ca.pem"), certFile: path("client.pem"), keyFile: path("server-key.pem") };
    assert.throws(() => new RetrievalClient(addr, { tls }), (err: Error) => {
      assert.ok(err.message.startsWith(`tls.certFile ${path("client.pem")} and tls.keyFile ${path("server-key.pem")} are not a certificate and its private key: `), err.message);
      assert.match(err.message, /key values mismatch/);
      return true;
    });
  });

  // grpc-js took such a file as no certificate, and every call failed UNAVAILABLE naming no file.
  test("a CA, certificate or key file holding no PEM block of its kind is refused, naming it", () => {
    writeFileSync(path("bogus.pem"), "not a certificate\n");
    const good = { caFile: path("ca.pem"), certFile: path("client.pem"), keyFile: path("client-key.pem") };
    for (const option of ["caFile", "certFile", "keyFile"] as const) {
      const expected = `tls.${option} ${path("bogus.pem")} holds no PEM ${option === "keyFile" ? "private key" : "certificate"}`;
      assert.throws(() => new RetrievalClient(addr, { tls: { ...good, [option]: path("bogus.pem") } }), (err: Error) => err.message.startsWith(expected), option);
    }
    // A key is no certificate.
    assert.throws(() => new RetrievalClient(addr, { tls: { ...good, caFile: path("client-key.pem") } }), /tls\.caFile .* holds no PEM certificate/);
  });
});
