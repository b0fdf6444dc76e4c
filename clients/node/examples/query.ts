// Query a retrieval server as one user and print the contexts with their evidence.
import { parseArgs } from "node:util";

import { RetrievalClient, Strategy, strategyToJSON } from "@retrieval-platform/retrieval-client";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      addr: { type: "string", default: "localhost:50051" },
      user: { type: "string", default: "" }, // x-user-id (empty: anonymous)
      query: { type: "string", default: "How does reciprocal rank fusion combine rankings?" },
    },
  });
  const client = new RetrievalClient(values.addr, { userId: values.user });
  try {
    const response = await client.query(values.query!, {
      topK: 3,
      strategy: Strategy.STRATEGY_HYBRID,
      deadline: Date.now() + 30_000,
    });
    for (const c of response.contexts) {
      console.log(`${c.score.toFixed(3)} ${c.documentId} ${c.metadata?.title}`);
      for (const child of c.childChunks) {
        console.log(`    ${child.score.toFixed(3)} ${child.chunkId}`);
      }
    }
    const m = response.metrics!;
    console.log(`${strategyToJSON(m.strategyUsed)} in ${m.totalMs.toFixed(1)} ms`);
  } finally {
    client.close();
  }
}

main().catch((err) => {
  console.error(err.message); // a ServiceError: err.code is status.INVALID_ARGUMENT, ...
  process.exitCode = 1;
});
