// Query a retrieval server as one user and print the contexts with their evidence.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/retrieval-platform/retrieval-service/clients/go/retrieval"
	retrievalv1 "github.com/retrieval-platform/retrieval-service/clients/go/retrieval/v1"
)

func main() {
	addr := flag.String("addr", "localhost:50051", "server address")
	user := flag.String("user", "", "x-user-id (empty: anonymous)")
	query := flag.String("query", "How does reciprocal rank fusion combine rankings?", "question")
	flag.Parse()

	client, err := retrieval.New(*addr, retrieval.WithIdentity(*user, ""))
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := client.Query(ctx, *query,
		retrieval.TopK(3), retrieval.Strategy(retrievalv1.Strategy_STRATEGY_HYBRID))
	if err != nil {
		log.Fatal(err) // a status error: status.Code(err) is codes.InvalidArgument, ...
	}
	for _, c := range resp.Contexts {
		fmt.Printf("%.3f %s %s\n", c.Score, c.DocumentId, c.Metadata.GetTitle())
		for _, child := range c.ChildChunks {
			fmt.Printf("    %.3f %s\n", child.Score, child.ChunkId)
		}
	}
	fmt.Printf("%s in %.1f ms\n", resp.Metrics.GetStrategyUsed(), resp.Metrics.GetTotalMs())
}
