// Package retrieval is a small client for retrieval.v1.RetrievalService.
//
// It offers the calls of the Python and TypeScript clients (Query, Search, Health, Ingest,
// Delete) with the same options, on one gRPC connection that carries the caller's identity
// (x-user-id / x-user-role / x-user-groups headers, or a bearer token) and a default timeout (not for Ingest
// and Delete, which only their context's deadline bounds), and tries Query, Search and Health
// again after UNAVAILABLE (see WithRetries). The generated
// stubs are in the retrievalv1 package; Service returns them bound to the same connection for
// anything the helpers do not cover.
package retrieval

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	retrievalv1 "github.com/retrieval-platform/retrieval-service/clients/go/retrieval/v1"
)

// DefaultTimeout bounds a call whose context has no deadline (the Python client's default),
// except Ingest and Delete.
const DefaultTimeout = 60 * time.Second

// unboundedByDefault are the calls the client's timeout does not bound, only a context deadline:
// a large ingest takes minutes to embed, and one cut short by a default the caller never chose
// stops part-way with no answer saying what was stored.
var unboundedByDefault = map[string]bool{
	"/retrieval.v1.RetrievalService/IngestDocuments": true,
	"/retrieval.v1.RetrievalService/DeleteDocuments": true,
}

// DefaultRetries is how many times Query, Search and Health are tried again after UNAVAILABLE: 4
// attempts in all, as in the Python and TypeScript clients.
const DefaultRetries = 3

// retried are the calls tried again after UNAVAILABLE: they change nothing, so a second attempt
// answers as the first would have. Not IngestDocuments and DeleteDocuments: a retried ingest
// reports the documents its first attempt stored as replaced, a retried delete the ones it deleted
// as not found.
var retried = map[string]bool{
	"/retrieval.v1.RetrievalService/Query":  true,
	"/retrieval.v1.RetrievalService/Search": true,
	"/retrieval.v1.RetrievalService/Health": true,
}

// The backoff between attempts: 0.2 s, doubling, at most 2 s, the same in the three clients (see retryWait).
const (
	firstBackoff = 200 * time.Millisecond
	maxBackoff   = 2 * time.Second
)

// jitter is not math/rand's global source, which Go before 1.20 seeds alike in every process:
// clients that failed together would come back together.
var jitter = struct {
	sync.Mutex
	*rand.Rand
}{Rand: rand.New(rand.NewSource(time.Now().UnixNano()))}

// maxMessageBytes matches the Python client: larger than the server's own limit
// (RETRIEVAL_MAX_MESSAGE_MB, 64 MiB by default), so the server is the one that says no.
const maxMessageBytes = 256 << 20

// TLS configures a TLS connection. The zero value verifies the server against the system's roots.
type TLS struct {
	// CAFile is a PEM bundle of the CAs that sign the server's certificate. Empty: the system roots.
	CAFile string
	// CertFile and KeyFile are the client's PEM certificate and key for mutual TLS. Empty: none.
	CertFile, KeyFile string
	// ServerName overrides the name checked in the server's certificate. Empty: the target's host.
	ServerName string
}

type config struct {
	userID, role, token string
	groups              []string
	tls                 *TLS
	timeout             time.Duration
	retries             int
	dialOptions         []grpc.DialOption
}

// Option configures a Client.
type Option func(*config)

// WithIdentity sends x-user-id and x-user-role on every call (RETRIEVAL_AUTH_MODE none, or a
// gateway in gateway mode). Empty values are not sent: no user id and no role is the anonymous
// caller, a user id without a role is a USER.
func WithIdentity(userID, role string) Option {
	return func(c *config) { c.userID, c.role = userID, role }
}

// WithGroups sends the user's groups as one x-user-groups header, comma-separated, on every call
// (RETRIEVAL_AUTH_MODE none, or a gateway in gateway mode): documents granted to group:<name> are
// theirs. New refuses a group that holds a comma, which the server would read as two.
func WithGroups(groups ...string) Option {
	return func(c *config) { c.groups = append([]string(nil), groups...) }
}

// WithBearerToken sends "authorization: Bearer <token>" on every call (RETRIEVAL_AUTH_MODE jwt).
// New refuses it over plaintext to a host other than loopback.
func WithBearerToken(token string) Option {
	return func(c *config) { c.token = token }
}

// WithTLS connects over TLS (mutual TLS when t has a client certificate). Without it the
// connection is plaintext.
func WithTLS(t TLS) Option {
	return func(c *config) { c.tls = &t }
}

// WithTimeout bounds each call whose context has no deadline (default DefaultTimeout), except
// Ingest and Delete, which only a context deadline bounds. A context deadline always wins. Zero
// or negative: no bound.
func WithTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// WithRetries sets how many times Query, Search and Health (through Service too) are tried again
// after UNAVAILABLE, the server's answer while a backend it needs is down, but not when its
// ErrorInfo reason is BACKEND_TIMEOUT, a backend that let its whole timeout pass (default
// DefaultRetries; 0: none). The wait before each is the jittered backoff, 0.2 s doubling to at
// most 2 s, each wait half to all of it, or, when longer, the server's RetryInfo delay plus up to
// half again (jittered too: else all the callers it answered would come back at once); a wait
// that would end at or past the call's deadline is not started and the call returns the
// UNAVAILABLE. Ingest and Delete are never retried. New refuses a negative n.
func WithRetries(n int) Option {
	return func(c *config) { c.retries = n }
}

// WithDialOptions adds gRPC dial options (interceptors, keepalive, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.dialOptions = append(c.dialOptions, opts...) }
}

// Client calls one retrieval server. It is safe for concurrent use; Close releases it.
type Client struct {
	conn *grpc.ClientConn
	svc  retrievalv1.RetrievalServiceClient
}

// New connects to target ("host:port"). The connection is made lazily, so New does not wait for
// the server; the first call does.
func New(target string, opts ...Option) (*Client, error) {
	cfg := config{timeout: DefaultTimeout, retries: DefaultRetries}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retries < 0 {
		return nil, fmt.Errorf("retrieval: WithRetries takes 0 or more retries (got %d)", cfg.retries)
	}
	// Read from a file, a token ends in a newline.
	cfg.token = strings.TrimSpace(cfg.token)
	for _, v := range []struct{ name, value string }{{"token", cfg.token}, {"user id", cfg.userID}, {"role", cfg.role}} {
		if !printableASCII(v.value) {
			return nil, fmt.Errorf("retrieval: the %s must be printable ASCII, as gRPC metadata is (a user id beyond ASCII travels in a token's claims)", v.name)
		}
	}
	for _, g := range cfg.groups {
		if !printableASCII(g) {
			return nil, errors.New("retrieval: the group must be printable ASCII, as gRPC metadata is (a user id beyond ASCII travels in a token's claims)")
		}
		if strings.Contains(g, ",") {
			return nil, fmt.Errorf("retrieval: a group must not contain a comma: x-user-groups separates groups with it (got %q)", g)
		}
		// The server drops space and tab around a group, and an empty one, where a token's such group is refused.
		if g == "" || g != strings.Trim(g, " \t") {
			return nil, fmt.Errorf("retrieval: a group must be a name without space around it (got %q)", g)
		}
	}
	transport, err := transportOption(target, &cfg)
	if err != nil {
		return nil, err
	}
	dial := append([]grpc.DialOption{
		transport,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		grpc.WithChainUnaryInterceptor(callInterceptor(cfg)),
		grpc.WithChainStreamInterceptor(streamInterceptor(cfg)),
	}, cfg.dialOptions...)
	conn, err := grpc.Dial(target, dial...)
	if err != nil {
		return nil, fmt.Errorf("retrieval: dial %s: %w", target, err)
	}
	return &Client{conn: conn, svc: retrievalv1.NewRetrievalServiceClient(conn)}, nil
}

func transportOption(target string, cfg *config) (grpc.DialOption, error) {
	if cfg.tls == nil {
		if cfg.token != "" && !isLoopback(target) {
			return nil, errors.New("retrieval: a bearer token over plaintext would be readable on the network; use WithTLS")
		}
		return grpc.WithInsecure(), nil
	}
	tc := &tls.Config{ServerName: cfg.tls.ServerName, MinVersion: tls.VersionTLS12}
	if cfg.tls.CAFile != "" {
		pem, err := os.ReadFile(cfg.tls.CAFile)
		if err != nil {
			return nil, fmt.Errorf("retrieval: CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("retrieval: CA file %s holds no PEM certificate", cfg.tls.CAFile)
		}
	}
	if (cfg.tls.CertFile == "") != (cfg.tls.KeyFile == "") {
		return nil, errors.New("retrieval: mutual TLS needs both CertFile and KeyFile")
	}
	if cfg.tls.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.tls.CertFile, cfg.tls.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("retrieval: client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(tc)), nil
}

// printableASCII says whether gRPC metadata carries s as it is (the other clients refuse the rest,
// and the server is owed a header the protocol allows).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// isLoopback says whether every address target names is this machine's, reading it as gRPC
// does: "host:port", "[v6]:port" or a host alone, after no scheme, "dns:" (with "//authority/" or
// not) or "ipv4:" / "ipv6:" (a comma-separated list). Any other scheme is refused, and so is a
// target holding '?' or '#': gRPC reads the host before them, where reading it after the last '/'
// took "dns:///192.0.2.2:50051?x=/127.0.0.1" for loopback.
func isLoopback(target string) bool {
	if strings.ContainsAny(target, "?#") {
		return false
	}
	scheme, path := "", target
	if i := strings.Index(target, ":"); i > 0 && schemeSyntax(target[:i]) {
		switch target[:i] {
		case "dns", "ipv4", "ipv6":
			scheme, path = target[:i], target[i+1:]
		default:
			// "localhost:50051" is a host and its port, "unix:/run/x" or "passthrough:///x" a scheme.
			if !isPort(target[i+1:]) {
				return false
			}
		}
	}
	authority := ""
	if scheme != "" && strings.HasPrefix(path, "//") {
		end := strings.Index(path[2:], "/")
		if end < 0 {
			return false
		}
		authority, path = path[2:2+end], path[3+end:]
	}
	addresses := []string{path}
	if scheme == "ipv4" || scheme == "ipv6" {
		if authority != "" {
			return false
		}
		addresses = strings.Split(path, ",")
	}
	for _, address := range addresses {
		host := hostOf(address)
		ip := net.ParseIP(host)
		// A DNS server the target names may answer anything for "localhost".
		if !(host == "localhost" && authority == "") && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}

// schemeSyntax says whether s can be a URI scheme (RFC 3986): a letter, then letters, digits, '+', '-' or '.'.
func schemeSyntax(s string) bool {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

func isPort(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// hostOf is the host of "host:port", "[v6]:port", a host alone or a bare IPv6 address; "" when
// address is none of them.
func hostOf(address string) string {
	if strings.HasPrefix(address, "[") {
		end := strings.Index(address, "]")
		if end < 0 || address[end+1:] != "" && !(address[end+1] == ':' && isPort(address[end+2:])) {
			return ""
		}
		return address[1:end]
	}
	switch strings.Count(address, ":") {
	case 0:
		return address
	case 1:
		host, port, _ := strings.Cut(address, ":")
		if !isPort(port) {
			return ""
		}
		return host
	default:
		return address
	}
}

// identity is the metadata every call carries: the identity headers and the bearer token.
func identity(cfg config) []string {
	var pairs []string
	if cfg.userID != "" {
		pairs = append(pairs, "x-user-id", cfg.userID)
	}
	if cfg.role != "" {
		pairs = append(pairs, "x-user-role", cfg.role)
	}
	if len(cfg.groups) > 0 {
		pairs = append(pairs, "x-user-groups", strings.Join(cfg.groups, ","))
	}
	if cfg.token != "" {
		pairs = append(pairs, "authorization", "Bearer "+cfg.token)
	}
	return pairs
}

// streamInterceptor does for streams (StreamQuery through Service()) what callInterceptor does for
// unary calls. The default timeout's context is cancelled once the stream has ended.
func streamInterceptor(cfg config) grpc.StreamClientInterceptor {
	pairs := identity(cfg)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if len(pairs) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
		}
		if _, ok := ctx.Deadline(); ok || cfg.timeout <= 0 {
			return streamer(ctx, desc, cc, method, opts...)
		}
		ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		stream, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			cancel()
			return nil, err
		}
		return &cancelledAtEnd{ClientStream: stream, cancel: cancel}, nil
	}
}

// cancelledAtEnd releases the default timeout's context when the stream ends: io.EOF or an error
// from any of its calls. A caller that stops reading early holds it until the timeout, or until it
// cancels its own context.
type cancelledAtEnd struct {
	grpc.ClientStream
	cancel context.CancelFunc
}

func (s *cancelledAtEnd) ended(err error) error {
	if err != nil {
		s.cancel()
	}
	return err
}

func (s *cancelledAtEnd) RecvMsg(m interface{}) error { return s.ended(s.ClientStream.RecvMsg(m)) }

func (s *cancelledAtEnd) SendMsg(m interface{}) error { return s.ended(s.ClientStream.SendMsg(m)) }

func (s *cancelledAtEnd) CloseSend() error { return s.ended(s.ClientStream.CloseSend()) }

func (s *cancelledAtEnd) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	return md, s.ended(err)
}

// callInterceptor adds the identity metadata and, when the context has no deadline, the default
// timeout (not to IngestDocuments and DeleteDocuments), and retries the retried calls within it.
func callInterceptor(cfg config) grpc.UnaryClientInterceptor {
	pairs := identity(cfg)
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if len(pairs) > 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, pairs...)
		}
		if _, ok := ctx.Deadline(); !ok && cfg.timeout > 0 && !unboundedByDefault[method] {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
			defer cancel()
		}
		for attempt := 1; ; attempt++ {
			err := invoker(ctx, method, req, reply, cc, opts...)
			if err == nil || attempt > cfg.retries || !retried[method] || status.Code(err) != codes.Unavailable || timedOut(err) {
				return err
			}
			wait := retryWait(attempt, err)
			// No time would be left for the next attempt: the server's answer says more than a
			// DEADLINE_EXCEEDED would.
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
				return err
			}
			timer := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return status.FromContextError(ctx.Err()).Err()
			case <-timer.C:
			}
		}
	}
}

// timedOut says whether err is the server's UNAVAILABLE for a backend that let its whole timeout
// pass (ErrorInfo reason BACKEND_TIMEOUT): another attempt would wait as long again, and a frozen
// MySQL took 4 times its timeout to the UNAVAILABLE.
func timedOut(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == "BACKEND_TIMEOUT" {
			return true
		}
	}
	return false
}

// retryWait is the wait after the attempt-th attempt failed with err: the backoff, jittered to half
// to all of it, or the server's RetryInfo delay, jittered to it plus up to half again, when longer.
// Both are jittered so that clients that failed together do not come back together: the server
// sends every caller the same delay, and one left as it is brought them all back at once.
func retryWait(attempt int, err error) time.Duration {
	backoff := firstBackoff
	for i := 1; i < attempt && backoff < maxBackoff; i++ {
		backoff *= 2
	}
	if backoff > maxBackoff {
		backoff = maxBackoff
	}
	wait := backoff/2 + jittered(backoff/2)
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.RetryInfo); ok {
			delay := info.GetRetryDelay().AsDuration()
			if delay = delay + jittered(delay/2); delay > wait {
				wait = delay
			}
		}
	}
	return wait
}

// jittered is a random duration from 0 to d.
func jittered(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	jitter.Lock()
	defer jitter.Unlock()
	return time.Duration(jitter.Int63n(int64(d) + 1))
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Service is the generated stub on the client's connection (identity, default timeout and retries
// included, the timeout not on IngestDocuments and DeleteDocuments, the retries on Query, Search
// and Health only), for requests the helpers do not build, e.g. a QueryRequest with Fusion or Rerank.
func (c *Client) Service() retrievalv1.RetrievalServiceClient { return c.svc }

// QueryOption sets a field of a QueryRequest.
type QueryOption func(*retrievalv1.QueryRequest)

// TopK asks for at most k contexts (0: the server's default, 5).
func TopK(k int32) QueryOption {
	return func(r *retrievalv1.QueryRequest) { r.TopK = k }
}

// Strategy selects the retrieval legs (default STRATEGY_SEMANTIC).
func Strategy(s retrievalv1.Strategy) QueryOption {
	return func(r *retrievalv1.QueryRequest) { r.Strategy = s }
}

// Mode selects what the call produces (default MODE_RETRIEVAL_ONLY, contexts only;
// MODE_GENERATION adds a cited answer).
func Mode(m retrievalv1.Mode) QueryOption {
	return func(r *retrievalv1.QueryRequest) { r.Mode = m }
}

// UseCache lets the semantic cache answer and store the call (default true).
func UseCache(use bool) QueryOption {
	return func(r *retrievalv1.QueryRequest) { r.UseCache = &use }
}

// DocumentIDs restricts retrieval to these documents.
func DocumentIDs(ids ...string) QueryOption {
	return func(r *retrievalv1.QueryRequest) { r.Filters = &retrievalv1.QueryFilters{DocumentIds: ids} }
}

// Query runs the full retrieval pipeline and returns the best contexts, best first.
func (c *Client) Query(ctx context.Context, query string, opts ...QueryOption) (*retrievalv1.QueryResponse, error) {
	req := &retrievalv1.QueryRequest{Query: query}
	for _, o := range opts {
		o(req)
	}
	return c.svc.Query(ctx, req)
}

// Search runs one semantic search and returns at most topK flat results (0: the server's default, 5).
func (c *Client) Search(ctx context.Context, query string, topK int32) (*retrievalv1.SearchResponse, error) {
	return c.svc.Search(ctx, &retrievalv1.SearchRequest{Query: query, TopK: topK})
}

// Health returns the service's status and one status per component.
func (c *Client) Health(ctx context.Context) (*retrievalv1.HealthResponse, error) {
	return c.svc.Health(ctx, &retrievalv1.HealthRequest{})
}

// Ingest adds or replaces documents (needs the ADMIN or SUPER_ADMIN role). Files that cannot
// be read are listed in the response's Errors; the rest are stored. Only ctx's deadline bounds
// it, not the client's timeout.
func (c *Client) Ingest(ctx context.Context, docs ...*retrievalv1.DocumentInput) (*retrievalv1.IngestDocumentsResponse, error) {
	return c.svc.IngestDocuments(ctx, &retrievalv1.IngestDocumentsRequest{Documents: docs})
}

// Delete removes documents (needs the ADMIN or SUPER_ADMIN role). Only ctx's deadline bounds
// it, not the client's timeout.
func (c *Client) Delete(ctx context.Context, ids ...string) (*retrievalv1.DeleteDocumentsResponse, error) {
	return c.svc.DeleteDocuments(ctx, &retrievalv1.DeleteDocumentsRequest{DocumentIds: ids})
}

// DocumentFromFile reads a file as an ingest input; its extension selects the server's loader.
// Set the other fields (DocumentId, Access, OwnerId, ...) on the result. The file must be a regular
// file of at most 256 MiB (what this client sends in one request; the server's own limit, 16 MiB by
// default, may be lower), checked before it is read, as the Python client's document_from_file does.
// Its Source is the path cleaned, as the other clients send it: the server finds a document
// unchanged by what it stores, and ./docs/a.txt after docs/a.txt was another source.
func DocumentFromFile(path string) (*retrievalv1.DocumentInput, error) {
	content, err := readFile(path, maxMessageBytes)
	if err != nil {
		return nil, err
	}
	return &retrievalv1.DocumentInput{Filename: filepath.Base(path), Content: content, Source: filepath.Clean(path)}, nil
}

// readFile is the content of the regular file path, of at most limit bytes, both checked before
// it is read: os.ReadFile waited for ever on a FIFO with no writer, and read a file of any size
// into memory before the server refused it.
func readFile(path string, limit int64) ([]byte, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("retrieval: %s is not a regular file (%s)", path, fileKind(info.Mode()))
	}
	tooLarge := fmt.Sprintf("over the limit of %d bytes (the largest request this client sends)", limit)
	if info.Size() > limit {
		return nil, fmt.Errorf("retrieval: %s: its size, %d bytes, is %s", path, info.Size(), tooLarge)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	content, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(content)) > limit { // it grew since
		return nil, fmt.Errorf("retrieval: %s: its size is %s", path, tooLarge)
	}
	return content, nil
}

// fileKind names what a file other than a regular one is, for the error that refuses it.
func fileKind(mode os.FileMode) string {
	switch {
	case mode.IsDir():
		return "a folder"
	case mode&os.ModeNamedPipe != 0:
		return "a FIFO"
	case mode&os.ModeSocket != 0:
		return "a socket"
	case mode&os.ModeCharDevice != 0:
		return "a character device"
	case mode&os.ModeDevice != 0:
		return "a block device"
	}
	return "of an unknown kind"
}
