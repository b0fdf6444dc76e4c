package retrieval_test

// The live tests call the server that tests/contract/test_clients.py starts and seeds
// (RETRIEVAL_TEST_TARGET); TestTLS runs a small TLS server of its own, since it checks what the
// client puts on the wire.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/retrieval-platform/retrieval-service/clients/go/retrieval"
	retrievalv1 "github.com/retrieval-platform/retrieval-service/clients/go/retrieval/v1"
)

func target(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("RETRIEVAL_TEST_TARGET")
	if addr == "" {
		t.Skip("RETRIEVAL_TEST_TARGET is not set: tests/contract/test_clients.py starts a seeded server and sets it")
	}
	return addr
}

func dial(t *testing.T, opts ...retrieval.Option) *retrieval.Client {
	t.Helper()
	c, err := retrieval.New(target(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func documentIDs(resp *retrievalv1.QueryResponse) []string {
	var ids []string
	for _, c := range resp.Contexts {
		ids = append(ids, c.DocumentId)
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestHealth(t *testing.T) {
	resp, err := dial(t).Health(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != retrievalv1.ServingStatus_SERVING_STATUS_SERVING && resp.Status != retrievalv1.ServingStatus_SERVING_STATUS_DEGRADED {
		t.Fatalf("status %s", resp.Status)
	}
	if resp.Version == "" {
		t.Error("no version")
	}
	for _, c := range resp.Components {
		if c.Name == "vector_store" && c.Status == retrievalv1.ServingStatus_SERVING_STATUS_SERVING {
			return
		}
	}
	t.Errorf("no serving vector_store in %v", resp.Components)
}

func TestQueryHybrid(t *testing.T) {
	resp, err := dial(t).Query(ctx(t), "How does reciprocal rank fusion combine rankings?",
		retrieval.TopK(2), retrieval.Strategy(retrievalv1.Strategy_STRATEGY_HYBRID), retrieval.UseCache(false))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(resp.Contexts); n == 0 || n > 2 {
		t.Fatalf("%d contexts, want 1 or 2", n)
	}
	top := resp.Contexts[0]
	if top.DocumentId != "fusion-guide" || top.Metadata.GetTitle() != "Reciprocal rank fusion" {
		t.Errorf("top context %s %q", top.DocumentId, top.Metadata.GetTitle())
	}
	if len(top.ChildChunks) == 0 || !strings.HasPrefix(top.ChildChunks[0].ChunkId, top.ParentChunkId+"c") {
		t.Errorf("children %v of %s", top.ChildChunks, top.ParentChunkId)
	}
	m := resp.Metrics
	if m.StrategyUsed != retrievalv1.Strategy_STRATEGY_HYBRID || m.CacheHit || len(m.Stages) == 0 || m.TotalMs <= 0 {
		t.Errorf("metrics %v", m)
	}
}

func TestSearch(t *testing.T) {
	resp, err := dial(t).Search(ctx(t), "semantic cache entries expire", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) == 0 || len(resp.Results) > 3 || resp.Results[0].DocumentId != "cache-notes" {
		t.Fatalf("results %v", resp.Results)
	}
	if len([]rune(resp.Results[0].Text)) > 800 {
		t.Error("text not trimmed to 800 characters")
	}
}

func TestPrivateDocumentsFollowTheIdentity(t *testing.T) {
	const q = "salary review raise"
	anonymous, err := dial(t).Query(ctx(t), q, retrieval.TopK(5), retrieval.Strategy(retrievalv1.Strategy_STRATEGY_HYBRID))
	if err != nil {
		t.Fatal(err)
	}
	if contains(documentIDs(anonymous), "alice-salary") {
		t.Fatal("an anonymous caller read alice's private document")
	}
	alice, err := dial(t, retrieval.WithIdentity("alice", "USER")).Query(ctx(t), q, retrieval.TopK(5), retrieval.Strategy(retrievalv1.Strategy_STRATEGY_HYBRID))
	if err != nil {
		t.Fatal(err)
	}
	if ids := documentIDs(alice); len(ids) == 0 || ids[0] != "alice-salary" {
		t.Fatalf("alice got %v", ids)
	}
}

func TestIngestQueryDeleteAsAdmin(t *testing.T) {
	doc := &retrievalv1.DocumentInput{
		DocumentId: "go-client-note", Filename: "note.txt", Title: "Go client note",
		Content: []byte("The Go client ingested this note about heliotrope lanterns."),
		Access:  retrievalv1.Access_ACCESS_PUBLIC,
	}
	_, err := dial(t, retrieval.WithIdentity("bob", "USER")).Ingest(ctx(t), doc)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a USER ingesting: %v, want PermissionDenied", err)
	}
	admin := dial(t, retrieval.WithIdentity("ops", "ADMIN"))
	ingested, err := admin.Ingest(ctx(t), doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(ingested.Errors) != 0 || len(ingested.Documents) != 1 || ingested.Documents[0].ChildChunks < 1 {
		t.Fatalf("ingest %v", ingested)
	}
	found, err := admin.Query(ctx(t), "heliotrope lanterns", retrieval.DocumentIDs("go-client-note"), retrieval.UseCache(false))
	if err != nil {
		t.Fatal(err)
	}
	if ids := documentIDs(found); len(ids) != 1 || ids[0] != "go-client-note" {
		t.Fatalf("filtered query found %v", ids)
	}
	deleted, err := admin.Delete(ctx(t), "go-client-note")
	if err != nil || len(deleted.Deleted) != 1 {
		t.Fatalf("delete: %v %v", deleted, err)
	}
	again, err := admin.Delete(ctx(t), "go-client-note")
	if err != nil || len(again.NotFound) != 1 || len(again.Deleted) != 0 {
		t.Fatalf("second delete: %v %v", again, err)
	}
}

func TestStreamsThroughServiceCarryTheIdentityAndTheTimeout(t *testing.T) {
	alice := dial(t, retrieval.WithIdentity("alice", "USER"))
	stream, err := alice.Service().StreamQuery(ctx(t), &retrievalv1.StreamQueryRequest{Query: &retrievalv1.QueryRequest{
		Query: "salary review raise", TopK: 5, Strategy: retrievalv1.Strategy_STRATEGY_HYBRID,
	}})
	if err != nil {
		t.Fatal(err)
	}
	var final *retrievalv1.QueryResponse
	for {
		msg, err := stream.Recv()
		if err != nil {
			break
		}
		if r := msg.GetResponse(); r != nil {
			final = r
		}
	}
	if final == nil || len(final.Contexts) == 0 || final.Contexts[0].DocumentId != "alice-salary" {
		t.Fatalf("alice's stream got %v: the identity did not travel with it", final)
	}
	hurried := dial(t, retrieval.WithTimeout(time.Nanosecond))
	expired, err := hurried.Service().StreamQuery(context.Background(), &retrievalv1.StreamQueryRequest{Query: &retrievalv1.QueryRequest{Query: "rank fusion"}})
	if err == nil {
		_, err = expired.Recv()
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a stream without a context deadline: %v, want the default timeout's DeadlineExceeded", err)
	}
}

func TestInvalidArgumentNamesTheField(t *testing.T) {
	_, err := dial(t).Query(ctx(t), "anything", retrieval.TopK(1000))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "top_k") {
		t.Fatalf("%v, want InvalidArgument naming top_k", err)
	}
}

func TestDeadlines(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := dial(t).Search(expired, "rank fusion", 1); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("expired context: %v", err)
	}
	if _, err := dial(t, retrieval.WithTimeout(time.Nanosecond)).Search(context.Background(), "rank fusion", 1); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("default timeout: %v", err)
	}
	// A context deadline wins over the client's default timeout.
	if _, err := dial(t, retrieval.WithTimeout(time.Nanosecond)).Search(ctx(t), "rank fusion", 1); err != nil {
		t.Errorf("context deadline: %v", err)
	}
}

// deadlineServer says, for each call it answers, whether the call came with a deadline.
type deadlineServer struct {
	retrievalv1.UnimplementedRetrievalServiceServer
	hadDeadline chan bool
}

func (s deadlineServer) record(ctx context.Context) {
	_, ok := ctx.Deadline()
	s.hadDeadline <- ok
}

func (s deadlineServer) Search(ctx context.Context, _ *retrievalv1.SearchRequest) (*retrievalv1.SearchResponse, error) {
	s.record(ctx)
	return &retrievalv1.SearchResponse{}, nil
}

func (s deadlineServer) IngestDocuments(ctx context.Context, _ *retrievalv1.IngestDocumentsRequest) (*retrievalv1.IngestDocumentsResponse, error) {
	s.record(ctx)
	return &retrievalv1.IngestDocumentsResponse{}, nil
}

func (s deadlineServer) DeleteDocuments(ctx context.Context, _ *retrievalv1.DeleteDocumentsRequest) (*retrievalv1.DeleteDocumentsResponse, error) {
	s.record(ctx)
	return &retrievalv1.DeleteDocumentsResponse{}, nil
}

// A 1 MB ingest of 16 documents took longer than the default 60 s and was cut short, storing part
// of the batch with no answer saying which: only the context's deadline bounds Ingest and Delete.
func TestDefaultTimeoutDoesNotBoundIngestOrDelete(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := deadlineServer{hadDeadline: make(chan bool, 1)}
	server := grpc.NewServer()
	retrievalv1.RegisterRetrievalServiceServer(server, srv)
	go server.Serve(lis)
	t.Cleanup(server.Stop)
	c, err := retrieval.New(lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	calls := map[string]func(context.Context) error{
		"Ingest": func(ctx context.Context) error {
			_, err := c.Ingest(ctx, &retrievalv1.DocumentInput{DocumentId: "d"})
			return err
		},
		"Delete": func(ctx context.Context) error { _, err := c.Delete(ctx, "d"); return err },
		"Search": func(ctx context.Context) error { _, err := c.Search(ctx, "aardvarks", 1); return err },
	}
	hadDeadline := func(name string, ctx context.Context) bool {
		if err := calls[name](ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return <-srv.hadDeadline
	}
	for name, want := range map[string]bool{"Ingest": false, "Delete": false, "Search": true} {
		if got := hadDeadline(name, context.Background()); got != want {
			t.Errorf("%s without a context deadline: the call had a deadline %v, want %v", name, got, want)
		}
		if !hadDeadline(name, ctx(t)) {
			t.Errorf("%s with a context deadline: the call had none", name)
		}
	}
}

// flakyServer answers the first `failures` calls of each method as the server does while a
// backend it needs is down (UNAVAILABLE, ErrorInfo BACKEND_UNAVAILABLE, RetryInfo retryDelay), or,
// when reason is BACKEND_TIMEOUT, frozen (that reason and no RetryInfo), and records when each call came.
type flakyServer struct {
	retrievalv1.UnimplementedRetrievalServiceServer
	failures   int
	reason     string
	retryDelay time.Duration
	mu         sync.Mutex
	calls      map[string][]time.Time
}

func (s *flakyServer) answer(method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[method] = append(s.calls[method], time.Now())
	if len(s.calls[method]) > s.failures {
		return nil
	}
	if s.reason == "BACKEND_TIMEOUT" {
		st, err := status.New(codes.Unavailable, "metadata store timed out").WithDetails(&errdetails.ErrorInfo{Reason: s.reason, Domain: "retrieval.v1"})
		if err != nil {
			panic(err)
		}
		return st.Err()
	}
	st, err := status.New(codes.Unavailable, "metadata store unavailable").WithDetails(
		&errdetails.ErrorInfo{Reason: "BACKEND_UNAVAILABLE", Domain: "retrieval.v1"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(s.retryDelay)})
	if err != nil {
		panic(err)
	}
	return st.Err()
}

func (s *flakyServer) attempts(method string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.calls[method]...)
}

func (s *flakyServer) Query(context.Context, *retrievalv1.QueryRequest) (*retrievalv1.QueryResponse, error) {
	return &retrievalv1.QueryResponse{}, s.answer("Query")
}

func (s *flakyServer) Search(context.Context, *retrievalv1.SearchRequest) (*retrievalv1.SearchResponse, error) {
	return &retrievalv1.SearchResponse{}, s.answer("Search")
}

func (s *flakyServer) Health(context.Context, *retrievalv1.HealthRequest) (*retrievalv1.HealthResponse, error) {
	return &retrievalv1.HealthResponse{}, s.answer("Health")
}

func (s *flakyServer) IngestDocuments(context.Context, *retrievalv1.IngestDocumentsRequest) (*retrievalv1.IngestDocumentsResponse, error) {
	return &retrievalv1.IngestDocumentsResponse{}, s.answer("Ingest")
}

func (s *flakyServer) DeleteDocuments(context.Context, *retrievalv1.DeleteDocumentsRequest) (*retrievalv1.DeleteDocumentsResponse, error) {
	return &retrievalv1.DeleteDocumentsResponse{}, s.answer("Delete")
}

// serveFlaky starts a flakyServer and returns it with a client of it.
func serveFlaky(t *testing.T, failures int, retryDelay time.Duration, opts ...retrieval.Option) (*flakyServer, *retrieval.Client) {
	t.Helper()
	return serveFlakyFor(t, "BACKEND_UNAVAILABLE", failures, retryDelay, opts...)
}

// serveFlakyFor is serveFlaky with the failures' reason.
func serveFlakyFor(t *testing.T, reason string, failures int, retryDelay time.Duration, opts ...retrieval.Option) (*flakyServer, *retrieval.Client) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &flakyServer{failures: failures, reason: reason, retryDelay: retryDelay, calls: map[string][]time.Time{}}
	server := grpc.NewServer()
	retrievalv1.RegisterRetrievalServiceServer(server, srv)
	go server.Serve(lis)
	t.Cleanup(server.Stop)
	c, err := retrieval.New(lis.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return srv, c
}

// The server answers UNAVAILABLE with a RetryInfo while a backend is down; the client gave up at once.
func TestQuerySearchAndHealthAreRetriedAfterUnavailable(t *testing.T) {
	const delay = 300 * time.Millisecond
	srv, c := serveFlaky(t, 1, delay)
	calls := map[string]func() error{
		"Query":  func() error { _, err := c.Query(ctx(t), "aardvarks"); return err },
		"Search": func() error { _, err := c.Search(ctx(t), "aardvarks", 1); return err },
		"Health": func() error { _, err := c.Health(ctx(t)); return err },
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v, want its second attempt's answer", name, err)
		}
		at := srv.attempts(name)
		if len(at) != 2 {
			t.Fatalf("%s: %d attempts, want 2", name, len(at))
		}
		if waited := at[1].Sub(at[0]); waited < delay {
			t.Errorf("%s: the second attempt came %v after the first, before the RetryInfo delay %v", name, waited, delay)
		}
	}
	// Through the generated stub too.
	if _, err := c.Service().Query(ctx(t), &retrievalv1.QueryRequest{Query: "aardvarks"}); err != nil || len(srv.attempts("Query")) != 3 {
		t.Errorf("Service().Query: %v, %d attempts in all, want its answer after 3", err, len(srv.attempts("Query")))
	}
}

func TestRetriesStopAtTheirCountAndBeforeTheDeadline(t *testing.T) {
	srv, c := serveFlaky(t, 100, time.Millisecond)
	if _, err := c.Query(ctx(t), "aardvarks"); status.Code(err) != codes.Unavailable || len(srv.attempts("Query")) != 4 {
		t.Errorf("always unavailable: %v after %d attempts, want Unavailable after 4", err, len(srv.attempts("Query")))
	}
	srv, c = serveFlaky(t, 100, time.Millisecond, retrieval.WithRetries(0))
	if _, err := c.Search(ctx(t), "aardvarks", 1); status.Code(err) != codes.Unavailable || len(srv.attempts("Search")) != 1 {
		t.Errorf("WithRetries(0): %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Search")))
	}
	// A RetryInfo delay beyond the deadline: no wait that could only end in DEADLINE_EXCEEDED.
	srv, c = serveFlaky(t, 1, time.Hour)
	if _, err := c.Health(ctx(t)); status.Code(err) != codes.Unavailable || len(srv.attempts("Health")) != 1 {
		t.Errorf("retry delay past the deadline: %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Health")))
	}
	if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithRetries(-1)); err == nil || !strings.Contains(err.Error(), "WithRetries takes 0 or more retries (got -1)") {
		t.Errorf("WithRetries(-1): %v", err)
	}
}

// Every UNAVAILABLE of the server asks for 1 s, longer than the first backoffs: each wait was
// exactly 1 s, and clients that failed together came back together, in lockstep.
func TestTheServersRetryDelayIsJitteredNeverShortened(t *testing.T) {
	st, err := status.New(codes.Unavailable, "metadata store unavailable").WithDetails(
		&errdetails.ErrorInfo{Reason: "BACKEND_UNAVAILABLE", Domain: "retrieval.v1"},
		&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[time.Duration]bool{}
	for i := 0; i < 20; i++ {
		for attempt := 1; attempt <= retrieval.DefaultRetries; attempt++ {
			wait := retrieval.RetryWait(attempt, st.Err())
			if wait < time.Second || wait > 1500*time.Millisecond {
				t.Fatalf("attempt %d: a wait of %v, want 1 s to 1.5 s", attempt, wait)
			}
			seen[wait] = true
		}
	}
	if len(seen) < 2 {
		t.Errorf("every wait was %v: clients that failed together come back together", seen)
	}
}

// The server let a frozen backend's whole timeout pass: each attempt waited as long again, 4 times
// MYSQL_TIMEOUT_S to the UNAVAILABLE. It says so with BACKEND_TIMEOUT and no RetryInfo.
func TestABackendThatTimedOutIsNotAskedAgain(t *testing.T) {
	srv, c := serveFlakyFor(t, "BACKEND_TIMEOUT", 100, 0)
	if _, err := c.Query(ctx(t), "aardvarks"); status.Code(err) != codes.Unavailable || len(srv.attempts("Query")) != 1 {
		t.Errorf("Query: %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Query")))
	}
	if _, err := c.Health(ctx(t)); status.Code(err) != codes.Unavailable || len(srv.attempts("Health")) != 1 {
		t.Errorf("Health: %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Health")))
	}
}

// A retried ingest would report the documents its first attempt stored as replaced, a retried
// delete the ones it deleted as not found.
func TestIngestAndDeleteAreNotRetried(t *testing.T) {
	srv, c := serveFlaky(t, 1, time.Millisecond)
	if _, err := c.Ingest(ctx(t), &retrievalv1.DocumentInput{DocumentId: "d"}); status.Code(err) != codes.Unavailable || len(srv.attempts("Ingest")) != 1 {
		t.Errorf("Ingest: %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Ingest")))
	}
	if _, err := c.Delete(ctx(t), "d"); status.Code(err) != codes.Unavailable || len(srv.attempts("Delete")) != 1 {
		t.Errorf("Delete: %v after %d attempts, want Unavailable after 1", err, len(srv.attempts("Delete")))
	}
}

func TestBearerTokenNeedsTLSBeyondLoopback(t *testing.T) {
	for _, target := range []string{
		"127.0.0.1:50051", "localhost:50051", "localhost", "[::1]:50051", "::1", "dns:///localhost:50051",
		"dns:127.0.0.1:50051", "dns://192.0.2.53/127.0.0.1:50051", "ipv4:127.0.0.1:50051,127.0.0.2:50051", "ipv6:[::1]:50051",
	} {
		c, err := retrieval.New(target, retrieval.WithBearerToken("t"))
		if err != nil {
			t.Errorf("%s: %v", target, err)
			continue
		}
		c.Close()
	}
	// gRPC reads the host before '?' or '#', so each of these names 192.0.2.2 (newer gRPC versions resolve them).
	for _, target := range []string{
		"retrieval.example:50051", "192.0.2.2:50051", "dns:///192.0.2.2:50051?x=/127.0.0.1", "dns:///192.0.2.2:50051#/localhost",
		"ipv4:192.0.2.2:50051#/localhost", "passthrough:///192.0.2.2:50051?/localhost", "ipv4:127.0.0.1:50051,192.0.2.2:50051",
		"dns://192.0.2.53/localhost:50051", "dns:///192.0.2.2/127.0.0.1:50051", "localhost:50051@192.0.2.2", "unix:///run/retrieval.sock",
	} {
		if c, err := retrieval.New(target, retrieval.WithBearerToken("t")); err == nil || !strings.Contains(err.Error(), "a bearer token over plaintext") {
			t.Errorf("%s: a plaintext token was accepted (%v)", target, err)
			if c != nil {
				c.Close()
			}
		}
	}
}

func TestIdentityValuesAreWhatMetadataCarries(t *testing.T) {
	// A loopback target written with its resolver's scheme is loopback too.
	c, err := retrieval.New("dns:///localhost:50051", retrieval.WithBearerToken("t"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	// The same rule as the other clients: a user id beyond ASCII is refused, without repeating it.
	if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithIdentity("zoë", "USER")); err == nil || strings.Contains(err.Error(), "zoë") {
		t.Errorf("a user id beyond ASCII: %v", err)
	}
	if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithBearerToken("secret\x00token")); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("a token with a control character: %v", err)
	}
	// The server splits x-user-groups on commas: "eng,hr" would be two groups.
	if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithGroups("sales", "eng,hr")); err == nil || !strings.Contains(err.Error(), `a group must not contain a comma: x-user-groups separates groups with it (got "eng,hr")`) {
		t.Errorf("a group with a comma: %v", err)
	}
	if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithGroups("zoë")); err == nil || strings.Contains(err.Error(), "zoë") {
		t.Errorf("a group beyond ASCII: %v", err)
	}
	// The server drops space around a group, and an empty one: " hr" read hr's documents.
	for _, g := range []string{" hr", "hr ", ""} {
		if _, err := retrieval.New("127.0.0.1:50051", retrieval.WithGroups(g)); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("a group must be a name without space around it (got %q)", g)) {
			t.Errorf("group %q: %v", g, err)
		}
	}
}

// echoServer answers Health with the identity metadata and the peer's certificate subject.
type echoServer struct {
	retrievalv1.UnimplementedRetrievalServiceServer
}

func (echoServer) Health(ctx context.Context, _ *retrievalv1.HealthRequest) (*retrievalv1.HealthResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	resp := &retrievalv1.HealthResponse{Status: retrievalv1.ServingStatus_SERVING_STATUS_SERVING}
	for _, key := range []string{"x-user-id", "x-user-role", "x-user-groups", "authorization"} {
		resp.Components = append(resp.Components, &retrievalv1.ComponentHealth{Name: key, Detail: strings.Join(md.Get(key), ",")})
	}
	return resp, nil
}

type pki struct{ dir, ca, serverCert, serverKey, clientCert, clientKey string }

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newPKI writes a CA, a server certificate for 127.0.0.1 and a client certificate, all signed by the CA.
func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := pki{dir: dir, ca: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage, ips []net.IP) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
		cert, keyPath := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyPath, "PRIVATE KEY", keyDER)
		return cert, keyPath
	}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth, nil)
	return p
}

// serveMutualTLS starts the echo server requiring a client certificate from the test CA.
func serveMutualTLS(t *testing.T, p pki) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.serverCert, p.serverKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, _ := os.ReadFile(p.ca)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: roots, ClientAuth: tls.RequireAndVerifyClientCert})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := grpc.NewServer(grpc.Creds(creds))
	retrievalv1.RegisterRetrievalServiceServer(server, echoServer{})
	go server.Serve(lis)
	t.Cleanup(server.Stop)
	return lis.Addr().String()
}

func TestTLS(t *testing.T) {
	p := newPKI(t)
	addr := serveMutualTLS(t, p)

	client, err := retrieval.New(addr,
		retrieval.WithTLS(retrieval.TLS{CAFile: p.ca, CertFile: p.clientCert, KeyFile: p.clientKey}),
		retrieval.WithIdentity("alice", "ADMIN"), retrieval.WithGroups("eng", "Sales EMEA"),
		retrieval.WithBearerToken("token-123\n")) // as read from a file
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	resp, err := client.Health(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range resp.Components {
		got[c.Name] = c.Detail
	}
	want := map[string]string{"x-user-id": "alice", "x-user-role": "ADMIN", "x-user-groups": "eng,Sales EMEA", "authorization": "Bearer token-123"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}

	// Without a client certificate the handshake fails.
	noCert, err := retrieval.New(addr, retrieval.WithTLS(retrieval.TLS{CAFile: p.ca}))
	if err != nil {
		t.Fatal(err)
	}
	defer noCert.Close()
	short, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := noCert.Health(short); status.Code(err) != codes.Unavailable {
		t.Errorf("no client certificate: %v, want Unavailable", err)
	}
	// A client certificate needs its key.
	if _, err := retrieval.New(addr, retrieval.WithTLS(retrieval.TLS{CertFile: p.clientCert})); err == nil {
		t.Error("a certificate without its key was accepted")
	}
}

// os.ReadFile waited for ever on a FIFO with no writer, and read a file of any size into memory
// before the server refused it.
func TestDocumentFromFileReadsRegularFilesWithinTheLimitOnly(t *testing.T) {
	dir := t.TempDir()
	note := filepath.Join(dir, "note.md")
	if err := os.WriteFile(note, []byte("# Aardvarks"), 0o600); err != nil {
		t.Fatal(err)
	}
	if doc, err := retrieval.DocumentFromFile(note); err != nil || string(doc.Content) != "# Aardvarks" || doc.Filename != "note.md" {
		t.Fatalf("a regular file: %v, %v", doc, err)
	}
	// The source was the path as typed: ./docs/a.txt after docs/a.txt was embedded again.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, spelled := range []string{dir + "/./note.md", dir + "//note.md", dir + "/sub/../note.md"} {
		if doc, err := retrieval.DocumentFromFile(spelled); err != nil || doc.Source != note {
			t.Errorf("%s: source %q, %v, want %q", spelled, doc.GetSource(), err, note)
		}
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Sparse: refused from its size, before a byte is read.
	large := filepath.Join(dir, "large.txt")
	if err := os.WriteFile(large, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(large, retrieval.MaxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		dir:   dir + " is not a regular file (a folder)",
		fifo:  fifo + " is not a regular file (a FIFO)",
		large: fmt.Sprintf("its size, %d bytes, is over the limit of %d bytes", retrieval.MaxFileBytes+1, retrieval.MaxFileBytes),
	} {
		if _, err := retrieval.DocumentFromFile(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", path, err, want)
		}
	}
}

// Go and TypeScript had no way to ask for an answer (MODE_GENERATION) but through the stub.
func TestQueryOptionsSetTheirFields(t *testing.T) {
	var sent []*retrievalv1.QueryRequest
	record := grpc.WithUnaryInterceptor(func(_ context.Context, _ string, req, _ interface{}, _ *grpc.ClientConn, _ grpc.UnaryInvoker, _ ...grpc.CallOption) error {
		sent = append(sent, req.(*retrievalv1.QueryRequest))
		return nil
	})
	c, err := retrieval.New("127.0.0.1:1", retrieval.WithDialOptions(record))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, opts := range [][]retrieval.QueryOption{{retrieval.Mode(retrievalv1.Mode_MODE_GENERATION)}, nil} {
		if _, err := c.Query(ctx(t), "aardvarks", opts...); err != nil {
			t.Fatal(err)
		}
	}
	if len(sent) != 2 || sent[0].Mode != retrievalv1.Mode_MODE_GENERATION || sent[1].Mode != retrievalv1.Mode_MODE_UNSPECIFIED {
		t.Errorf("the modes sent: %v, want MODE_GENERATION then unset", sent)
	}
}
