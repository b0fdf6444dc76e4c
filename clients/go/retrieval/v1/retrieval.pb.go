// The retrieval service contract (package retrieval.v1).
//
// Stubs for every language are generated from this file (buf.gen.yaml at the repository root;
// the Python stubs by protos/generate.py). grpcurl and ghz discover it through server reflection.
// `buf lint` (STANDARD + COMMENTS) and `buf breaking` (WIRE_JSON, against the last release) run
// in the tests.
//
// Conventions
//
// * Defaults: proto3 sends no value for 0, "" and empty lists, so "0" or "empty" in a field's
//   comment is what a caller gets by not setting it. Where 0 is a meaningful value the field is
//   `optional` and "unset" is documented.
// * Durations are doubles in milliseconds whose name ends in `_ms` (e.g. `total_ms`). They are
//   measurements callers add up, compare and plot, so a plain number with the unit in the name
//   serves them better than google.protobuf.Duration, and keeping it avoids a wire break. The
//   contract has no timestamps. Every new duration follows the same rule.
// * Limits: every limit below is the default of a server setting, named in the comment
//   (RETRIEVAL_<NAME> environment variables, see the README's configuration table). A request
//   outside a limit gets INVALID_ARGUMENT naming the field and the limit. The exception is one
//   document of an IngestDocuments batch whose id (or owner or grantee id) is invalid or repeated:
//   it is reported in IngestDocumentsResponse.errors and the rest of the batch is stored.
// * Lengths of strings are Unicode code points (bytes of UTF-8 where the comment says bytes),
//   after trimming leading and trailing whitespace where the comment says so. Token counts are
//   tokens of the embedding model's tokenizer (all-MiniLM-L6-v2 WordPiece by default).
// * The request's gRPC deadline is the only time limit a caller sets; there is no timeout field.
//
// Identity (call metadata, decided by the server's RETRIEVAL_AUTH_MODE)
//
// * `none` (development, the default): the `x-user-id` (at most 255 characters),
//   `x-user-role` (`SUPER_ADMIN`, `ADMIN` or `USER`, exactly as written; space and tab around it
//   ignored) and `x-user-groups` headers are trusted as sent. A user id without a role is a
//   USER; no headers at all is the anonymous caller. `x-user-groups` is the user's groups,
//   comma-separated (space and tab around a name and empty names are ignored; each name as
//   stored, at most 255 characters; at most 1,000 groups; only with `x-user-id`): documents
//   granted to `group:<name>` are theirs. Each header is sent at most once; INVALID_ARGUMENT
//   otherwise. The server then listens on loopback only, unless
//   RETRIEVAL_ALLOW_UNAUTHENTICATED_REMOTE is set.
// * `jwt`: `authorization: Bearer <token>` is verified (signature, issuer, audience, expiry);
//   the user id, role and groups come from the token's claims (RETRIEVAL_JWT_* settings).
//   Identity headers cannot override them: they are ignored or refused.
// * `gateway`: `x-user-id` / `x-user-role` / `x-user-groups` are trusted only from peers
//   authenticated by mutual TLS whose certificate is on the server's allow-list (an API gateway
//   that verified the user); the same headers from any other peer are refused with UNAUTHENTICATED.
//
// What a caller may read: SUPER_ADMIN reads every document; ADMIN and USER read public documents
// plus the private ones they own or are granted; the anonymous caller reads public documents
// only. The rule is applied inside every retrieval leg and partitions the cache, so a result a
// caller may not read is never returned. IngestDocuments and DeleteDocuments need ADMIN or
// SUPER_ADMIN, and an ADMIN replaces or deletes only stored documents it may read: a document
// whose id is taken by one it may not read is that document's error in
// IngestDocumentsResponse.errors, and such an id is in DeleteDocumentsResponse.not_found as a
// missing one is; the stored document stays as it was.
//
// Errors
//
// Errors are gRPC status codes with a human-readable message; machine-readable details travel as
// google.rpc.Status in the `grpc-status-details-bin` trailer:
//
// * INVALID_ARGUMENT: a field outside its limits or an unknown enum value; google.rpc.BadRequest
//   with one field violation per invalid field (e.g. `top_k`, `documents[3].owner_id`). Also,
//   before the request is parsed (and authenticated), a request of any RPC but IngestDocuments
//   larger than 2 MiB (more when RETRIEVAL_QUERY_MAX_BYTES or RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST
//   are raised), or an IngestDocuments request of more than RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST
//   documents or of more than 16 fields a document and 100,000 among them (each granted user and
//   metadata entry counts one); and a query, id, user id, owner or grantee holding a run of more
//   than 30 combining marks (a title's or metadata's run gets a joiner, U+034F, after every 30).
// * UNAUTHENTICATED: credentials missing, malformed, expired or forged; google.rpc.ErrorInfo
//   with a stable reason (e.g. TOKEN_EXPIRED).
// * PERMISSION_DENIED: an authenticated caller without the role an RPC needs; ErrorInfo reason
//   ROLE_REQUIRED.
// * RESOURCE_EXHAUSTED: a request larger than RETRIEVAL_MAX_MESSAGE_MB (64 MiB), or a call
//   past RETRIEVAL_MAX_CONCURRENT_CALLS in progress ("Concurrent RPC limit exceeded!", before
//   it runs: it may be sent again later), refused by gRPC itself without details; a write while
//   the data disk is below the server's free-space floor, with google.rpc.RetryInfo; a
//   StreamQuery whose caller took none of its next message within RETRIEVAL_STREAM_STALL_S,
//   ErrorInfo reason STREAM_STALLED.
// * UNAVAILABLE: a backend the request needs (vector store, metadata store) is down; ErrorInfo
//   reason BACKEND_UNAVAILABLE, and RetryInfo says when to try again. One that let its timeout
//   pass (RETRIEVAL_MYSQL_TIMEOUT_S) is reason BACKEND_TIMEOUT, without RetryInfo: another
//   attempt would wait as long again, and the clients make none. A failing optional backend
//   (reranker, LLM, cache, one retrieval leg) does not fail the call: the answer says what was
//   degraded.
// * FAILED_PRECONDITION: a write to a read-only server (RETRIEVAL_READ_ONLY, or several
//   processes over embedded storage).
// * DEADLINE_EXCEEDED: the deadline passed before any context was ready, or while a stage the
//   deadline does not cut still ran (the access check, GENERATION's entity matching and tools).
//   Where it can, the deadline bounds a stage instead of failing the call: the cache lookup and
//   the query's embedding for it (`deadline:cache_skipped`), query analysis, GENERATION's router
//   model, reranking and the store of a finished answer in the cache
//   (`deadline:cache_store_skipped`) each get at most half the time left, retrieval legs still
//   running near the deadline are given up (`deadline:<leg>_skipped`), reranking is capped or
//   skipped (`deadline:rerank_capped`, `deadline:rerank_skipped`), an empty answer's suggested
//   titles are left out when their search outlasts the deadline (`deadline:suggestions_skipped`),
//   and contexts of an earlier pass ready at the deadline are returned with
//   `deadline:partial_results`, each in Metrics.degraded.
// * INTERNAL: anything unexpected; the message is generic, ErrorInfo reason INTERNAL, and the
//   details are in the server log.

// Code generated by protoc-gen-go. DO NOT EDIT.
// versions:
// 	protoc-gen-go v1.28.1
// 	protoc        (unknown)
// source: retrieval/v1/retrieval.proto

package retrievalv1

import (
	protoreflect "google.golang.org/protobuf/reflect/protoreflect"
	protoimpl "google.golang.org/protobuf/runtime/protoimpl"
	reflect "reflect"
	sync "sync"
)

const (
	// Verify that this generated code is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(20 - protoimpl.MinVersion)
	// Verify that runtime/protoimpl is sufficiently up-to-date.
	_ = protoimpl.EnforceVersion(protoimpl.MaxVersion - 20)
)

// Which retrieval legs a Query runs.
type Strategy int32

const (
	// Not set: SEMANTIC.
	Strategy_STRATEGY_UNSPECIFIED Strategy = 0
	// Dense vectors only: the query, its reformulations and (with an LLM) a hypothetical answer
	// passage, each embedded and searched.
	Strategy_STRATEGY_SEMANTIC Strategy = 1
	// BM25 over sparse vectors in the same engine: best for exact names, codes and identifiers.
	Strategy_STRATEGY_KEYWORD Strategy = 2
	// Dense + keyword + full-text search over document titles and metadata, in parallel, plus the
	// knowledge-graph leg when the query names known entities (RETRIEVAL_GRAPH_EXPANSION), fused
	// (see Fusion).
	Strategy_STRATEGY_HYBRID Strategy = 3
	// Every HYBRID leg, weighed by the query's form: identifiers (codes, ALL-CAPS words,
	// snake_case) and quoted words, as a share of its words, shift the weight towards the keyword
	// leg; a query with neither is searched exactly as HYBRID. No leg is dropped.
	// Metrics.strategy_used says HYBRID.
	Strategy_STRATEGY_ADAPTIVE Strategy = 4
	// The knowledge-graph leg alone: the chunks that mention the entities the query names (exact,
	// case-folded or fuzzy matches) and their neighbours up to two hops away, scored by hop
	// penalty and relation weight. No known entity in the query: no contexts, with suggestions.
	Strategy_STRATEGY_GRAPH Strategy = 5
)

// Enum value maps for Strategy.
var (
	Strategy_name = map[int32]string{
		0: "STRATEGY_UNSPECIFIED",
		1: "STRATEGY_SEMANTIC",
		2: "STRATEGY_KEYWORD",
		3: "STRATEGY_HYBRID",
		4: "STRATEGY_ADAPTIVE",
		5: "STRATEGY_GRAPH",
	}
	Strategy_value = map[string]int32{
		"STRATEGY_UNSPECIFIED": 0,
		"STRATEGY_SEMANTIC":    1,
		"STRATEGY_KEYWORD":     2,
		"STRATEGY_HYBRID":      3,
		"STRATEGY_ADAPTIVE":    4,
		"STRATEGY_GRAPH":       5,
	}
)

func (x Strategy) Enum() *Strategy {
	p := new(Strategy)
	*p = x
	return p
}

func (x Strategy) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Strategy) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[0].Descriptor()
}

func (Strategy) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[0]
}

func (x Strategy) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Strategy.Descriptor instead.
func (Strategy) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{0}
}

// What a Query produces.
type Mode int32

const (
	// Not set: MODE_RETRIEVAL_ONLY.
	Mode_MODE_UNSPECIFIED Mode = 0
	// Contexts only; the caller's own model writes the answer.
	Mode_MODE_RETRIEVAL_ONLY Mode = 1
	// Contexts and a cited answer (QueryResponse.answer). A router first decides how to answer
	// (the server's LLM, or rules without one): by retrieval, by a tool (arithmetic, dates, the
	// graph), or directly (a greeting), the last two without contexts. Without an LLM the answer
	// is put together from the contexts' sentences. Cached separately from MODE_RETRIEVAL_ONLY.
	Mode_MODE_GENERATION Mode = 2
)

// Enum value maps for Mode.
var (
	Mode_name = map[int32]string{
		0: "MODE_UNSPECIFIED",
		1: "MODE_RETRIEVAL_ONLY",
		2: "MODE_GENERATION",
	}
	Mode_value = map[string]int32{
		"MODE_UNSPECIFIED":    0,
		"MODE_RETRIEVAL_ONLY": 1,
		"MODE_GENERATION":     2,
	}
)

func (x Mode) Enum() *Mode {
	p := new(Mode)
	*p = x
	return p
}

func (x Mode) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Mode) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[1].Descriptor()
}

func (Mode) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[1]
}

func (x Mode) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Mode.Descriptor instead.
func (Mode) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{1}
}

// How the ranked lists of a query are combined: the legs of HYBRID and ADAPTIVE, and for any
// strategy the searches of its reformulations and HyDE passage, which are legs of their own,
// weighed as the query's own search of their kind. Two combinations are RRF whatever is asked:
// a long query's window searches with its whole-query search (per parent, into one dense leg),
// and the sub-queries' lists, fused into one and that with the main results (their cosines and
// BM25 scores share no scale).
type Fusion int32

const (
	// Not set: the server's RETRIEVAL_FUSION (`rrf` by default).
	Fusion_FUSION_UNSPECIFIED Fusion = 0
	// Reciprocal Rank Fusion: sum of weight / (k + rank) over the lists, k = RETRIEVAL_RRF_K (10).
	// The vector legs weigh 1 (ADAPTIVE's balance aside); the metadata and graph legs weigh
	// RETRIEVAL_METADATA_WEIGHT (0.3) and RETRIEVAL_GRAPH_WEIGHT (0.7) relative to the larger of
	// RETRIEVAL_SEMANTIC_WEIGHT and RETRIEVAL_KEYWORD_WEIGHT.
	Fusion_FUSION_RRF Fusion = 1
	// Weighted sum of per-leg normalized scores: RETRIEVAL_SEMANTIC_WEIGHT (0.7),
	// RETRIEVAL_KEYWORD_WEIGHT (0.3), RETRIEVAL_METADATA_WEIGHT (0.3), RETRIEVAL_GRAPH_WEIGHT
	// (0.7); normalization RETRIEVAL_SCORE_NORMALIZATION (`minmax`, or `dbsf`).
	Fusion_FUSION_WEIGHTED Fusion = 2
)

// Enum value maps for Fusion.
var (
	Fusion_name = map[int32]string{
		0: "FUSION_UNSPECIFIED",
		1: "FUSION_RRF",
		2: "FUSION_WEIGHTED",
	}
	Fusion_value = map[string]int32{
		"FUSION_UNSPECIFIED": 0,
		"FUSION_RRF":         1,
		"FUSION_WEIGHTED":    2,
	}
)

func (x Fusion) Enum() *Fusion {
	p := new(Fusion)
	*p = x
	return p
}

func (x Fusion) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Fusion) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[2].Descriptor()
}

func (Fusion) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[2]
}

func (x Fusion) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Fusion.Descriptor instead.
func (Fusion) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{2}
}

// The state of the service or of one of its components.
type ServingStatus int32

const (
	// Never sent by the server.
	ServingStatus_SERVING_STATUS_UNSPECIFIED ServingStatus = 0
	// Working as configured.
	ServingStatus_SERVING_STATUS_SERVING ServingStatus = 1
	// Answering, but something configured and optional (reranker, cache, LLM) is failing: answers
	// are degraded as Metrics.degraded says. The cache is probed by the Health call; the reranker
	// and the LLM are not called, they are failing while their circuit breaker is open (after
	// RETRIEVAL_BREAKER_FAILURES failures in a row). An optional component that is not configured is not
	// a reason for DEGRADED.
	ServingStatus_SERVING_STATUS_DEGRADED ServingStatus = 2
	// Not answering: a required component (vector_store, metadata_store, embedder) is down;
	// Query and Search fail with UNAVAILABLE.
	ServingStatus_SERVING_STATUS_NOT_SERVING ServingStatus = 3
	// Components only: an optional component (reranker, cache, LLM) that is not configured. The
	// service works without it, so it never makes the overall status DEGRADED.
	ServingStatus_SERVING_STATUS_NOT_CONFIGURED ServingStatus = 4
)

// Enum value maps for ServingStatus.
var (
	ServingStatus_name = map[int32]string{
		0: "SERVING_STATUS_UNSPECIFIED",
		1: "SERVING_STATUS_SERVING",
		2: "SERVING_STATUS_DEGRADED",
		3: "SERVING_STATUS_NOT_SERVING",
		4: "SERVING_STATUS_NOT_CONFIGURED",
	}
	ServingStatus_value = map[string]int32{
		"SERVING_STATUS_UNSPECIFIED":    0,
		"SERVING_STATUS_SERVING":        1,
		"SERVING_STATUS_DEGRADED":       2,
		"SERVING_STATUS_NOT_SERVING":    3,
		"SERVING_STATUS_NOT_CONFIGURED": 4,
	}
)

func (x ServingStatus) Enum() *ServingStatus {
	p := new(ServingStatus)
	*p = x
	return p
}

func (x ServingStatus) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (ServingStatus) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[3].Descriptor()
}

func (ServingStatus) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[3]
}

func (x ServingStatus) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use ServingStatus.Descriptor instead.
func (ServingStatus) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{3}
}

// Who may read a document.
type Access int32

const (
	// Not set: ACCESS_PUBLIC, for a document sent without owner_id and granted_user_ids (with
	// either, INVALID_ARGUMENT: see DocumentInput.access).
	Access_ACCESS_UNSPECIFIED Access = 0
	// Every caller, anonymous included.
	Access_ACCESS_PUBLIC Access = 1
	// Its owner, the users it is granted to, and SUPER_ADMIN. Needs DocumentInput.owner_id.
	Access_ACCESS_PRIVATE Access = 2
)

// Enum value maps for Access.
var (
	Access_name = map[int32]string{
		0: "ACCESS_UNSPECIFIED",
		1: "ACCESS_PUBLIC",
		2: "ACCESS_PRIVATE",
	}
	Access_value = map[string]int32{
		"ACCESS_UNSPECIFIED": 0,
		"ACCESS_PUBLIC":      1,
		"ACCESS_PRIVATE":     2,
	}
)

func (x Access) Enum() *Access {
	p := new(Access)
	*p = x
	return p
}

func (x Access) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Access) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[4].Descriptor()
}

func (Access) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[4]
}

func (x Access) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Access.Descriptor instead.
func (Access) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{4}
}

// What the router of a MODE_GENERATION request chose.
type Route int32

const (
	// Not set (MODE_RETRIEVAL_ONLY requests are not routed).
	Route_ROUTE_UNSPECIFIED Route = 0
	// Search the documents, then answer from the contexts found.
	Route_ROUTE_RETRIEVE Route = 1
	// Run tools (lookup_facts, summarize, calculate, analyze_dependencies), then answer from their
	// results; summarize runs after retrieval.
	Route_ROUTE_TOOL Route = 2
	// Answer without looking anything up (greetings, questions about the assistant).
	Route_ROUTE_DIRECT_ANSWER Route = 3
)

// Enum value maps for Route.
var (
	Route_name = map[int32]string{
		0: "ROUTE_UNSPECIFIED",
		1: "ROUTE_RETRIEVE",
		2: "ROUTE_TOOL",
		3: "ROUTE_DIRECT_ANSWER",
	}
	Route_value = map[string]int32{
		"ROUTE_UNSPECIFIED":   0,
		"ROUTE_RETRIEVE":      1,
		"ROUTE_TOOL":          2,
		"ROUTE_DIRECT_ANSWER": 3,
	}
)

func (x Route) Enum() *Route {
	p := new(Route)
	*p = x
	return p
}

func (x Route) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (Route) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[5].Descriptor()
}

func (Route) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[5]
}

func (x Route) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use Route.Descriptor instead.
func (Route) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{5}
}

// How an entity named in the query was recognized.
type EntityMatchKind int32

const (
	// Not set.
	EntityMatchKind_ENTITY_MATCH_KIND_UNSPECIFIED EntityMatchKind = 0
	// The query wrote the name exactly as the documents do.
	EntityMatchKind_ENTITY_MATCH_KIND_EXACT EntityMatchKind = 1
	// Same letters and digits, ignoring case, spaces and punctuation ("auth service" = "AuthService").
	EntityMatchKind_ENTITY_MATCH_KIND_CASE_FOLDED EntityMatchKind = 2
	// A close spelling (rapidfuzz ratio at least RETRIEVAL_GRAPH_FUZZY_THRESHOLD, 88 of 100).
	EntityMatchKind_ENTITY_MATCH_KIND_FUZZY EntityMatchKind = 3
)

// Enum value maps for EntityMatchKind.
var (
	EntityMatchKind_name = map[int32]string{
		0: "ENTITY_MATCH_KIND_UNSPECIFIED",
		1: "ENTITY_MATCH_KIND_EXACT",
		2: "ENTITY_MATCH_KIND_CASE_FOLDED",
		3: "ENTITY_MATCH_KIND_FUZZY",
	}
	EntityMatchKind_value = map[string]int32{
		"ENTITY_MATCH_KIND_UNSPECIFIED": 0,
		"ENTITY_MATCH_KIND_EXACT":       1,
		"ENTITY_MATCH_KIND_CASE_FOLDED": 2,
		"ENTITY_MATCH_KIND_FUZZY":       3,
	}
)

func (x EntityMatchKind) Enum() *EntityMatchKind {
	p := new(EntityMatchKind)
	*p = x
	return p
}

func (x EntityMatchKind) String() string {
	return protoimpl.X.EnumStringOf(x.Descriptor(), protoreflect.EnumNumber(x))
}

func (EntityMatchKind) Descriptor() protoreflect.EnumDescriptor {
	return file_retrieval_v1_retrieval_proto_enumTypes[6].Descriptor()
}

func (EntityMatchKind) Type() protoreflect.EnumType {
	return &file_retrieval_v1_retrieval_proto_enumTypes[6]
}

func (x EntityMatchKind) Number() protoreflect.EnumNumber {
	return protoreflect.EnumNumber(x)
}

// Deprecated: Use EntityMatchKind.Descriptor instead.
func (EntityMatchKind) EnumDescriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{6}
}

// Restrictions on what a Query may retrieve, on top of the caller's access rights.
type QueryFilters struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Only these documents are searched. Empty: no restriction. At most
	// RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST (1,000) ids; an empty id is INVALID_ARGUMENT. Ids the
	// caller may not read, or that are not stored, match nothing (no error).
	DocumentIds []string `protobuf:"bytes,1,rep,name=document_ids,json=documentIds,proto3" json:"document_ids,omitempty"`
}

func (x *QueryFilters) Reset() {
	*x = QueryFilters{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[0]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *QueryFilters) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*QueryFilters) ProtoMessage() {}

func (x *QueryFilters) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[0]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use QueryFilters.ProtoReflect.Descriptor instead.
func (*QueryFilters) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{0}
}

func (x *QueryFilters) GetDocumentIds() []string {
	if x != nil {
		return x.DocumentIds
	}
	return nil
}

// A question and how to answer it. Only `query` is required.
type QueryRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The question: at least 1 character, one of them visible (not white space, a control or a
	// format character), and at most 65,536 bytes of UTF-8 after trimming
	// (RETRIEVAL_QUERY_MIN_CHARS, RETRIEVAL_QUERY_MAX_BYTES). Long text is accepted: the model
	// reads its first RETRIEVAL_MAX_SEQ_LENGTH (256) tokens, and its first
	// RETRIEVAL_QUERY_MAX_WINDOWS (8) child-sized windows when it is longer than a child; keyword
	// search reads its first RETRIEVAL_QUERY_MAX_TERMS (512) distinct terms.
	Query string `protobuf:"bytes,1,opt,name=query,proto3" json:"query,omitempty"`
	// How many contexts to return at most: 1 to 100 (RETRIEVAL_TOP_K_MAX). 0 (unset): 5
	// (RETRIEVAL_TOP_K_DEFAULT).
	TopK int32 `protobuf:"varint,2,opt,name=top_k,json=topK,proto3" json:"top_k,omitempty"`
	// Which retrieval legs run. Unset: STRATEGY_SEMANTIC.
	Strategy Strategy `protobuf:"varint,3,opt,name=strategy,proto3,enum=retrieval.v1.Strategy" json:"strategy,omitempty"`
	// What the call produces. Unset: MODE_RETRIEVAL_ONLY.
	Mode Mode `protobuf:"varint,4,opt,name=mode,proto3,enum=retrieval.v1.Mode" json:"mode,omitempty"`
	// Whether the semantic cache may answer and store this call. Unset: true. The cache matches
	// the normalized query exactly, then by cosine similarity >= RETRIEVAL_CACHE_SIMILARITY (0.95)
	// among calls with the same options and the same readable documents, and only when both
	// queries name the same identifiers (codes, words with a digit, ALL-CAPS acronyms); a
	// STRATEGY_KEYWORD call is matched exactly only. Entries live RETRIEVAL_CACHE_TTL_S (3,600 s)
	// and are dropped when a document they cite changes.
	UseCache *bool `protobuf:"varint,5,opt,name=use_cache,json=useCache,proto3,oneof" json:"use_cache,omitempty"`
	// Restrictions on the searched documents. Unset: none.
	Filters *QueryFilters `protobuf:"bytes,6,opt,name=filters,proto3" json:"filters,omitempty"`
	// How HYBRID legs are combined. Unset: the server's RETRIEVAL_FUSION.
	Fusion Fusion `protobuf:"varint,7,opt,name=fusion,proto3,enum=retrieval.v1.Fusion" json:"fusion,omitempty"`
	// Whether the configured cross-encoder reorders the best RETRIEVAL_RERANK_CANDIDATES (50)
	// fused candidates. Only those go on, and those scoring below RETRIEVAL_RERANK_THRESHOLD (0.3)
	// are dropped (when none passes, the best are kept until they cover
	// RETRIEVAL_RERANK_FALLBACK, 3, contexts), so fewer than top_k contexts may come back. Unset: true. False keeps the fused order. Without a
	// reranker configured the fused order is kept either way, and Metrics.degraded says
	// `rerank:unavailable` unless the request set false.
	Rerank *bool `protobuf:"varint,8,opt,name=rerank,proto3,oneof" json:"rerank,omitempty"`
}

func (x *QueryRequest) Reset() {
	*x = QueryRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[1]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *QueryRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*QueryRequest) ProtoMessage() {}

func (x *QueryRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[1]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use QueryRequest.ProtoReflect.Descriptor instead.
func (*QueryRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{1}
}

func (x *QueryRequest) GetQuery() string {
	if x != nil {
		return x.Query
	}
	return ""
}

func (x *QueryRequest) GetTopK() int32 {
	if x != nil {
		return x.TopK
	}
	return 0
}

func (x *QueryRequest) GetStrategy() Strategy {
	if x != nil {
		return x.Strategy
	}
	return Strategy_STRATEGY_UNSPECIFIED
}

func (x *QueryRequest) GetMode() Mode {
	if x != nil {
		return x.Mode
	}
	return Mode_MODE_UNSPECIFIED
}

func (x *QueryRequest) GetUseCache() bool {
	if x != nil && x.UseCache != nil {
		return *x.UseCache
	}
	return false
}

func (x *QueryRequest) GetFilters() *QueryFilters {
	if x != nil {
		return x.Filters
	}
	return nil
}

func (x *QueryRequest) GetFusion() Fusion {
	if x != nil {
		return x.Fusion
	}
	return Fusion_FUSION_UNSPECIFIED
}

func (x *QueryRequest) GetRerank() bool {
	if x != nil && x.Rerank != nil {
		return *x.Rerank
	}
	return false
}

// A child chunk: a sentence window inside a parent chunk, the unit that is embedded and
// searched. Returned as the evidence for its parent.
type ChildChunk struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Stable id `<document_id>#p<parent index>c<child index>`, the child index counting the
	// document's children from 0 (not the parent's), e.g. `handbook#p3c11`.
	ChunkId string `protobuf:"bytes,1,opt,name=chunk_id,json=chunkId,proto3" json:"chunk_id,omitempty"`
	// The child's text: at most RETRIEVAL_CHILD_CHUNK_TOKENS (128) tokens of whole sentences,
	// overlapping its neighbour by RETRIEVAL_CHILD_OVERLAP_TOKENS (32). Not always a substring of
	// its parent's content: white space between two of its sentences is one space (none where the
	// source has none).
	Content string `protobuf:"bytes,2,opt,name=content,proto3" json:"content,omitempty"`
	// Relevance of this child, higher is better: when the cross-encoder ran, its score, a
	// probability in [0, 1] with RETRIEVAL_RERANK_ACTIVATION `sigmoid` (the default) or a raw
	// logit, of any sign, with `none`; otherwise the fused or leg score. Compare scores within one
	// response only.
	Score float32 `protobuf:"fixed32,3,opt,name=score,proto3" json:"score,omitempty"`
}

func (x *ChildChunk) Reset() {
	*x = ChildChunk{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[2]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *ChildChunk) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ChildChunk) ProtoMessage() {}

func (x *ChildChunk) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[2]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ChildChunk.ProtoReflect.Descriptor instead.
func (*ChildChunk) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{2}
}

func (x *ChildChunk) GetChunkId() string {
	if x != nil {
		return x.ChunkId
	}
	return ""
}

func (x *ChildChunk) GetContent() string {
	if x != nil {
		return x.Content
	}
	return ""
}

func (x *ChildChunk) GetScore() float32 {
	if x != nil {
		return x.Score
	}
	return 0
}

// Where a context comes from.
type DocumentMetadata struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The document's title as ingested (DocumentInput.title, else the file's own title, else the
	// file name without extension).
	Title string `protobuf:"bytes,1,opt,name=title,proto3" json:"title,omitempty"`
	// The document's URL as ingested; empty when none was given.
	Url string `protobuf:"bytes,2,opt,name=url,proto3" json:"url,omitempty"`
	// 1-based page of a paged source (PDF) the parent chunk comes from; 0 when the source has no
	// pages. A parent chunk never spans two pages.
	Page int32 `protobuf:"varint,3,opt,name=page,proto3" json:"page,omitempty"`
	// Position of the parent chunk within its document, from 0.
	ChunkIndex int32 `protobuf:"varint,4,opt,name=chunk_index,json=chunkIndex,proto3" json:"chunk_index,omitempty"`
	// The provenance given at ingestion (DocumentInput.source), else the file name.
	Source string `protobuf:"bytes,5,opt,name=source,proto3" json:"source,omitempty"`
	// The free-form metadata given at ingestion (DocumentInput.metadata). Empty: none.
	Extra map[string]string `protobuf:"bytes,6,rep,name=extra,proto3" json:"extra,omitempty" protobuf_key:"bytes,1,opt,name=key,proto3" protobuf_val:"bytes,2,opt,name=value,proto3"`
}

func (x *DocumentMetadata) Reset() {
	*x = DocumentMetadata{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[3]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *DocumentMetadata) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DocumentMetadata) ProtoMessage() {}

func (x *DocumentMetadata) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[3]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DocumentMetadata.ProtoReflect.Descriptor instead.
func (*DocumentMetadata) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{3}
}

func (x *DocumentMetadata) GetTitle() string {
	if x != nil {
		return x.Title
	}
	return ""
}

func (x *DocumentMetadata) GetUrl() string {
	if x != nil {
		return x.Url
	}
	return ""
}

func (x *DocumentMetadata) GetPage() int32 {
	if x != nil {
		return x.Page
	}
	return 0
}

func (x *DocumentMetadata) GetChunkIndex() int32 {
	if x != nil {
		return x.ChunkIndex
	}
	return 0
}

func (x *DocumentMetadata) GetSource() string {
	if x != nil {
		return x.Source
	}
	return ""
}

func (x *DocumentMetadata) GetExtra() map[string]string {
	if x != nil {
		return x.Extra
	}
	return nil
}

// One grounded context: a parent chunk (a section of a document) with the children that
// matched.
type Context struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Stable id `<document_id>#p<index>`, e.g. `handbook#p3`; re-ingesting unchanged content
	// keeps it.
	ParentChunkId string `protobuf:"bytes,1,opt,name=parent_chunk_id,json=parentChunkId,proto3" json:"parent_chunk_id,omitempty"`
	// The id of the document the context comes from.
	DocumentId string `protobuf:"bytes,2,opt,name=document_id,json=documentId,proto3" json:"document_id,omitempty"`
	// The parent chunk's text: at most RETRIEVAL_PARENT_CHUNK_TOKENS (384) tokens of whole
	// sentences.
	Content string `protobuf:"bytes,3,opt,name=content,proto3" json:"content,omitempty"`
	// Number of tokens in `content`, as the chunker counted them in the text it was cut from
	// (the sum of its sentences'; a sentence counts at least one token per 100 characters):
	// tokenizing `content` again may give one more or fewer for a parent that starts inside a word.
	Tokens int32 `protobuf:"varint,4,opt,name=tokens,proto3" json:"tokens,omitempty"`
	// The context's relevance: its best child's score. Higher is better; contexts are ordered by
	// it. Compare within one response only.
	Score float32 `protobuf:"fixed32,5,opt,name=score,proto3" json:"score,omitempty"`
	// Title, URL, page and the rest of the document's metadata.
	Metadata *DocumentMetadata `protobuf:"bytes,6,opt,name=metadata,proto3" json:"metadata,omitempty"`
	// The child chunks that matched, best first; never empty.
	ChildChunks []*ChildChunk `protobuf:"bytes,7,rep,name=child_chunks,json=childChunks,proto3" json:"child_chunks,omitempty"`
}

func (x *Context) Reset() {
	*x = Context{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[4]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *Context) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Context) ProtoMessage() {}

func (x *Context) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[4]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Context.ProtoReflect.Descriptor instead.
func (*Context) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{4}
}

func (x *Context) GetParentChunkId() string {
	if x != nil {
		return x.ParentChunkId
	}
	return ""
}

func (x *Context) GetDocumentId() string {
	if x != nil {
		return x.DocumentId
	}
	return ""
}

func (x *Context) GetContent() string {
	if x != nil {
		return x.Content
	}
	return ""
}

func (x *Context) GetTokens() int32 {
	if x != nil {
		return x.Tokens
	}
	return 0
}

func (x *Context) GetScore() float32 {
	if x != nil {
		return x.Score
	}
	return 0
}

func (x *Context) GetMetadata() *DocumentMetadata {
	if x != nil {
		return x.Metadata
	}
	return nil
}

func (x *Context) GetChildChunks() []*ChildChunk {
	if x != nil {
		return x.ChildChunks
	}
	return nil
}

// The time and output of one pipeline stage.
type StageMetric struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Stage name: `check_cache`, `analyze_query`, `build_access_filter`, `retrieve`, `fuse`,
	// `rerank`, `enrich`, `check_sufficiency`, `execute_sub_queries`, `select`, `update_cache`;
	// in MODE_GENERATION also `route`, `run_tools` and `generate`.
	// A stage that ran twice (a retry) is listed twice.
	Stage string `protobuf:"bytes,1,opt,name=stage,proto3" json:"stage,omitempty"`
	// Wall time of the stage on the server, in milliseconds.
	DurationMs float64 `protobuf:"fixed64,2,opt,name=duration_ms,json=durationMs,proto3" json:"duration_ms,omitempty"`
	// Items the stage produced (hits, candidates, contexts); 0 for stages that produce none, and
	// for a stage cut at the request's deadline (what it made is not used).
	Count int32 `protobuf:"varint,3,opt,name=count,proto3" json:"count,omitempty"`
}

func (x *StageMetric) Reset() {
	*x = StageMetric{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[5]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *StageMetric) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*StageMetric) ProtoMessage() {}

func (x *StageMetric) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[5]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use StageMetric.ProtoReflect.Descriptor instead.
func (*StageMetric) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{5}
}

func (x *StageMetric) GetStage() string {
	if x != nil {
		return x.Stage
	}
	return ""
}

func (x *StageMetric) GetDurationMs() float64 {
	if x != nil {
		return x.DurationMs
	}
	return 0
}

func (x *StageMetric) GetCount() int32 {
	if x != nil {
		return x.Count
	}
	return 0
}

// How a Query was answered: timings, the path through the pipeline, and what was degraded.
type Metrics struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Wall time of the whole Query on the server, in milliseconds (network not included).
	TotalMs float64 `protobuf:"fixed64,1,opt,name=total_ms,json=totalMs,proto3" json:"total_ms,omitempty"`
	// Every stage that ran, in the order it ran.
	Stages []*StageMetric `protobuf:"bytes,2,rep,name=stages,proto3" json:"stages,omitempty"`
	// True when the semantic cache answered (same as QueryResponse.cached).
	CacheHit bool `protobuf:"varint,3,opt,name=cache_hit,json=cacheHit,proto3" json:"cache_hit,omitempty"`
	// Retrieval passes that ran: 1, up to RETRIEVAL_MAX_ITERATIONS (2) when the first was not
	// sufficient; 0 for a cache hit.
	Iterations int32 `protobuf:"varint,4,opt,name=iterations,proto3" json:"iterations,omitempty"`
	// How well the contexts cover the question, 0 to 1 (0.3 x contexts found of top_k + 0.4 x
	// mean relevance + 0.3 x document diversity). Below RETRIEVAL_SUFFICIENCY_THRESHOLD (0.6) the
	// server retries and decomposes. A cache hit reports the score of the pass that found its
	// contexts (0, like the fields below, for an answer cached by a version that did not keep them).
	SufficiencyScore float32 `protobuf:"fixed32,5,opt,name=sufficiency_score,json=sufficiencyScore,proto3" json:"sufficiency_score,omitempty"`
	// True when no reranked candidate reached RETRIEVAL_RERANK_THRESHOLD (0.3; on each retry
	// halved, or lowered by 0.5 when at or below 0), so the best candidates were kept anyway, as
	// many as cover RETRIEVAL_RERANK_FALLBACK (3) contexts, in the pass whose contexts are returned
	// (for a cache hit, the pass that found them).
	RerankFallbackTriggered bool `protobuf:"varint,6,opt,name=rerank_fallback_triggered,json=rerankFallbackTriggered,proto3" json:"rerank_fallback_triggered,omitempty"`
	// What was degraded, as `<part>:<reason>` (e.g. `rerank:unavailable`, `dense:embedding_failed`,
	// `keyword:store_error`, `keyword:no_terms` (stop words only: no keyword term to search),
	// `sub_queries:store_error`, `analysis:hyde:skipped: needs an LLM`,
	// `deadline:partial_results`, `response:contexts_capped`).
	// Empty: nothing was. A cache hit reports, besides its own, those of the pass that found its
	// contexts that describe them whoever is served them (`rerank:unavailable`, `keyword:no_terms`,
	// an `analysis:` technique skipped); an answer a failure, the deadline or the rerank budget
	// (`rerank:budget`, a cut at a rate the machine's load decides) degraded is never cached.
	Degraded []string `protobuf:"bytes,7,rep,name=degraded,proto3" json:"degraded,omitempty"`
	// True when the question was split into sub-queries whose hits were fused into the pass
	// whose contexts are returned (False when they found nothing, or that pass lost a leg or a
	// stage and scored lower than an earlier pass). A cache hit reports the pass that found its
	// contexts; False when the cache answered with the answer to a similar query.
	DecompositionUsed bool `protobuf:"varint,8,opt,name=decomposition_used,json=decompositionUsed,proto3" json:"decomposition_used,omitempty"`
	// The strategy that produced the answer: ADAPTIVE resolves to HYBRID (its legs weighed), and
	// a failed query embedding falls back to KEYWORD. Never STRATEGY_UNSPECIFIED.
	StrategyUsed Strategy `protobuf:"varint,9,opt,name=strategy_used,json=strategyUsed,proto3,enum=retrieval.v1.Strategy" json:"strategy_used,omitempty"`
	// MODE_GENERATION only (unset otherwise): what the router decided and why.
	Route *RouteDecision `protobuf:"bytes,10,opt,name=route,proto3" json:"route,omitempty"`
	// The graph leg's trace in the answering pass: the entities the query named and each hop's
	// expansion. Unset when the leg did not run (strategies other than GRAPH, HYBRID and ADAPTIVE,
	// or the graph disabled), or failed or was cut at the deadline in that pass. A cache hit reports
	// the pass that found its contexts; unset when the cache answered with the answer to a similar
	// query (that query's entities, in its caller's words).
	Graph *GraphTrace `protobuf:"bytes,11,opt,name=graph,proto3" json:"graph,omitempty"`
	// What the answering pass searched in the caller's stead: the query's rewrite (query analysis,
	// with the codes, numbers, addresses and quoted phrases it left out added back at its end).
	// Empty when the caller's own words were searched. A cache hit reports the pass that found its
	// contexts; empty when the cache answered with the answer to a similar query (whose rewrite, in
	// its caller's words, is not told to another caller).
	RewrittenQuery string `protobuf:"bytes,12,opt,name=rewritten_query,json=rewrittenQuery,proto3" json:"rewritten_query,omitempty"`
	// The sub-queries the question was split into, when their hits were fused into the answering
	// pass (decomposition_used). Empty otherwise. A cache hit: as rewritten_query.
	SubQueries []string `protobuf:"bytes,13,rep,name=sub_queries,json=subQueries,proto3" json:"sub_queries,omitempty"`
}

func (x *Metrics) Reset() {
	*x = Metrics{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[6]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *Metrics) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Metrics) ProtoMessage() {}

func (x *Metrics) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[6]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Metrics.ProtoReflect.Descriptor instead.
func (*Metrics) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{6}
}

func (x *Metrics) GetTotalMs() float64 {
	if x != nil {
		return x.TotalMs
	}
	return 0
}

func (x *Metrics) GetStages() []*StageMetric {
	if x != nil {
		return x.Stages
	}
	return nil
}

func (x *Metrics) GetCacheHit() bool {
	if x != nil {
		return x.CacheHit
	}
	return false
}

func (x *Metrics) GetIterations() int32 {
	if x != nil {
		return x.Iterations
	}
	return 0
}

func (x *Metrics) GetSufficiencyScore() float32 {
	if x != nil {
		return x.SufficiencyScore
	}
	return 0
}

func (x *Metrics) GetRerankFallbackTriggered() bool {
	if x != nil {
		return x.RerankFallbackTriggered
	}
	return false
}

func (x *Metrics) GetDegraded() []string {
	if x != nil {
		return x.Degraded
	}
	return nil
}

func (x *Metrics) GetDecompositionUsed() bool {
	if x != nil {
		return x.DecompositionUsed
	}
	return false
}

func (x *Metrics) GetStrategyUsed() Strategy {
	if x != nil {
		return x.StrategyUsed
	}
	return Strategy_STRATEGY_UNSPECIFIED
}

func (x *Metrics) GetRoute() *RouteDecision {
	if x != nil {
		return x.Route
	}
	return nil
}

func (x *Metrics) GetGraph() *GraphTrace {
	if x != nil {
		return x.Graph
	}
	return nil
}

func (x *Metrics) GetRewrittenQuery() string {
	if x != nil {
		return x.RewrittenQuery
	}
	return ""
}

func (x *Metrics) GetSubQueries() []string {
	if x != nil {
		return x.SubQueries
	}
	return nil
}

// The answer to a Query.
type QueryResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The caller's query, trimmed. What was searched instead of it, if anything, is in
	// Metrics.rewritten_query and Metrics.sub_queries.
	Query string `protobuf:"bytes,1,opt,name=query,proto3" json:"query,omitempty"`
	// The best contexts, at most top_k, best first, no two with the same text (case and white
	// space aside: of sections several documents hold alike, the best readable one stands for
	// all). Empty when nothing readable matched. Fewer when they would weigh more than
	// RETRIEVAL_MAX_RESPONSE_BYTES (4,128,768 bytes): the last ones are left out, and
	// Metrics.degraded says `response:contexts_capped`. A GENERATION answer's as well: those
	// kept keep the numbers its text cites them by, and the Citation of one left out still
	// names it.
	Contexts []*Context `protobuf:"bytes,2,rep,name=contexts,proto3" json:"contexts,omitempty"`
	// Timings and the path through the pipeline.
	Metrics *Metrics `protobuf:"bytes,3,opt,name=metrics,proto3" json:"metrics,omitempty"`
	// True when the semantic cache answered.
	Cached bool `protobuf:"varint,4,opt,name=cached,proto3" json:"cached,omitempty"`
	// Only when `contexts` is empty: what the caller could try instead (related document titles,
	// another strategy, removing a filter). Human-readable.
	Suggestions []string `protobuf:"bytes,5,rep,name=suggestions,proto3" json:"suggestions,omitempty"`
	// MODE_GENERATION only (unset otherwise): the answer, whose citations point into `contexts`.
	Answer *Answer `protobuf:"bytes,6,opt,name=answer,proto3" json:"answer,omitempty"`
}

func (x *QueryResponse) Reset() {
	*x = QueryResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[7]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *QueryResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*QueryResponse) ProtoMessage() {}

func (x *QueryResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[7]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use QueryResponse.ProtoReflect.Descriptor instead.
func (*QueryResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{7}
}

func (x *QueryResponse) GetQuery() string {
	if x != nil {
		return x.Query
	}
	return ""
}

func (x *QueryResponse) GetContexts() []*Context {
	if x != nil {
		return x.Contexts
	}
	return nil
}

func (x *QueryResponse) GetMetrics() *Metrics {
	if x != nil {
		return x.Metrics
	}
	return nil
}

func (x *QueryResponse) GetCached() bool {
	if x != nil {
		return x.Cached
	}
	return false
}

func (x *QueryResponse) GetSuggestions() []string {
	if x != nil {
		return x.Suggestions
	}
	return nil
}

func (x *QueryResponse) GetAnswer() *Answer {
	if x != nil {
		return x.Answer
	}
	return nil
}

// A simple semantic search.
type SearchRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The search text: at least 1 character, one of them visible (not white space, a control or a
	// format character), and at most 65,536 bytes of UTF-8 after trimming
	// (RETRIEVAL_QUERY_MIN_CHARS, RETRIEVAL_QUERY_MAX_BYTES). The model reads its first
	// RETRIEVAL_MAX_SEQ_LENGTH (256) tokens.
	Query string `protobuf:"bytes,1,opt,name=query,proto3" json:"query,omitempty"`
	// How many results to return at most: 1 to 20 (RETRIEVAL_SEARCH_TOP_K_MAX). 0 (unset): 5
	// (RETRIEVAL_SEARCH_TOP_K_DEFAULT).
	TopK int32 `protobuf:"varint,2,opt,name=top_k,json=topK,proto3" json:"top_k,omitempty"`
}

func (x *SearchRequest) Reset() {
	*x = SearchRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[8]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *SearchRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SearchRequest) ProtoMessage() {}

func (x *SearchRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[8]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SearchRequest.ProtoReflect.Descriptor instead.
func (*SearchRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{8}
}

func (x *SearchRequest) GetQuery() string {
	if x != nil {
		return x.Query
	}
	return ""
}

func (x *SearchRequest) GetTopK() int32 {
	if x != nil {
		return x.TopK
	}
	return 0
}

// One Search hit: a child chunk with its document's title and URL.
type SearchResult struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The chunk's text, trimmed to RETRIEVAL_SEARCH_TEXT_CHARS (800) characters.
	Text string `protobuf:"bytes,1,opt,name=text,proto3" json:"text,omitempty"`
	// The id of the document the chunk comes from.
	DocumentId string `protobuf:"bytes,2,opt,name=document_id,json=documentId,proto3" json:"document_id,omitempty"`
	// Position of the chunk among its document's child chunks, from 0 (the `c` index of its
	// chunk id).
	ChunkIndex int32 `protobuf:"varint,3,opt,name=chunk_index,json=chunkIndex,proto3" json:"chunk_index,omitempty"`
	// The document's title.
	Title string `protobuf:"bytes,4,opt,name=title,proto3" json:"title,omitempty"`
	// 1-based page in a paged source (PDF); 0 when the source has no pages.
	Page int32 `protobuf:"varint,5,opt,name=page,proto3" json:"page,omitempty"`
	// The document's URL; empty when none was given.
	Url string `protobuf:"bytes,6,opt,name=url,proto3" json:"url,omitempty"`
	// Cosine similarity between the query and the chunk, -1 to 1, higher is better.
	Score float32 `protobuf:"fixed32,7,opt,name=score,proto3" json:"score,omitempty"`
}

func (x *SearchResult) Reset() {
	*x = SearchResult{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[9]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *SearchResult) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SearchResult) ProtoMessage() {}

func (x *SearchResult) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[9]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SearchResult.ProtoReflect.Descriptor instead.
func (*SearchResult) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{9}
}

func (x *SearchResult) GetText() string {
	if x != nil {
		return x.Text
	}
	return ""
}

func (x *SearchResult) GetDocumentId() string {
	if x != nil {
		return x.DocumentId
	}
	return ""
}

func (x *SearchResult) GetChunkIndex() int32 {
	if x != nil {
		return x.ChunkIndex
	}
	return 0
}

func (x *SearchResult) GetTitle() string {
	if x != nil {
		return x.Title
	}
	return ""
}

func (x *SearchResult) GetPage() int32 {
	if x != nil {
		return x.Page
	}
	return 0
}

func (x *SearchResult) GetUrl() string {
	if x != nil {
		return x.Url
	}
	return ""
}

func (x *SearchResult) GetScore() float32 {
	if x != nil {
		return x.Score
	}
	return 0
}

// The answer to a Search.
type SearchResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The query as the server used it (trimmed).
	Query string `protobuf:"bytes,1,opt,name=query,proto3" json:"query,omitempty"`
	// At most top_k results, best first, no two with the same text, as many as fit in
	// RETRIEVAL_MAX_RESPONSE_BYTES, and at least one; `results_not_listed` counts the rest. Empty
	// when nothing readable is indexed.
	Results []*SearchResult `protobuf:"bytes,2,rep,name=results,proto3" json:"results,omitempty"`
	// Results found after the last one listed, not listed: at a large top_k, documents with long
	// urls and titles would make an answer over the 4 MiB a gRPC client reads by default. 0: all are listed.
	ResultsNotListed int32 `protobuf:"varint,3,opt,name=results_not_listed,json=resultsNotListed,proto3" json:"results_not_listed,omitempty"`
}

func (x *SearchResponse) Reset() {
	*x = SearchResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[10]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *SearchResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*SearchResponse) ProtoMessage() {}

func (x *SearchResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[10]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use SearchResponse.ProtoReflect.Descriptor instead.
func (*SearchResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{10}
}

func (x *SearchResponse) GetQuery() string {
	if x != nil {
		return x.Query
	}
	return ""
}

func (x *SearchResponse) GetResults() []*SearchResult {
	if x != nil {
		return x.Results
	}
	return nil
}

func (x *SearchResponse) GetResultsNotListed() int32 {
	if x != nil {
		return x.ResultsNotListed
	}
	return 0
}

// Health takes no parameters.
type HealthRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields
}

func (x *HealthRequest) Reset() {
	*x = HealthRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[11]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *HealthRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*HealthRequest) ProtoMessage() {}

func (x *HealthRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[11]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use HealthRequest.ProtoReflect.Descriptor instead.
func (*HealthRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{11}
}

// The state of one component.
type ComponentHealth struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Component name: `vector_store`, `metadata_store`, `embedder` (required); `disk` (free space on
	// the embedded stores' volume: below RETRIEVAL_MIN_FREE_DISK_MB ingestion is refused and the
	// component is DEGRADED), `cache`, `reranker`, `llm` (optional); `auth` (how callers are
	// identified: NOT_CONFIGURED when RETRIEVAL_AUTH_MODE is `none`).
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// The component's state.
	Status ServingStatus `protobuf:"varint,2,opt,name=status,proto3,enum=retrieval.v1.ServingStatus" json:"status,omitempty"`
	// Human-readable: the implementation or model in use, what is not configured, or the kind of
	// error (a store's own message, which may name hosts or users, goes to the server's log only).
	Detail string `protobuf:"bytes,3,opt,name=detail,proto3" json:"detail,omitempty"`
}

func (x *ComponentHealth) Reset() {
	*x = ComponentHealth{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[12]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *ComponentHealth) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ComponentHealth) ProtoMessage() {}

func (x *ComponentHealth) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[12]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ComponentHealth.ProtoReflect.Descriptor instead.
func (*ComponentHealth) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{12}
}

func (x *ComponentHealth) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *ComponentHealth) GetStatus() ServingStatus {
	if x != nil {
		return x.Status
	}
	return ServingStatus_SERVING_STATUS_UNSPECIFIED
}

func (x *ComponentHealth) GetDetail() string {
	if x != nil {
		return x.Detail
	}
	return ""
}

// The answer to Health.
type HealthResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The overall state: NOT_SERVING if a required component is down, DEGRADED if an optional
	// one is failing, SERVING otherwise.
	Status ServingStatus `protobuf:"varint,1,opt,name=status,proto3,enum=retrieval.v1.ServingStatus" json:"status,omitempty"`
	// One entry per component: the stores and the cache probed by this call, the others as they
	// stand (see SERVING_STATUS_DEGRADED).
	Components []*ComponentHealth `protobuf:"bytes,2,rep,name=components,proto3" json:"components,omitempty"`
	// The server's version, e.g. `0.1.0`.
	Version string `protobuf:"bytes,3,opt,name=version,proto3" json:"version,omitempty"`
}

func (x *HealthResponse) Reset() {
	*x = HealthResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[13]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *HealthResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*HealthResponse) ProtoMessage() {}

func (x *HealthResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[13]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use HealthResponse.ProtoReflect.Descriptor instead.
func (*HealthResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{13}
}

func (x *HealthResponse) GetStatus() ServingStatus {
	if x != nil {
		return x.Status
	}
	return ServingStatus_SERVING_STATUS_UNSPECIFIED
}

func (x *HealthResponse) GetComponents() []*ComponentHealth {
	if x != nil {
		return x.Components
	}
	return nil
}

func (x *HealthResponse) GetVersion() string {
	if x != nil {
		return x.Version
	}
	return ""
}

// One file to ingest, with what the caller says about it.
type DocumentInput struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Stable identifier, 1 to 200 characters without control characters; re-ingesting the same
	// id replaces the document. Empty: the file name without extension. Not used for `.jsonl`:
	// each row's `_id` is its document's id.
	DocumentId string `protobuf:"bytes,1,opt,name=document_id,json=documentId,proto3" json:"document_id,omitempty"`
	// File name, at most 1,024 characters; its extension selects the loader: `.txt`, `.md`/`.markdown`, `.html`/`.htm`,
	// `.pdf`, or `.jsonl` (BEIR rows with `_id`, `title`, `text` and optional `metadata`: one
	// document per row). Empty: plain text, which then needs `document_id`. An unsupported
	// extension is reported in IngestDocumentsResponse.errors.
	Filename string `protobuf:"bytes,2,opt,name=filename,proto3" json:"filename,omitempty"`
	// The file's bytes, not empty; text formats are UTF-8, or UTF-16 or UTF-32 with a byte order
	// mark; HTML may be in the charset its <meta> declares. The whole request is limited to
	// RETRIEVAL_MAX_MESSAGE_MB (64 MiB).
	Content []byte `protobuf:"bytes,3,opt,name=content,proto3" json:"content,omitempty"`
	// Title shown in results, at most 1,024 characters. Empty: the file's own title (HTML
	// <title>, Markdown heading, PDF metadata; cut to 1,024 characters) or the file name without
	// extension. Not used for `.jsonl`: each row's `title` (empty when the row has none).
	Title string `protobuf:"bytes,4,opt,name=title,proto3" json:"title,omitempty"`
	// URL shown in results, at most 8,192 characters. Empty: none.
	Url string `protobuf:"bytes,5,opt,name=url,proto3" json:"url,omitempty"`
	// Free-form provenance, e.g. the original path, at most 1,024 characters. Empty: the file name.
	// The clients' document_from_file (DocumentFromFile, documentFromFile) send the path as given,
	// normalized (./docs/a.txt as docs/a.txt). A change of the url or source alone is stored without
	// embedding the document again, except for a document stored by an earlier release, embedded once
	// more at its first such change.
	Source string `protobuf:"bytes,6,opt,name=source,proto3" json:"source,omitempty"`
	// Who may read it. Unset: ACCESS_PUBLIC, for a document sent without owner_id and
	// granted_user_ids; with either, INVALID_ARGUMENT naming `documents[i].access` (a private
	// document sent again without its access would otherwise be published): set ACCESS_PRIVATE,
	// or ACCESS_PUBLIC for a public document with an owner.
	Access Access `protobuf:"varint,7,opt,name=access,proto3,enum=retrieval.v1.Access" json:"access,omitempty"`
	// The user who owns the document (an `x-user-id` or token subject); required for
	// ACCESS_PRIVATE (blank is no owner), taken with ACCESS_PUBLIC, refused with access unset.
	// Empty: no owner.
	OwnerId string `protobuf:"bytes,8,opt,name=owner_id,json=ownerId,proto3" json:"owner_id,omitempty"`
	// Free-form key/value pairs, searched by HYBRID's metadata leg and returned as
	// DocumentMetadata.extra; at most 16 KiB of UTF-8 in keys and values. Empty: none.
	Metadata map[string]string `protobuf:"bytes,9,rep,name=metadata,proto3" json:"metadata,omitempty" protobuf_key:"bytes,1,opt,name=key,proto3" protobuf_val:"bytes,2,opt,name=value,proto3"`
	// Users granted read access to a private document; re-ingesting replaces the list. Empty:
	// only the owner (and SUPER_ADMIN). At most 1,000 (more: grant a group, `group:<name>`). Only
	// with ACCESS_PRIVATE: on a public document (access unset included), which every caller reads,
	// INVALID_ARGUMENT.
	GrantedUserIds []string `protobuf:"bytes,10,rep,name=granted_user_ids,json=grantedUserIds,proto3" json:"granted_user_ids,omitempty"`
}

func (x *DocumentInput) Reset() {
	*x = DocumentInput{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[14]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *DocumentInput) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DocumentInput) ProtoMessage() {}

func (x *DocumentInput) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[14]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DocumentInput.ProtoReflect.Descriptor instead.
func (*DocumentInput) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{14}
}

func (x *DocumentInput) GetDocumentId() string {
	if x != nil {
		return x.DocumentId
	}
	return ""
}

func (x *DocumentInput) GetFilename() string {
	if x != nil {
		return x.Filename
	}
	return ""
}

func (x *DocumentInput) GetContent() []byte {
	if x != nil {
		return x.Content
	}
	return nil
}

func (x *DocumentInput) GetTitle() string {
	if x != nil {
		return x.Title
	}
	return ""
}

func (x *DocumentInput) GetUrl() string {
	if x != nil {
		return x.Url
	}
	return ""
}

func (x *DocumentInput) GetSource() string {
	if x != nil {
		return x.Source
	}
	return ""
}

func (x *DocumentInput) GetAccess() Access {
	if x != nil {
		return x.Access
	}
	return Access_ACCESS_UNSPECIFIED
}

func (x *DocumentInput) GetOwnerId() string {
	if x != nil {
		return x.OwnerId
	}
	return ""
}

func (x *DocumentInput) GetMetadata() map[string]string {
	if x != nil {
		return x.Metadata
	}
	return nil
}

func (x *DocumentInput) GetGrantedUserIds() []string {
	if x != nil {
		return x.GrantedUserIds
	}
	return nil
}

// Documents to add or replace.
type IngestDocumentsRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// 1 to RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST (1,000) files; document ids must be unique within
	// one request.
	Documents []*DocumentInput `protobuf:"bytes,1,rep,name=documents,proto3" json:"documents,omitempty"`
}

func (x *IngestDocumentsRequest) Reset() {
	*x = IngestDocumentsRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[15]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *IngestDocumentsRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*IngestDocumentsRequest) ProtoMessage() {}

func (x *IngestDocumentsRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[15]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use IngestDocumentsRequest.ProtoReflect.Descriptor instead.
func (*IngestDocumentsRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{15}
}

func (x *IngestDocumentsRequest) GetDocuments() []*DocumentInput {
	if x != nil {
		return x.Documents
	}
	return nil
}

// One document that is stored after the call.
type IngestedDocument struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The stored document's id.
	DocumentId string `protobuf:"bytes,1,opt,name=document_id,json=documentId,proto3" json:"document_id,omitempty"`
	// Parent chunks (the units returned by Query) the document has.
	ParentChunks int32 `protobuf:"varint,2,opt,name=parent_chunks,json=parentChunks,proto3" json:"parent_chunks,omitempty"`
	// Child chunks (the units embedded and searched) the document has.
	ChildChunks int32 `protobuf:"varint,3,opt,name=child_chunks,json=childChunks,proto3" json:"child_chunks,omitempty"`
	// True when a document with this id was already stored and was replaced (or found unchanged).
	Replaced bool `protobuf:"varint,4,opt,name=replaced,proto3" json:"replaced,omitempty"`
	// True when the document was found stored as sent and left so, nothing re-chunked or
	// re-embedded (same content, source, title, url, access, owner, grants and metadata, and the
	// same chunking and model); `replaced` is true too. One whose url or source alone changed is
	// written without being embedded again, and is not unchanged. The CLI and the clients'
	// document_from_file send a file's source as its path normalized, so that ./docs/a.txt and
	// docs/a.txt are one source, as are the same relative paths in two copies of a folder.
	Unchanged bool `protobuf:"varint,5,opt,name=unchanged,proto3" json:"unchanged,omitempty"`
}

func (x *IngestedDocument) Reset() {
	*x = IngestedDocument{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[16]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *IngestedDocument) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*IngestedDocument) ProtoMessage() {}

func (x *IngestedDocument) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[16]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use IngestedDocument.ProtoReflect.Descriptor instead.
func (*IngestedDocument) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{16}
}

func (x *IngestedDocument) GetDocumentId() string {
	if x != nil {
		return x.DocumentId
	}
	return ""
}

func (x *IngestedDocument) GetParentChunks() int32 {
	if x != nil {
		return x.ParentChunks
	}
	return 0
}

func (x *IngestedDocument) GetChildChunks() int32 {
	if x != nil {
		return x.ChildChunks
	}
	return 0
}

func (x *IngestedDocument) GetReplaced() bool {
	if x != nil {
		return x.Replaced
	}
	return false
}

func (x *IngestedDocument) GetUnchanged() bool {
	if x != nil {
		return x.Unchanged
	}
	return false
}

// One file or row that could not be ingested. A `.jsonl` file lists its first 100 rows that
// could not be read and its first 100 that could not be stored, then one error (`<file
// name>:line <n>+`, or the file name) counting the rest of each; a response lists 1,000 errors
// at most, as many as fit in RETRIEVAL_MAX_RESPONSE_BYTES, then one with an empty source
// counting the rest. A source is cut to 300 bytes of UTF-8 and a reason to 1,000 (ending in "…").
type IngestError struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The file name (or `<file name>:line <n> (<document id>)` for a row of a `.jsonl` file,
	// `<file name>:line <n>` for a row that could not be read, or the document id of a document
	// sent without a file name) that failed. The other rows of a `.jsonl` file are stored; one none of
	// whose rows can be read is the file's error.
	Source string `protobuf:"bytes,1,opt,name=source,proto3" json:"source,omitempty"`
	// Why, human-readable (e.g. `unsupported file type '.docx'`, `file is not UTF-8 text`).
	Reason string `protobuf:"bytes,2,opt,name=reason,proto3" json:"reason,omitempty"`
}

func (x *IngestError) Reset() {
	*x = IngestError{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[17]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *IngestError) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*IngestError) ProtoMessage() {}

func (x *IngestError) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[17]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use IngestError.ProtoReflect.Descriptor instead.
func (*IngestError) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{17}
}

func (x *IngestError) GetSource() string {
	if x != nil {
		return x.Source
	}
	return ""
}

func (x *IngestError) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

// The outcome of IngestDocuments.
type IngestDocumentsResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Every document that is now stored, in request order (several for one `.jsonl` file), as many
	// as fit in RETRIEVAL_MAX_RESPONSE_BYTES with the errors; `documents_not_listed` counts the rest.
	Documents []*IngestedDocument `protobuf:"bytes,1,rep,name=documents,proto3" json:"documents,omitempty"`
	// Every file or row that was not ingested, with the reason. Empty: all were.
	Errors []*IngestError `protobuf:"bytes,2,rep,name=errors,proto3" json:"errors,omitempty"`
	// Documents stored after the last one listed, not listed: a `.jsonl` file of tens of thousands
	// of rows would make an answer over the 4 MiB a gRPC client reads by default. 0: all are listed.
	DocumentsNotListed int32 `protobuf:"varint,3,opt,name=documents_not_listed,json=documentsNotListed,proto3" json:"documents_not_listed,omitempty"`
}

func (x *IngestDocumentsResponse) Reset() {
	*x = IngestDocumentsResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[18]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *IngestDocumentsResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*IngestDocumentsResponse) ProtoMessage() {}

func (x *IngestDocumentsResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[18]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use IngestDocumentsResponse.ProtoReflect.Descriptor instead.
func (*IngestDocumentsResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{18}
}

func (x *IngestDocumentsResponse) GetDocuments() []*IngestedDocument {
	if x != nil {
		return x.Documents
	}
	return nil
}

func (x *IngestDocumentsResponse) GetErrors() []*IngestError {
	if x != nil {
		return x.Errors
	}
	return nil
}

func (x *IngestDocumentsResponse) GetDocumentsNotListed() int32 {
	if x != nil {
		return x.DocumentsNotListed
	}
	return 0
}

// Documents to remove.
type DeleteDocumentsRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// 1 to RETRIEVAL_MAX_DOCUMENTS_PER_REQUEST (1,000) ids, none empty.
	DocumentIds []string `protobuf:"bytes,1,rep,name=document_ids,json=documentIds,proto3" json:"document_ids,omitempty"`
}

func (x *DeleteDocumentsRequest) Reset() {
	*x = DeleteDocumentsRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[19]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *DeleteDocumentsRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DeleteDocumentsRequest) ProtoMessage() {}

func (x *DeleteDocumentsRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[19]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DeleteDocumentsRequest.ProtoReflect.Descriptor instead.
func (*DeleteDocumentsRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{19}
}

func (x *DeleteDocumentsRequest) GetDocumentIds() []string {
	if x != nil {
		return x.DocumentIds
	}
	return nil
}

// The outcome of DeleteDocuments.
type DeleteDocumentsResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Ids that were stored and are now removed.
	Deleted []string `protobuf:"bytes,1,rep,name=deleted,proto3" json:"deleted,omitempty"`
	// Ids that were not stored (nothing to remove), or whose documents the caller may not read
	// (kept, and not told apart from missing ones).
	NotFound []string `protobuf:"bytes,2,rep,name=not_found,json=notFound,proto3" json:"not_found,omitempty"`
}

func (x *DeleteDocumentsResponse) Reset() {
	*x = DeleteDocumentsResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[20]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *DeleteDocumentsResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*DeleteDocumentsResponse) ProtoMessage() {}

func (x *DeleteDocumentsResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[20]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use DeleteDocumentsResponse.ProtoReflect.Descriptor instead.
func (*DeleteDocumentsResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{20}
}

func (x *DeleteDocumentsResponse) GetDeleted() []string {
	if x != nil {
		return x.Deleted
	}
	return nil
}

func (x *DeleteDocumentsResponse) GetNotFound() []string {
	if x != nil {
		return x.NotFound
	}
	return nil
}

// One tool call the router asked for.
type ToolCall struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Tool name: lookup_facts, summarize, calculate or analyze_dependencies.
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// The arguments as a JSON object, e.g. {"entity": "AuthService", "direction": "dependents"}.
	ArgumentsJson string `protobuf:"bytes,2,opt,name=arguments_json,json=argumentsJson,proto3" json:"arguments_json,omitempty"`
}

func (x *ToolCall) Reset() {
	*x = ToolCall{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[21]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *ToolCall) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ToolCall) ProtoMessage() {}

func (x *ToolCall) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[21]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ToolCall.ProtoReflect.Descriptor instead.
func (*ToolCall) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{21}
}

func (x *ToolCall) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *ToolCall) GetArgumentsJson() string {
	if x != nil {
		return x.ArgumentsJson
	}
	return ""
}

// The router's decision.
type RouteDecision struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Where the request went.
	Route Route `protobuf:"varint,1,opt,name=route,proto3,enum=retrieval.v1.Route" json:"route,omitempty"`
	// ROUTE_TOOL only: the tools to run, in order (at most 4).
	ToolCalls []*ToolCall `protobuf:"bytes,2,rep,name=tool_calls,json=toolCalls,proto3" json:"tool_calls,omitempty"`
	// Why, in a few words.
	Reason string `protobuf:"bytes,3,opt,name=reason,proto3" json:"reason,omitempty"`
	// "rules", or "llm:<provider>:<model>" when a model decided.
	DecidedBy string `protobuf:"bytes,4,opt,name=decided_by,json=decidedBy,proto3" json:"decided_by,omitempty"`
}

func (x *RouteDecision) Reset() {
	*x = RouteDecision{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[22]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *RouteDecision) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*RouteDecision) ProtoMessage() {}

func (x *RouteDecision) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[22]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use RouteDecision.ProtoReflect.Descriptor instead.
func (*RouteDecision) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{22}
}

func (x *RouteDecision) GetRoute() Route {
	if x != nil {
		return x.Route
	}
	return Route_ROUTE_UNSPECIFIED
}

func (x *RouteDecision) GetToolCalls() []*ToolCall {
	if x != nil {
		return x.ToolCalls
	}
	return nil
}

func (x *RouteDecision) GetReason() string {
	if x != nil {
		return x.Reason
	}
	return ""
}

func (x *RouteDecision) GetDecidedBy() string {
	if x != nil {
		return x.DecidedBy
	}
	return ""
}

// A known entity the query names.
type EntityMatch struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The entity's name as the documents write it most often.
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// SERVICE, PROJECT, PERSON, ORGANIZATION, IDENTIFIER or CONCEPT.
	EntityType string `protobuf:"bytes,2,opt,name=entity_type,json=entityType,proto3" json:"entity_type,omitempty"`
	// The query text that named it.
	Text string `protobuf:"bytes,3,opt,name=text,proto3" json:"text,omitempty"`
	// How it was matched.
	Kind EntityMatchKind `protobuf:"varint,4,opt,name=kind,proto3,enum=retrieval.v1.EntityMatchKind" json:"kind,omitempty"`
	// 1 for exact and case-folded matches; the similarity in [0, 1] for fuzzy ones.
	Score float32 `protobuf:"fixed32,5,opt,name=score,proto3" json:"score,omitempty"`
}

func (x *EntityMatch) Reset() {
	*x = EntityMatch{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[23]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *EntityMatch) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*EntityMatch) ProtoMessage() {}

func (x *EntityMatch) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[23]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use EntityMatch.ProtoReflect.Descriptor instead.
func (*EntityMatch) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{23}
}

func (x *EntityMatch) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *EntityMatch) GetEntityType() string {
	if x != nil {
		return x.EntityType
	}
	return ""
}

func (x *EntityMatch) GetText() string {
	if x != nil {
		return x.Text
	}
	return ""
}

func (x *EntityMatch) GetKind() EntityMatchKind {
	if x != nil {
		return x.Kind
	}
	return EntityMatchKind_ENTITY_MATCH_KIND_UNSPECIFIED
}

func (x *EntityMatch) GetScore() float32 {
	if x != nil {
		return x.Score
	}
	return 0
}

// One hop of the graph leg's expansion.
type GraphHop struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// 0: the query's own entities; 1 and 2: their neighbours and the neighbours' neighbours.
	Hop int32 `protobuf:"varint,1,opt,name=hop,proto3" json:"hop,omitempty"`
	// Score factor of this hop (RETRIEVAL_GRAPH_HOP_PENALTIES: 1.0, 0.77, 0.63).
	Penalty float32 `protobuf:"fixed32,2,opt,name=penalty,proto3" json:"penalty,omitempty"`
	// Names of the entities expanded at this hop: at hop 0 every entity the query names, at later
	// hops at most RETRIEVAL_GRAPH_MAX_NEIGHBORS (25).
	Entities []string `protobuf:"bytes,3,rep,name=entities,proto3" json:"entities,omitempty"`
	// Chunks this hop added: at most RETRIEVAL_GRAPH_MAX_CHUNKS_PER_HOP (20), on a retry too.
	Chunks int32 `protobuf:"varint,4,opt,name=chunks,proto3" json:"chunks,omitempty"`
}

func (x *GraphHop) Reset() {
	*x = GraphHop{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[24]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *GraphHop) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GraphHop) ProtoMessage() {}

func (x *GraphHop) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[24]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GraphHop.ProtoReflect.Descriptor instead.
func (*GraphHop) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{24}
}

func (x *GraphHop) GetHop() int32 {
	if x != nil {
		return x.Hop
	}
	return 0
}

func (x *GraphHop) GetPenalty() float32 {
	if x != nil {
		return x.Penalty
	}
	return 0
}

func (x *GraphHop) GetEntities() []string {
	if x != nil {
		return x.Entities
	}
	return nil
}

func (x *GraphHop) GetChunks() int32 {
	if x != nil {
		return x.Chunks
	}
	return 0
}

// What the graph leg did for one request.
type GraphTrace struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// Known entities the query names; empty: the leg had nothing to start from.
	Entities []*EntityMatch `protobuf:"bytes,1,rep,name=entities,proto3" json:"entities,omitempty"`
	// The hops, from 0.
	Hops []*GraphHop `protobuf:"bytes,2,rep,name=hops,proto3" json:"hops,omitempty"`
}

func (x *GraphTrace) Reset() {
	*x = GraphTrace{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[25]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *GraphTrace) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*GraphTrace) ProtoMessage() {}

func (x *GraphTrace) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[25]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use GraphTrace.ProtoReflect.Descriptor instead.
func (*GraphTrace) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{25}
}

func (x *GraphTrace) GetEntities() []*EntityMatch {
	if x != nil {
		return x.Entities
	}
	return nil
}

func (x *GraphTrace) GetHops() []*GraphHop {
	if x != nil {
		return x.Hops
	}
	return nil
}

// A tool's outcome, as the answer used it.
type ToolResult struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The tool's name.
	Name string `protobuf:"bytes,1,opt,name=name,proto3" json:"name,omitempty"`
	// The arguments it ran with, as a JSON object.
	ArgumentsJson string `protobuf:"bytes,2,opt,name=arguments_json,json=argumentsJson,proto3" json:"arguments_json,omitempty"`
	// False when it failed or timed out (RETRIEVAL_TOOL_TIMEOUT_S, 5 s); `error` says why.
	Success bool `protobuf:"varint,3,opt,name=success,proto3" json:"success,omitempty"`
	// The tool-specific result as JSON; empty on failure.
	ResultJson string `protobuf:"bytes,4,opt,name=result_json,json=resultJson,proto3" json:"result_json,omitempty"`
	// Why it failed; empty on success.
	Error string `protobuf:"bytes,5,opt,name=error,proto3" json:"error,omitempty"`
	// One sentence stating the result.
	Summary string `protobuf:"bytes,6,opt,name=summary,proto3" json:"summary,omitempty"`
	// Run time in milliseconds.
	DurationMs float64 `protobuf:"fixed64,7,opt,name=duration_ms,json=durationMs,proto3" json:"duration_ms,omitempty"`
}

func (x *ToolResult) Reset() {
	*x = ToolResult{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[26]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *ToolResult) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*ToolResult) ProtoMessage() {}

func (x *ToolResult) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[26]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use ToolResult.ProtoReflect.Descriptor instead.
func (*ToolResult) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{26}
}

func (x *ToolResult) GetName() string {
	if x != nil {
		return x.Name
	}
	return ""
}

func (x *ToolResult) GetArgumentsJson() string {
	if x != nil {
		return x.ArgumentsJson
	}
	return ""
}

func (x *ToolResult) GetSuccess() bool {
	if x != nil {
		return x.Success
	}
	return false
}

func (x *ToolResult) GetResultJson() string {
	if x != nil {
		return x.ResultJson
	}
	return ""
}

func (x *ToolResult) GetError() string {
	if x != nil {
		return x.Error
	}
	return ""
}

func (x *ToolResult) GetSummary() string {
	if x != nil {
		return x.Summary
	}
	return ""
}

func (x *ToolResult) GetDurationMs() float64 {
	if x != nil {
		return x.DurationMs
	}
	return 0
}

// One sentence of an answer.
type AnswerSentence struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The sentence without its citation markers.
	Text string `protobuf:"bytes,1,opt,name=text,proto3" json:"text,omitempty"`
	// The contexts it cites: positions (from 1) in QueryResponse.contexts.
	Citations []int32 `protobuf:"varint,2,rep,packed,name=citations,proto3" json:"citations,omitempty"`
}

func (x *AnswerSentence) Reset() {
	*x = AnswerSentence{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[27]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *AnswerSentence) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*AnswerSentence) ProtoMessage() {}

func (x *AnswerSentence) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[27]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use AnswerSentence.ProtoReflect.Descriptor instead.
func (*AnswerSentence) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{27}
}

func (x *AnswerSentence) GetText() string {
	if x != nil {
		return x.Text
	}
	return ""
}

func (x *AnswerSentence) GetCitations() []int32 {
	if x != nil {
		return x.Citations
	}
	return nil
}

// A context an answer cites.
type Citation struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The [n] in the answer's text: position (from 1) of the context in QueryResponse.contexts.
	Marker int32 `protobuf:"varint,1,opt,name=marker,proto3" json:"marker,omitempty"`
	// The cited context's parent chunk.
	ParentChunkId string `protobuf:"bytes,2,opt,name=parent_chunk_id,json=parentChunkId,proto3" json:"parent_chunk_id,omitempty"`
	// The cited context's document.
	DocumentId string `protobuf:"bytes,3,opt,name=document_id,json=documentId,proto3" json:"document_id,omitempty"`
	// The document's title; empty when it has none.
	Title string `protobuf:"bytes,4,opt,name=title,proto3" json:"title,omitempty"`
}

func (x *Citation) Reset() {
	*x = Citation{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[28]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *Citation) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Citation) ProtoMessage() {}

func (x *Citation) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[28]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Citation.ProtoReflect.Descriptor instead.
func (*Citation) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{28}
}

func (x *Citation) GetMarker() int32 {
	if x != nil {
		return x.Marker
	}
	return 0
}

func (x *Citation) GetParentChunkId() string {
	if x != nil {
		return x.ParentChunkId
	}
	return ""
}

func (x *Citation) GetDocumentId() string {
	if x != nil {
		return x.DocumentId
	}
	return ""
}

func (x *Citation) GetTitle() string {
	if x != nil {
		return x.Title
	}
	return ""
}

// The answer of a MODE_GENERATION request.
type Answer struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The answer with [n] markers after the sentences that use context n. Every marker points at
	// a context the answer was written from: a model's citation that points nowhere is removed
	// (and reported in Metrics.degraded as answer:invalid_citation_removed). Each is returned,
	// unless the response was cut to its size (response:contexts_capped): then a marker past the
	// last returned context is known by its Citation (chunk, document and title).
	Text string `protobuf:"bytes,1,opt,name=text,proto3" json:"text,omitempty"`
	// The answer sentence by sentence, with each sentence's citations.
	Sentences []*AnswerSentence `protobuf:"bytes,2,rep,name=sentences,proto3" json:"sentences,omitempty"`
	// The contexts the answer cites, by marker.
	Citations []*Citation `protobuf:"bytes,3,rep,name=citations,proto3" json:"citations,omitempty"`
	// The path that produced it.
	Route Route `protobuf:"varint,4,opt,name=route,proto3,enum=retrieval.v1.Route" json:"route,omitempty"`
	// True when no model wrote it: its sentences are copied from the contexts (ranked by the
	// cross-encoder or the embedder) or state the tool results.
	Extractive bool `protobuf:"varint,5,opt,name=extractive,proto3" json:"extractive,omitempty"`
	// False when the contexts and tools did not support an answer; the text then says so.
	Supported bool `protobuf:"varint,6,opt,name=supported,proto3" json:"supported,omitempty"`
	// "extractive", or "<provider>:<model>" of the model that wrote it.
	Model string `protobuf:"bytes,7,opt,name=model,proto3" json:"model,omitempty"`
	// The tool results the answer relied on, in call order.
	ToolResults []*ToolResult `protobuf:"bytes,8,rep,name=tool_results,json=toolResults,proto3" json:"tool_results,omitempty"`
}

func (x *Answer) Reset() {
	*x = Answer{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[29]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *Answer) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*Answer) ProtoMessage() {}

func (x *Answer) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[29]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use Answer.ProtoReflect.Descriptor instead.
func (*Answer) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{29}
}

func (x *Answer) GetText() string {
	if x != nil {
		return x.Text
	}
	return ""
}

func (x *Answer) GetSentences() []*AnswerSentence {
	if x != nil {
		return x.Sentences
	}
	return nil
}

func (x *Answer) GetCitations() []*Citation {
	if x != nil {
		return x.Citations
	}
	return nil
}

func (x *Answer) GetRoute() Route {
	if x != nil {
		return x.Route
	}
	return Route_ROUTE_UNSPECIFIED
}

func (x *Answer) GetExtractive() bool {
	if x != nil {
		return x.Extractive
	}
	return false
}

func (x *Answer) GetSupported() bool {
	if x != nil {
		return x.Supported
	}
	return false
}

func (x *Answer) GetModel() string {
	if x != nil {
		return x.Model
	}
	return ""
}

func (x *Answer) GetToolResults() []*ToolResult {
	if x != nil {
		return x.ToolResults
	}
	return nil
}

// StreamQuery's request.
type StreamQueryRequest struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// The query, exactly as Query takes it (same limits and defaults).
	Query *QueryRequest `protobuf:"bytes,1,opt,name=query,proto3" json:"query,omitempty"`
}

func (x *StreamQueryRequest) Reset() {
	*x = StreamQueryRequest{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[30]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *StreamQueryRequest) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*StreamQueryRequest) ProtoMessage() {}

func (x *StreamQueryRequest) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[30]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use StreamQueryRequest.ProtoReflect.Descriptor instead.
func (*StreamQueryRequest) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{30}
}

func (x *StreamQueryRequest) GetQuery() *QueryRequest {
	if x != nil {
		return x.Query
	}
	return nil
}

// One event of a StreamQuery stream.
type StreamQueryResponse struct {
	state         protoimpl.MessageState
	sizeCache     protoimpl.SizeCache
	unknownFields protoimpl.UnknownFields

	// What happened.
	//
	// Types that are assignable to Event:
	//
	//	*StreamQueryResponse_Stage
	//	*StreamQueryResponse_AnswerDelta
	//	*StreamQueryResponse_Response
	Event isStreamQueryResponse_Event `protobuf_oneof:"event"`
}

func (x *StreamQueryResponse) Reset() {
	*x = StreamQueryResponse{}
	if protoimpl.UnsafeEnabled {
		mi := &file_retrieval_v1_retrieval_proto_msgTypes[31]
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		ms.StoreMessageInfo(mi)
	}
}

func (x *StreamQueryResponse) String() string {
	return protoimpl.X.MessageStringOf(x)
}

func (*StreamQueryResponse) ProtoMessage() {}

func (x *StreamQueryResponse) ProtoReflect() protoreflect.Message {
	mi := &file_retrieval_v1_retrieval_proto_msgTypes[31]
	if protoimpl.UnsafeEnabled && x != nil {
		ms := protoimpl.X.MessageStateOf(protoimpl.Pointer(x))
		if ms.LoadMessageInfo() == nil {
			ms.StoreMessageInfo(mi)
		}
		return ms
	}
	return mi.MessageOf(x)
}

// Deprecated: Use StreamQueryResponse.ProtoReflect.Descriptor instead.
func (*StreamQueryResponse) Descriptor() ([]byte, []int) {
	return file_retrieval_v1_retrieval_proto_rawDescGZIP(), []int{31}
}

func (m *StreamQueryResponse) GetEvent() isStreamQueryResponse_Event {
	if m != nil {
		return m.Event
	}
	return nil
}

func (x *StreamQueryResponse) GetStage() *StageMetric {
	if x, ok := x.GetEvent().(*StreamQueryResponse_Stage); ok {
		return x.Stage
	}
	return nil
}

func (x *StreamQueryResponse) GetAnswerDelta() string {
	if x, ok := x.GetEvent().(*StreamQueryResponse_AnswerDelta); ok {
		return x.AnswerDelta
	}
	return ""
}

func (x *StreamQueryResponse) GetResponse() *QueryResponse {
	if x, ok := x.GetEvent().(*StreamQueryResponse_Response); ok {
		return x.Response
	}
	return nil
}

type isStreamQueryResponse_Event interface {
	isStreamQueryResponse_Event()
}

type StreamQueryResponse_Stage struct {
	// A workflow stage that just finished (name, duration, count), in the order they ran.
	Stage *StageMetric `protobuf:"bytes,1,opt,name=stage,proto3,oneof"`
}

type StreamQueryResponse_AnswerDelta struct {
	// The next piece of the answer's text, in order; their concatenation is the text as written,
	// before the citation check (the final response's Answer.text is authoritative), except that
	// the model's word that the contexts do not answer (NOT_ANSWERABLE) is never sent: for a reply
	// that opens with it, the answer that stands in for it is, in one piece or more; words a reply
	// wrote before it are sent, and Answer.text replaces them. A caller
	// reading slower than the text is written gets it in fewer, longer pieces: past 64 events
	// unread, the server joins each further piece to the last one it holds.
	AnswerDelta string `protobuf:"bytes,2,opt,name=answer_delta,json=answerDelta,proto3,oneof"`
}

type StreamQueryResponse_Response struct {
	// The last event: the same response Query returns.
	Response *QueryResponse `protobuf:"bytes,3,opt,name=response,proto3,oneof"`
}

func (*StreamQueryResponse_Stage) isStreamQueryResponse_Event() {}

func (*StreamQueryResponse_AnswerDelta) isStreamQueryResponse_Event() {}

func (*StreamQueryResponse_Response) isStreamQueryResponse_Event() {}

var File_retrieval_v1_retrieval_proto protoreflect.FileDescriptor

var file_retrieval_v1_retrieval_proto_rawDesc = []byte{
	0x0a, 0x1c, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2f, 0x76, 0x31, 0x2f, 0x72,
	0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x70, 0x72, 0x6f, 0x74, 0x6f, 0x12, 0x0c,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x22, 0x31, 0x0a, 0x0c,
	0x51, 0x75, 0x65, 0x72, 0x79, 0x46, 0x69, 0x6c, 0x74, 0x65, 0x72, 0x73, 0x12, 0x21, 0x0a, 0x0c,
	0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x5f, 0x69, 0x64, 0x73, 0x18, 0x01, 0x20, 0x03,
	0x28, 0x09, 0x52, 0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x73, 0x22,
	0xd1, 0x02, 0x0a, 0x0c, 0x51, 0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74,
	0x12, 0x14, 0x0a, 0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52,
	0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x12, 0x13, 0x0a, 0x05, 0x74, 0x6f, 0x70, 0x5f, 0x6b, 0x18,
	0x02, 0x20, 0x01, 0x28, 0x05, 0x52, 0x04, 0x74, 0x6f, 0x70, 0x4b, 0x12, 0x32, 0x0a, 0x08, 0x73,
	0x74, 0x72, 0x61, 0x74, 0x65, 0x67, 0x79, 0x18, 0x03, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x16, 0x2e,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x72,
	0x61, 0x74, 0x65, 0x67, 0x79, 0x52, 0x08, 0x73, 0x74, 0x72, 0x61, 0x74, 0x65, 0x67, 0x79, 0x12,
	0x26, 0x0a, 0x04, 0x6d, 0x6f, 0x64, 0x65, 0x18, 0x04, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x12, 0x2e,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x4d, 0x6f, 0x64,
	0x65, 0x52, 0x04, 0x6d, 0x6f, 0x64, 0x65, 0x12, 0x20, 0x0a, 0x09, 0x75, 0x73, 0x65, 0x5f, 0x63,
	0x61, 0x63, 0x68, 0x65, 0x18, 0x05, 0x20, 0x01, 0x28, 0x08, 0x48, 0x00, 0x52, 0x08, 0x75, 0x73,
	0x65, 0x43, 0x61, 0x63, 0x68, 0x65, 0x88, 0x01, 0x01, 0x12, 0x34, 0x0a, 0x07, 0x66, 0x69, 0x6c,
	0x74, 0x65, 0x72, 0x73, 0x18, 0x06, 0x20, 0x01, 0x28, 0x0b, 0x32, 0x1a, 0x2e, 0x72, 0x65, 0x74,
	0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x51, 0x75, 0x65, 0x72, 0x79, 0x46,
	0x69, 0x6c, 0x74, 0x65, 0x72, 0x73, 0x52, 0x07, 0x66, 0x69, 0x6c, 0x74, 0x65, 0x72, 0x73, 0x12,
	0x2c, 0x0a, 0x06, 0x66, 0x75, 0x73, 0x69, 0x6f, 0x6e, 0x18, 0x07, 0x20, 0x01, 0x28, 0x0e, 0x32,
	0x14, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x46,
	0x75, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x06, 0x66, 0x75, 0x73, 0x69, 0x6f, 0x6e, 0x12, 0x1b, 0x0a,
	0x06, 0x72, 0x65, 0x72, 0x61, 0x6e, 0x6b, 0x18, 0x08, 0x20, 0x01, 0x28, 0x08, 0x48, 0x01, 0x52,
	0x06, 0x72, 0x65, 0x72, 0x61, 0x6e, 0x6b, 0x88, 0x01, 0x01, 0x42, 0x0c, 0x0a, 0x0a, 0x5f, 0x75,
	0x73, 0x65, 0x5f, 0x63, 0x61, 0x63, 0x68, 0x65, 0x42, 0x09, 0x0a, 0x07, 0x5f, 0x72, 0x65, 0x72,
	0x61, 0x6e, 0x6b, 0x22, 0x57, 0x0a, 0x0a, 0x43, 0x68, 0x69, 0x6c, 0x64, 0x43, 0x68, 0x75, 0x6e,
	0x6b, 0x12, 0x19, 0x0a, 0x08, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x5f, 0x69, 0x64, 0x18, 0x01, 0x20,
	0x01, 0x28, 0x09, 0x52, 0x07, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x49, 0x64, 0x12, 0x18, 0x0a, 0x07,
	0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e, 0x74, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x07, 0x63,
	0x6f, 0x6e, 0x74, 0x65, 0x6e, 0x74, 0x12, 0x14, 0x0a, 0x05, 0x73, 0x63, 0x6f, 0x72, 0x65, 0x18,
	0x03, 0x20, 0x01, 0x28, 0x02, 0x52, 0x05, 0x73, 0x63, 0x6f, 0x72, 0x65, 0x22, 0x82, 0x02, 0x0a,
	0x10, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x4d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74,
	0x61, 0x12, 0x14, 0x0a, 0x05, 0x74, 0x69, 0x74, 0x6c, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09,
	0x52, 0x05, 0x74, 0x69, 0x74, 0x6c, 0x65, 0x12, 0x10, 0x0a, 0x03, 0x75, 0x72, 0x6c, 0x18, 0x02,
	0x20, 0x01, 0x28, 0x09, 0x52, 0x03, 0x75, 0x72, 0x6c, 0x12, 0x12, 0x0a, 0x04, 0x70, 0x61, 0x67,
	0x65, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, 0x04, 0x70, 0x61, 0x67, 0x65, 0x12, 0x1f, 0x0a,
	0x0b, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x5f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x18, 0x04, 0x20, 0x01,
	0x28, 0x05, 0x52, 0x0a, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x49, 0x6e, 0x64, 0x65, 0x78, 0x12, 0x16,
	0x0a, 0x06, 0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x18, 0x05, 0x20, 0x01, 0x28, 0x09, 0x52, 0x06,
	0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x12, 0x3f, 0x0a, 0x05, 0x65, 0x78, 0x74, 0x72, 0x61, 0x18,
	0x06, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x29, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61,
	0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x4d, 0x65, 0x74,
	0x61, 0x64, 0x61, 0x74, 0x61, 0x2e, 0x45, 0x78, 0x74, 0x72, 0x61, 0x45, 0x6e, 0x74, 0x72, 0x79,
	0x52, 0x05, 0x65, 0x78, 0x74, 0x72, 0x61, 0x1a, 0x38, 0x0a, 0x0a, 0x45, 0x78, 0x74, 0x72, 0x61,
	0x45, 0x6e, 0x74, 0x72, 0x79, 0x12, 0x10, 0x0a, 0x03, 0x6b, 0x65, 0x79, 0x18, 0x01, 0x20, 0x01,
	0x28, 0x09, 0x52, 0x03, 0x6b, 0x65, 0x79, 0x12, 0x14, 0x0a, 0x05, 0x76, 0x61, 0x6c, 0x75, 0x65,
	0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x76, 0x61, 0x6c, 0x75, 0x65, 0x3a, 0x02, 0x38,
	0x01, 0x22, 0x93, 0x02, 0x0a, 0x07, 0x43, 0x6f, 0x6e, 0x74, 0x65, 0x78, 0x74, 0x12, 0x26, 0x0a,
	0x0f, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x5f, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x5f, 0x69, 0x64,
	0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0d, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x43, 0x68,
	0x75, 0x6e, 0x6b, 0x49, 0x64, 0x12, 0x1f, 0x0a, 0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e,
	0x74, 0x5f, 0x69, 0x64, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0a, 0x64, 0x6f, 0x63, 0x75,
	0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x12, 0x18, 0x0a, 0x07, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e,
	0x74, 0x18, 0x03, 0x20, 0x01, 0x28, 0x09, 0x52, 0x07, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e, 0x74,
	0x12, 0x16, 0x0a, 0x06, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73, 0x18, 0x04, 0x20, 0x01, 0x28, 0x05,
	0x52, 0x06, 0x74, 0x6f, 0x6b, 0x65, 0x6e, 0x73, 0x12, 0x14, 0x0a, 0x05, 0x73, 0x63, 0x6f, 0x72,
	0x65, 0x18, 0x05, 0x20, 0x01, 0x28, 0x02, 0x52, 0x05, 0x73, 0x63, 0x6f, 0x72, 0x65, 0x12, 0x3a,
	0x0a, 0x08, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x18, 0x06, 0x20, 0x01, 0x28, 0x0b,
	0x32, 0x1e, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e,
	0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x4d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61,
	0x52, 0x08, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x12, 0x3b, 0x0a, 0x0c, 0x63, 0x68,
	0x69, 0x6c, 0x64, 0x5f, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x73, 0x18, 0x07, 0x20, 0x03, 0x28, 0x0b,
	0x32, 0x18, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e,
	0x43, 0x68, 0x69, 0x6c, 0x64, 0x43, 0x68, 0x75, 0x6e, 0x6b, 0x52, 0x0b, 0x63, 0x68, 0x69, 0x6c,
	0x64, 0x43, 0x68, 0x75, 0x6e, 0x6b, 0x73, 0x22, 0x5a, 0x0a, 0x0b, 0x53, 0x74, 0x61, 0x67, 0x65,
	0x4d, 0x65, 0x74, 0x72, 0x69, 0x63, 0x12, 0x14, 0x0a, 0x05, 0x73, 0x74, 0x61, 0x67, 0x65, 0x18,
	0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x73, 0x74, 0x61, 0x67, 0x65, 0x12, 0x1f, 0x0a, 0x0b,
	0x64, 0x75, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x5f, 0x6d, 0x73, 0x18, 0x02, 0x20, 0x01, 0x28,
	0x01, 0x52, 0x0a, 0x64, 0x75, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x4d, 0x73, 0x12, 0x14, 0x0a,
	0x05, 0x63, 0x6f, 0x75, 0x6e, 0x74, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, 0x05, 0x63, 0x6f,
	0x75, 0x6e, 0x74, 0x22, 0xb2, 0x04, 0x0a, 0x07, 0x4d, 0x65, 0x74, 0x72, 0x69, 0x63, 0x73, 0x12,
	0x19, 0x0a, 0x08, 0x74, 0x6f, 0x74, 0x61, 0x6c, 0x5f, 0x6d, 0x73, 0x18, 0x01, 0x20, 0x01, 0x28,
	0x01, 0x52, 0x07, 0x74, 0x6f, 0x74, 0x61, 0x6c, 0x4d, 0x73, 0x12, 0x31, 0x0a, 0x06, 0x73, 0x74,
	0x61, 0x67, 0x65, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x19, 0x2e, 0x72, 0x65, 0x74,
	0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x61, 0x67, 0x65, 0x4d,
	0x65, 0x74, 0x72, 0x69, 0x63, 0x52, 0x06, 0x73, 0x74, 0x61, 0x67, 0x65, 0x73, 0x12, 0x1b, 0x0a,
	0x09, 0x63, 0x61, 0x63, 0x68, 0x65, 0x5f, 0x68, 0x69, 0x74, 0x18, 0x03, 0x20, 0x01, 0x28, 0x08,
	0x52, 0x08, 0x63, 0x61, 0x63, 0x68, 0x65, 0x48, 0x69, 0x74, 0x12, 0x1e, 0x0a, 0x0a, 0x69, 0x74,
	0x65, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x18, 0x04, 0x20, 0x01, 0x28, 0x05, 0x52, 0x0a,
	0x69, 0x74, 0x65, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x12, 0x2b, 0x0a, 0x11, 0x73, 0x75,
	0x66, 0x66, 0x69, 0x63, 0x69, 0x65, 0x6e, 0x63, 0x79, 0x5f, 0x73, 0x63, 0x6f, 0x72, 0x65, 0x18,
	0x05, 0x20, 0x01, 0x28, 0x02, 0x52, 0x10, 0x73, 0x75, 0x66, 0x66, 0x69, 0x63, 0x69, 0x65, 0x6e,
	0x63, 0x79, 0x53, 0x63, 0x6f, 0x72, 0x65, 0x12, 0x3a, 0x0a, 0x19, 0x72, 0x65, 0x72, 0x61, 0x6e,
	0x6b, 0x5f, 0x66, 0x61, 0x6c, 0x6c, 0x62, 0x61, 0x63, 0x6b, 0x5f, 0x74, 0x72, 0x69, 0x67, 0x67,
	0x65, 0x72, 0x65, 0x64, 0x18, 0x06, 0x20, 0x01, 0x28, 0x08, 0x52, 0x17, 0x72, 0x65, 0x72, 0x61,
	0x6e, 0x6b, 0x46, 0x61, 0x6c, 0x6c, 0x62, 0x61, 0x63, 0x6b, 0x54, 0x72, 0x69, 0x67, 0x67, 0x65,
	0x72, 0x65, 0x64, 0x12, 0x1a, 0x0a, 0x08, 0x64, 0x65, 0x67, 0x72, 0x61, 0x64, 0x65, 0x64, 0x18,
	0x07, 0x20, 0x03, 0x28, 0x09, 0x52, 0x08, 0x64, 0x65, 0x67, 0x72, 0x61, 0x64, 0x65, 0x64, 0x12,
	0x2d, 0x0a, 0x12, 0x64, 0x65, 0x63, 0x6f, 0x6d, 0x70, 0x6f, 0x73, 0x69, 0x74, 0x69, 0x6f, 0x6e,
	0x5f, 0x75, 0x73, 0x65, 0x64, 0x18, 0x08, 0x20, 0x01, 0x28, 0x08, 0x52, 0x11, 0x64, 0x65, 0x63,
	0x6f, 0x6d, 0x70, 0x6f, 0x73, 0x69, 0x74, 0x69, 0x6f, 0x6e, 0x55, 0x73, 0x65, 0x64, 0x12, 0x3b,
	0x0a, 0x0d, 0x73, 0x74, 0x72, 0x61, 0x74, 0x65, 0x67, 0x79, 0x5f, 0x75, 0x73, 0x65, 0x64, 0x18,
	0x09, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x16, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61,
	0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x72, 0x61, 0x74, 0x65, 0x67, 0x79, 0x52, 0x0c, 0x73,
	0x74, 0x72, 0x61, 0x74, 0x65, 0x67, 0x79, 0x55, 0x73, 0x65, 0x64, 0x12, 0x31, 0x0a, 0x05, 0x72,
	0x6f, 0x75, 0x74, 0x65, 0x18, 0x0a, 0x20, 0x01, 0x28, 0x0b, 0x32, 0x1b, 0x2e, 0x72, 0x65, 0x74,
	0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x52, 0x6f, 0x75, 0x74, 0x65, 0x44,
	0x65, 0x63, 0x69, 0x73, 0x69, 0x6f, 0x6e, 0x52, 0x05, 0x72, 0x6f, 0x75, 0x74, 0x65, 0x12, 0x2e,
	0x0a, 0x05, 0x67, 0x72, 0x61, 0x70, 0x68, 0x18, 0x0b, 0x20, 0x01, 0x28, 0x0b, 0x32, 0x18, 0x2e,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x47, 0x72, 0x61,
	0x70, 0x68, 0x54, 0x72, 0x61, 0x63, 0x65, 0x52, 0x05, 0x67, 0x72, 0x61, 0x70, 0x68, 0x12, 0x27,
	0x0a, 0x0f, 0x72, 0x65, 0x77, 0x72, 0x69, 0x74, 0x74, 0x65, 0x6e, 0x5f, 0x71, 0x75, 0x65, 0x72,
	0x79, 0x18, 0x0c, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0e, 0x72, 0x65, 0x77, 0x72, 0x69, 0x74, 0x74,
	0x65, 0x6e, 0x51, 0x75, 0x65, 0x72, 0x79, 0x12, 0x1f, 0x0a, 0x0b, 0x73, 0x75, 0x62, 0x5f, 0x71,
	0x75, 0x65, 0x72, 0x69, 0x65, 0x73, 0x18, 0x0d, 0x20, 0x03, 0x28, 0x09, 0x52, 0x0a, 0x73, 0x75,
	0x62, 0x51, 0x75, 0x65, 0x72, 0x69, 0x65, 0x73, 0x22, 0xf1, 0x01, 0x0a, 0x0d, 0x51, 0x75, 0x65,
	0x72, 0x79, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x14, 0x0a, 0x05, 0x71, 0x75,
	0x65, 0x72, 0x79, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x71, 0x75, 0x65, 0x72, 0x79,
	0x12, 0x31, 0x0a, 0x08, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x78, 0x74, 0x73, 0x18, 0x02, 0x20, 0x03,
	0x28, 0x0b, 0x32, 0x15, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76,
	0x31, 0x2e, 0x43, 0x6f, 0x6e, 0x74, 0x65, 0x78, 0x74, 0x52, 0x08, 0x63, 0x6f, 0x6e, 0x74, 0x65,
	0x78, 0x74, 0x73, 0x12, 0x2f, 0x0a, 0x07, 0x6d, 0x65, 0x74, 0x72, 0x69, 0x63, 0x73, 0x18, 0x03,
	0x20, 0x01, 0x28, 0x0b, 0x32, 0x15, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c,
	0x2e, 0x76, 0x31, 0x2e, 0x4d, 0x65, 0x74, 0x72, 0x69, 0x63, 0x73, 0x52, 0x07, 0x6d, 0x65, 0x74,
	0x72, 0x69, 0x63, 0x73, 0x12, 0x16, 0x0a, 0x06, 0x63, 0x61, 0x63, 0x68, 0x65, 0x64, 0x18, 0x04,
	0x20, 0x01, 0x28, 0x08, 0x52, 0x06, 0x63, 0x61, 0x63, 0x68, 0x65, 0x64, 0x12, 0x20, 0x0a, 0x0b,
	0x73, 0x75, 0x67, 0x67, 0x65, 0x73, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x18, 0x05, 0x20, 0x03, 0x28,
	0x09, 0x52, 0x0b, 0x73, 0x75, 0x67, 0x67, 0x65, 0x73, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x12, 0x2c,
	0x0a, 0x06, 0x61, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x18, 0x06, 0x20, 0x01, 0x28, 0x0b, 0x32, 0x14,
	0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x41, 0x6e,
	0x73, 0x77, 0x65, 0x72, 0x52, 0x06, 0x61, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x22, 0x3a, 0x0a, 0x0d,
	0x53, 0x65, 0x61, 0x72, 0x63, 0x68, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x12, 0x14, 0x0a,
	0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x71, 0x75,
	0x65, 0x72, 0x79, 0x12, 0x13, 0x0a, 0x05, 0x74, 0x6f, 0x70, 0x5f, 0x6b, 0x18, 0x02, 0x20, 0x01,
	0x28, 0x05, 0x52, 0x04, 0x74, 0x6f, 0x70, 0x4b, 0x22, 0xb6, 0x01, 0x0a, 0x0c, 0x53, 0x65, 0x61,
	0x72, 0x63, 0x68, 0x52, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x12, 0x12, 0x0a, 0x04, 0x74, 0x65, 0x78,
	0x74, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04, 0x74, 0x65, 0x78, 0x74, 0x12, 0x1f, 0x0a,
	0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x5f, 0x69, 0x64, 0x18, 0x02, 0x20, 0x01,
	0x28, 0x09, 0x52, 0x0a, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x12, 0x1f,
	0x0a, 0x0b, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x5f, 0x69, 0x6e, 0x64, 0x65, 0x78, 0x18, 0x03, 0x20,
	0x01, 0x28, 0x05, 0x52, 0x0a, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x49, 0x6e, 0x64, 0x65, 0x78, 0x12,
	0x14, 0x0a, 0x05, 0x74, 0x69, 0x74, 0x6c, 0x65, 0x18, 0x04, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05,
	0x74, 0x69, 0x74, 0x6c, 0x65, 0x12, 0x12, 0x0a, 0x04, 0x70, 0x61, 0x67, 0x65, 0x18, 0x05, 0x20,
	0x01, 0x28, 0x05, 0x52, 0x04, 0x70, 0x61, 0x67, 0x65, 0x12, 0x10, 0x0a, 0x03, 0x75, 0x72, 0x6c,
	0x18, 0x06, 0x20, 0x01, 0x28, 0x09, 0x52, 0x03, 0x75, 0x72, 0x6c, 0x12, 0x14, 0x0a, 0x05, 0x73,
	0x63, 0x6f, 0x72, 0x65, 0x18, 0x07, 0x20, 0x01, 0x28, 0x02, 0x52, 0x05, 0x73, 0x63, 0x6f, 0x72,
	0x65, 0x22, 0x8a, 0x01, 0x0a, 0x0e, 0x53, 0x65, 0x61, 0x72, 0x63, 0x68, 0x52, 0x65, 0x73, 0x70,
	0x6f, 0x6e, 0x73, 0x65, 0x12, 0x14, 0x0a, 0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x18, 0x01, 0x20,
	0x01, 0x28, 0x09, 0x52, 0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x12, 0x34, 0x0a, 0x07, 0x72, 0x65,
	0x73, 0x75, 0x6c, 0x74, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x1a, 0x2e, 0x72, 0x65,
	0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x65, 0x61, 0x72, 0x63,
	0x68, 0x52, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x52, 0x07, 0x72, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x73,
	0x12, 0x2c, 0x0a, 0x12, 0x72, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x73, 0x5f, 0x6e, 0x6f, 0x74, 0x5f,
	0x6c, 0x69, 0x73, 0x74, 0x65, 0x64, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, 0x10, 0x72, 0x65,
	0x73, 0x75, 0x6c, 0x74, 0x73, 0x4e, 0x6f, 0x74, 0x4c, 0x69, 0x73, 0x74, 0x65, 0x64, 0x22, 0x0f,
	0x0a, 0x0d, 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x22,
	0x72, 0x0a, 0x0f, 0x43, 0x6f, 0x6d, 0x70, 0x6f, 0x6e, 0x65, 0x6e, 0x74, 0x48, 0x65, 0x61, 0x6c,
	0x74, 0x68, 0x12, 0x12, 0x0a, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09,
	0x52, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x12, 0x33, 0x0a, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73,
	0x18, 0x02, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76,
	0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x65, 0x72, 0x76, 0x69, 0x6e, 0x67, 0x53, 0x74, 0x61,
	0x74, 0x75, 0x73, 0x52, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73, 0x12, 0x16, 0x0a, 0x06, 0x64,
	0x65, 0x74, 0x61, 0x69, 0x6c, 0x18, 0x03, 0x20, 0x01, 0x28, 0x09, 0x52, 0x06, 0x64, 0x65, 0x74,
	0x61, 0x69, 0x6c, 0x22, 0x9e, 0x01, 0x0a, 0x0e, 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68, 0x52, 0x65,
	0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x33, 0x0a, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73,
	0x18, 0x01, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76,
	0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x65, 0x72, 0x76, 0x69, 0x6e, 0x67, 0x53, 0x74, 0x61,
	0x74, 0x75, 0x73, 0x52, 0x06, 0x73, 0x74, 0x61, 0x74, 0x75, 0x73, 0x12, 0x3d, 0x0a, 0x0a, 0x63,
	0x6f, 0x6d, 0x70, 0x6f, 0x6e, 0x65, 0x6e, 0x74, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32,
	0x1d, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x43,
	0x6f, 0x6d, 0x70, 0x6f, 0x6e, 0x65, 0x6e, 0x74, 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68, 0x52, 0x0a,
	0x63, 0x6f, 0x6d, 0x70, 0x6f, 0x6e, 0x65, 0x6e, 0x74, 0x73, 0x12, 0x18, 0x0a, 0x07, 0x76, 0x65,
	0x72, 0x73, 0x69, 0x6f, 0x6e, 0x18, 0x03, 0x20, 0x01, 0x28, 0x09, 0x52, 0x07, 0x76, 0x65, 0x72,
	0x73, 0x69, 0x6f, 0x6e, 0x22, 0x9d, 0x03, 0x0a, 0x0d, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e,
	0x74, 0x49, 0x6e, 0x70, 0x75, 0x74, 0x12, 0x1f, 0x0a, 0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65,
	0x6e, 0x74, 0x5f, 0x69, 0x64, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0a, 0x64, 0x6f, 0x63,
	0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x12, 0x1a, 0x0a, 0x08, 0x66, 0x69, 0x6c, 0x65, 0x6e,
	0x61, 0x6d, 0x65, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x08, 0x66, 0x69, 0x6c, 0x65, 0x6e,
	0x61, 0x6d, 0x65, 0x12, 0x18, 0x0a, 0x07, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e, 0x74, 0x18, 0x03,
	0x20, 0x01, 0x28, 0x0c, 0x52, 0x07, 0x63, 0x6f, 0x6e, 0x74, 0x65, 0x6e, 0x74, 0x12, 0x14, 0x0a,
	0x05, 0x74, 0x69, 0x74, 0x6c, 0x65, 0x18, 0x04, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x74, 0x69,
	0x74, 0x6c, 0x65, 0x12, 0x10, 0x0a, 0x03, 0x75, 0x72, 0x6c, 0x18, 0x05, 0x20, 0x01, 0x28, 0x09,
	0x52, 0x03, 0x75, 0x72, 0x6c, 0x12, 0x16, 0x0a, 0x06, 0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x18,
	0x06, 0x20, 0x01, 0x28, 0x09, 0x52, 0x06, 0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x12, 0x2c, 0x0a,
	0x06, 0x61, 0x63, 0x63, 0x65, 0x73, 0x73, 0x18, 0x07, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x14, 0x2e,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x41, 0x63, 0x63,
	0x65, 0x73, 0x73, 0x52, 0x06, 0x61, 0x63, 0x63, 0x65, 0x73, 0x73, 0x12, 0x19, 0x0a, 0x08, 0x6f,
	0x77, 0x6e, 0x65, 0x72, 0x5f, 0x69, 0x64, 0x18, 0x08, 0x20, 0x01, 0x28, 0x09, 0x52, 0x07, 0x6f,
	0x77, 0x6e, 0x65, 0x72, 0x49, 0x64, 0x12, 0x45, 0x0a, 0x08, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61,
	0x74, 0x61, 0x18, 0x09, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x29, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69,
	0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74,
	0x49, 0x6e, 0x70, 0x75, 0x74, 0x2e, 0x4d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x45, 0x6e,
	0x74, 0x72, 0x79, 0x52, 0x08, 0x6d, 0x65, 0x74, 0x61, 0x64, 0x61, 0x74, 0x61, 0x12, 0x28, 0x0a,
	0x10, 0x67, 0x72, 0x61, 0x6e, 0x74, 0x65, 0x64, 0x5f, 0x75, 0x73, 0x65, 0x72, 0x5f, 0x69, 0x64,
	0x73, 0x18, 0x0a, 0x20, 0x03, 0x28, 0x09, 0x52, 0x0e, 0x67, 0x72, 0x61, 0x6e, 0x74, 0x65, 0x64,
	0x55, 0x73, 0x65, 0x72, 0x49, 0x64, 0x73, 0x1a, 0x3b, 0x0a, 0x0d, 0x4d, 0x65, 0x74, 0x61, 0x64,
	0x61, 0x74, 0x61, 0x45, 0x6e, 0x74, 0x72, 0x79, 0x12, 0x10, 0x0a, 0x03, 0x6b, 0x65, 0x79, 0x18,
	0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x03, 0x6b, 0x65, 0x79, 0x12, 0x14, 0x0a, 0x05, 0x76, 0x61,
	0x6c, 0x75, 0x65, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x76, 0x61, 0x6c, 0x75, 0x65,
	0x3a, 0x02, 0x38, 0x01, 0x22, 0x53, 0x0a, 0x16, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74, 0x44, 0x6f,
	0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x12, 0x39,
	0x0a, 0x09, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x18, 0x01, 0x20, 0x03, 0x28,
	0x0b, 0x32, 0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31,
	0x2e, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x6e, 0x70, 0x75, 0x74, 0x52, 0x09,
	0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x22, 0xb5, 0x01, 0x0a, 0x10, 0x49, 0x6e,
	0x67, 0x65, 0x73, 0x74, 0x65, 0x64, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x12, 0x1f,
	0x0a, 0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x5f, 0x69, 0x64, 0x18, 0x01, 0x20,
	0x01, 0x28, 0x09, 0x52, 0x0a, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x12,
	0x23, 0x0a, 0x0d, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x5f, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x73,
	0x18, 0x02, 0x20, 0x01, 0x28, 0x05, 0x52, 0x0c, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x43, 0x68,
	0x75, 0x6e, 0x6b, 0x73, 0x12, 0x21, 0x0a, 0x0c, 0x63, 0x68, 0x69, 0x6c, 0x64, 0x5f, 0x63, 0x68,
	0x75, 0x6e, 0x6b, 0x73, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, 0x0b, 0x63, 0x68, 0x69, 0x6c,
	0x64, 0x43, 0x68, 0x75, 0x6e, 0x6b, 0x73, 0x12, 0x1a, 0x0a, 0x08, 0x72, 0x65, 0x70, 0x6c, 0x61,
	0x63, 0x65, 0x64, 0x18, 0x04, 0x20, 0x01, 0x28, 0x08, 0x52, 0x08, 0x72, 0x65, 0x70, 0x6c, 0x61,
	0x63, 0x65, 0x64, 0x12, 0x1c, 0x0a, 0x09, 0x75, 0x6e, 0x63, 0x68, 0x61, 0x6e, 0x67, 0x65, 0x64,
	0x18, 0x05, 0x20, 0x01, 0x28, 0x08, 0x52, 0x09, 0x75, 0x6e, 0x63, 0x68, 0x61, 0x6e, 0x67, 0x65,
	0x64, 0x22, 0x3d, 0x0a, 0x0b, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74, 0x45, 0x72, 0x72, 0x6f, 0x72,
	0x12, 0x16, 0x0a, 0x06, 0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09,
	0x52, 0x06, 0x73, 0x6f, 0x75, 0x72, 0x63, 0x65, 0x12, 0x16, 0x0a, 0x06, 0x72, 0x65, 0x61, 0x73,
	0x6f, 0x6e, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x06, 0x72, 0x65, 0x61, 0x73, 0x6f, 0x6e,
	0x22, 0xbc, 0x01, 0x0a, 0x17, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74, 0x44, 0x6f, 0x63, 0x75, 0x6d,
	0x65, 0x6e, 0x74, 0x73, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x3c, 0x0a, 0x09,
	0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x18, 0x01, 0x20, 0x03, 0x28, 0x0b, 0x32,
	0x1e, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x49,
	0x6e, 0x67, 0x65, 0x73, 0x74, 0x65, 0x64, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x52,
	0x09, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x12, 0x31, 0x0a, 0x06, 0x65, 0x72,
	0x72, 0x6f, 0x72, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x19, 0x2e, 0x72, 0x65, 0x74,
	0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74,
	0x45, 0x72, 0x72, 0x6f, 0x72, 0x52, 0x06, 0x65, 0x72, 0x72, 0x6f, 0x72, 0x73, 0x12, 0x30, 0x0a,
	0x14, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x5f, 0x6e, 0x6f, 0x74, 0x5f, 0x6c,
	0x69, 0x73, 0x74, 0x65, 0x64, 0x18, 0x03, 0x20, 0x01, 0x28, 0x05, 0x52, 0x12, 0x64, 0x6f, 0x63,
	0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x4e, 0x6f, 0x74, 0x4c, 0x69, 0x73, 0x74, 0x65, 0x64, 0x22,
	0x3b, 0x0a, 0x16, 0x44, 0x65, 0x6c, 0x65, 0x74, 0x65, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e,
	0x74, 0x73, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x12, 0x21, 0x0a, 0x0c, 0x64, 0x6f, 0x63,
	0x75, 0x6d, 0x65, 0x6e, 0x74, 0x5f, 0x69, 0x64, 0x73, 0x18, 0x01, 0x20, 0x03, 0x28, 0x09, 0x52,
	0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x73, 0x22, 0x50, 0x0a, 0x17,
	0x44, 0x65, 0x6c, 0x65, 0x74, 0x65, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52,
	0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x18, 0x0a, 0x07, 0x64, 0x65, 0x6c, 0x65, 0x74,
	0x65, 0x64, 0x18, 0x01, 0x20, 0x03, 0x28, 0x09, 0x52, 0x07, 0x64, 0x65, 0x6c, 0x65, 0x74, 0x65,
	0x64, 0x12, 0x1b, 0x0a, 0x09, 0x6e, 0x6f, 0x74, 0x5f, 0x66, 0x6f, 0x75, 0x6e, 0x64, 0x18, 0x02,
	0x20, 0x03, 0x28, 0x09, 0x52, 0x08, 0x6e, 0x6f, 0x74, 0x46, 0x6f, 0x75, 0x6e, 0x64, 0x22, 0x45,
	0x0a, 0x08, 0x54, 0x6f, 0x6f, 0x6c, 0x43, 0x61, 0x6c, 0x6c, 0x12, 0x12, 0x0a, 0x04, 0x6e, 0x61,
	0x6d, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x12, 0x25,
	0x0a, 0x0e, 0x61, 0x72, 0x67, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x5f, 0x6a, 0x73, 0x6f, 0x6e,
	0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0d, 0x61, 0x72, 0x67, 0x75, 0x6d, 0x65, 0x6e, 0x74,
	0x73, 0x4a, 0x73, 0x6f, 0x6e, 0x22, 0xa8, 0x01, 0x0a, 0x0d, 0x52, 0x6f, 0x75, 0x74, 0x65, 0x44,
	0x65, 0x63, 0x69, 0x73, 0x69, 0x6f, 0x6e, 0x12, 0x29, 0x0a, 0x05, 0x72, 0x6f, 0x75, 0x74, 0x65,
	0x18, 0x01, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x13, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76,
	0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x52, 0x6f, 0x75, 0x74, 0x65, 0x52, 0x05, 0x72, 0x6f, 0x75,
	0x74, 0x65, 0x12, 0x35, 0x0a, 0x0a, 0x74, 0x6f, 0x6f, 0x6c, 0x5f, 0x63, 0x61, 0x6c, 0x6c, 0x73,
	0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x16, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76,
	0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x54, 0x6f, 0x6f, 0x6c, 0x43, 0x61, 0x6c, 0x6c, 0x52, 0x09,
	0x74, 0x6f, 0x6f, 0x6c, 0x43, 0x61, 0x6c, 0x6c, 0x73, 0x12, 0x16, 0x0a, 0x06, 0x72, 0x65, 0x61,
	0x73, 0x6f, 0x6e, 0x18, 0x03, 0x20, 0x01, 0x28, 0x09, 0x52, 0x06, 0x72, 0x65, 0x61, 0x73, 0x6f,
	0x6e, 0x12, 0x1d, 0x0a, 0x0a, 0x64, 0x65, 0x63, 0x69, 0x64, 0x65, 0x64, 0x5f, 0x62, 0x79, 0x18,
	0x04, 0x20, 0x01, 0x28, 0x09, 0x52, 0x09, 0x64, 0x65, 0x63, 0x69, 0x64, 0x65, 0x64, 0x42, 0x79,
	0x22, 0x9f, 0x01, 0x0a, 0x0b, 0x45, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x4d, 0x61, 0x74, 0x63, 0x68,
	0x12, 0x12, 0x0a, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04,
	0x6e, 0x61, 0x6d, 0x65, 0x12, 0x1f, 0x0a, 0x0b, 0x65, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x5f, 0x74,
	0x79, 0x70, 0x65, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0a, 0x65, 0x6e, 0x74, 0x69, 0x74,
	0x79, 0x54, 0x79, 0x70, 0x65, 0x12, 0x12, 0x0a, 0x04, 0x74, 0x65, 0x78, 0x74, 0x18, 0x03, 0x20,
	0x01, 0x28, 0x09, 0x52, 0x04, 0x74, 0x65, 0x78, 0x74, 0x12, 0x31, 0x0a, 0x04, 0x6b, 0x69, 0x6e,
	0x64, 0x18, 0x04, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x1d, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65,
	0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x45, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x4d, 0x61, 0x74,
	0x63, 0x68, 0x4b, 0x69, 0x6e, 0x64, 0x52, 0x04, 0x6b, 0x69, 0x6e, 0x64, 0x12, 0x14, 0x0a, 0x05,
	0x73, 0x63, 0x6f, 0x72, 0x65, 0x18, 0x05, 0x20, 0x01, 0x28, 0x02, 0x52, 0x05, 0x73, 0x63, 0x6f,
	0x72, 0x65, 0x22, 0x6a, 0x0a, 0x08, 0x47, 0x72, 0x61, 0x70, 0x68, 0x48, 0x6f, 0x70, 0x12, 0x10,
	0x0a, 0x03, 0x68, 0x6f, 0x70, 0x18, 0x01, 0x20, 0x01, 0x28, 0x05, 0x52, 0x03, 0x68, 0x6f, 0x70,
	0x12, 0x18, 0x0a, 0x07, 0x70, 0x65, 0x6e, 0x61, 0x6c, 0x74, 0x79, 0x18, 0x02, 0x20, 0x01, 0x28,
	0x02, 0x52, 0x07, 0x70, 0x65, 0x6e, 0x61, 0x6c, 0x74, 0x79, 0x12, 0x1a, 0x0a, 0x08, 0x65, 0x6e,
	0x74, 0x69, 0x74, 0x69, 0x65, 0x73, 0x18, 0x03, 0x20, 0x03, 0x28, 0x09, 0x52, 0x08, 0x65, 0x6e,
	0x74, 0x69, 0x74, 0x69, 0x65, 0x73, 0x12, 0x16, 0x0a, 0x06, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x73,
	0x18, 0x04, 0x20, 0x01, 0x28, 0x05, 0x52, 0x06, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x73, 0x22, 0x6f,
	0x0a, 0x0a, 0x47, 0x72, 0x61, 0x70, 0x68, 0x54, 0x72, 0x61, 0x63, 0x65, 0x12, 0x35, 0x0a, 0x08,
	0x65, 0x6e, 0x74, 0x69, 0x74, 0x69, 0x65, 0x73, 0x18, 0x01, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x19,
	0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x45, 0x6e,
	0x74, 0x69, 0x74, 0x79, 0x4d, 0x61, 0x74, 0x63, 0x68, 0x52, 0x08, 0x65, 0x6e, 0x74, 0x69, 0x74,
	0x69, 0x65, 0x73, 0x12, 0x2a, 0x0a, 0x04, 0x68, 0x6f, 0x70, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28,
	0x0b, 0x32, 0x16, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31,
	0x2e, 0x47, 0x72, 0x61, 0x70, 0x68, 0x48, 0x6f, 0x70, 0x52, 0x04, 0x68, 0x6f, 0x70, 0x73, 0x22,
	0xd3, 0x01, 0x0a, 0x0a, 0x54, 0x6f, 0x6f, 0x6c, 0x52, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x12, 0x12,
	0x0a, 0x04, 0x6e, 0x61, 0x6d, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04, 0x6e, 0x61,
	0x6d, 0x65, 0x12, 0x25, 0x0a, 0x0e, 0x61, 0x72, 0x67, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x5f,
	0x6a, 0x73, 0x6f, 0x6e, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0d, 0x61, 0x72, 0x67, 0x75,
	0x6d, 0x65, 0x6e, 0x74, 0x73, 0x4a, 0x73, 0x6f, 0x6e, 0x12, 0x18, 0x0a, 0x07, 0x73, 0x75, 0x63,
	0x63, 0x65, 0x73, 0x73, 0x18, 0x03, 0x20, 0x01, 0x28, 0x08, 0x52, 0x07, 0x73, 0x75, 0x63, 0x63,
	0x65, 0x73, 0x73, 0x12, 0x1f, 0x0a, 0x0b, 0x72, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x5f, 0x6a, 0x73,
	0x6f, 0x6e, 0x18, 0x04, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0a, 0x72, 0x65, 0x73, 0x75, 0x6c, 0x74,
	0x4a, 0x73, 0x6f, 0x6e, 0x12, 0x14, 0x0a, 0x05, 0x65, 0x72, 0x72, 0x6f, 0x72, 0x18, 0x05, 0x20,
	0x01, 0x28, 0x09, 0x52, 0x05, 0x65, 0x72, 0x72, 0x6f, 0x72, 0x12, 0x18, 0x0a, 0x07, 0x73, 0x75,
	0x6d, 0x6d, 0x61, 0x72, 0x79, 0x18, 0x06, 0x20, 0x01, 0x28, 0x09, 0x52, 0x07, 0x73, 0x75, 0x6d,
	0x6d, 0x61, 0x72, 0x79, 0x12, 0x1f, 0x0a, 0x0b, 0x64, 0x75, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e,
	0x5f, 0x6d, 0x73, 0x18, 0x07, 0x20, 0x01, 0x28, 0x01, 0x52, 0x0a, 0x64, 0x75, 0x72, 0x61, 0x74,
	0x69, 0x6f, 0x6e, 0x4d, 0x73, 0x22, 0x42, 0x0a, 0x0e, 0x41, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x53,
	0x65, 0x6e, 0x74, 0x65, 0x6e, 0x63, 0x65, 0x12, 0x12, 0x0a, 0x04, 0x74, 0x65, 0x78, 0x74, 0x18,
	0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04, 0x74, 0x65, 0x78, 0x74, 0x12, 0x1c, 0x0a, 0x09, 0x63,
	0x69, 0x74, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x05, 0x52, 0x09,
	0x63, 0x69, 0x74, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x22, 0x81, 0x01, 0x0a, 0x08, 0x43, 0x69,
	0x74, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x12, 0x16, 0x0a, 0x06, 0x6d, 0x61, 0x72, 0x6b, 0x65, 0x72,
	0x18, 0x01, 0x20, 0x01, 0x28, 0x05, 0x52, 0x06, 0x6d, 0x61, 0x72, 0x6b, 0x65, 0x72, 0x12, 0x26,
	0x0a, 0x0f, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x5f, 0x63, 0x68, 0x75, 0x6e, 0x6b, 0x5f, 0x69,
	0x64, 0x18, 0x02, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0d, 0x70, 0x61, 0x72, 0x65, 0x6e, 0x74, 0x43,
	0x68, 0x75, 0x6e, 0x6b, 0x49, 0x64, 0x12, 0x1f, 0x0a, 0x0b, 0x64, 0x6f, 0x63, 0x75, 0x6d, 0x65,
	0x6e, 0x74, 0x5f, 0x69, 0x64, 0x18, 0x03, 0x20, 0x01, 0x28, 0x09, 0x52, 0x0a, 0x64, 0x6f, 0x63,
	0x75, 0x6d, 0x65, 0x6e, 0x74, 0x49, 0x64, 0x12, 0x14, 0x0a, 0x05, 0x74, 0x69, 0x74, 0x6c, 0x65,
	0x18, 0x04, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x74, 0x69, 0x74, 0x6c, 0x65, 0x22, 0xca, 0x02,
	0x0a, 0x06, 0x41, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x12, 0x12, 0x0a, 0x04, 0x74, 0x65, 0x78, 0x74,
	0x18, 0x01, 0x20, 0x01, 0x28, 0x09, 0x52, 0x04, 0x74, 0x65, 0x78, 0x74, 0x12, 0x3a, 0x0a, 0x09,
	0x73, 0x65, 0x6e, 0x74, 0x65, 0x6e, 0x63, 0x65, 0x73, 0x18, 0x02, 0x20, 0x03, 0x28, 0x0b, 0x32,
	0x1c, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x41,
	0x6e, 0x73, 0x77, 0x65, 0x72, 0x53, 0x65, 0x6e, 0x74, 0x65, 0x6e, 0x63, 0x65, 0x52, 0x09, 0x73,
	0x65, 0x6e, 0x74, 0x65, 0x6e, 0x63, 0x65, 0x73, 0x12, 0x34, 0x0a, 0x09, 0x63, 0x69, 0x74, 0x61,
	0x74, 0x69, 0x6f, 0x6e, 0x73, 0x18, 0x03, 0x20, 0x03, 0x28, 0x0b, 0x32, 0x16, 0x2e, 0x72, 0x65,
	0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x43, 0x69, 0x74, 0x61, 0x74,
	0x69, 0x6f, 0x6e, 0x52, 0x09, 0x63, 0x69, 0x74, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x73, 0x12, 0x29,
	0x0a, 0x05, 0x72, 0x6f, 0x75, 0x74, 0x65, 0x18, 0x04, 0x20, 0x01, 0x28, 0x0e, 0x32, 0x13, 0x2e,
	0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x52, 0x6f, 0x75,
	0x74, 0x65, 0x52, 0x05, 0x72, 0x6f, 0x75, 0x74, 0x65, 0x12, 0x1e, 0x0a, 0x0a, 0x65, 0x78, 0x74,
	0x72, 0x61, 0x63, 0x74, 0x69, 0x76, 0x65, 0x18, 0x05, 0x20, 0x01, 0x28, 0x08, 0x52, 0x0a, 0x65,
	0x78, 0x74, 0x72, 0x61, 0x63, 0x74, 0x69, 0x76, 0x65, 0x12, 0x1c, 0x0a, 0x09, 0x73, 0x75, 0x70,
	0x70, 0x6f, 0x72, 0x74, 0x65, 0x64, 0x18, 0x06, 0x20, 0x01, 0x28, 0x08, 0x52, 0x09, 0x73, 0x75,
	0x70, 0x70, 0x6f, 0x72, 0x74, 0x65, 0x64, 0x12, 0x14, 0x0a, 0x05, 0x6d, 0x6f, 0x64, 0x65, 0x6c,
	0x18, 0x07, 0x20, 0x01, 0x28, 0x09, 0x52, 0x05, 0x6d, 0x6f, 0x64, 0x65, 0x6c, 0x12, 0x3b, 0x0a,
	0x0c, 0x74, 0x6f, 0x6f, 0x6c, 0x5f, 0x72, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x73, 0x18, 0x08, 0x20,
	0x03, 0x28, 0x0b, 0x32, 0x18, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e,
	0x76, 0x31, 0x2e, 0x54, 0x6f, 0x6f, 0x6c, 0x52, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x52, 0x0b, 0x74,
	0x6f, 0x6f, 0x6c, 0x52, 0x65, 0x73, 0x75, 0x6c, 0x74, 0x73, 0x22, 0x46, 0x0a, 0x12, 0x53, 0x74,
	0x72, 0x65, 0x61, 0x6d, 0x51, 0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74,
	0x12, 0x30, 0x0a, 0x05, 0x71, 0x75, 0x65, 0x72, 0x79, 0x18, 0x01, 0x20, 0x01, 0x28, 0x0b, 0x32,
	0x1a, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x51,
	0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x52, 0x05, 0x71, 0x75, 0x65,
	0x72, 0x79, 0x22, 0xb1, 0x01, 0x0a, 0x13, 0x53, 0x74, 0x72, 0x65, 0x61, 0x6d, 0x51, 0x75, 0x65,
	0x72, 0x79, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x31, 0x0a, 0x05, 0x73, 0x74,
	0x61, 0x67, 0x65, 0x18, 0x01, 0x20, 0x01, 0x28, 0x0b, 0x32, 0x19, 0x2e, 0x72, 0x65, 0x74, 0x72,
	0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x61, 0x67, 0x65, 0x4d, 0x65,
	0x74, 0x72, 0x69, 0x63, 0x48, 0x00, 0x52, 0x05, 0x73, 0x74, 0x61, 0x67, 0x65, 0x12, 0x23, 0x0a,
	0x0c, 0x61, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x5f, 0x64, 0x65, 0x6c, 0x74, 0x61, 0x18, 0x02, 0x20,
	0x01, 0x28, 0x09, 0x48, 0x00, 0x52, 0x0b, 0x61, 0x6e, 0x73, 0x77, 0x65, 0x72, 0x44, 0x65, 0x6c,
	0x74, 0x61, 0x12, 0x39, 0x0a, 0x08, 0x72, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x18, 0x03,
	0x20, 0x01, 0x28, 0x0b, 0x32, 0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c,
	0x2e, 0x76, 0x31, 0x2e, 0x51, 0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73,
	0x65, 0x48, 0x00, 0x52, 0x08, 0x72, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x42, 0x07, 0x0a,
	0x05, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x2a, 0x91, 0x01, 0x0a, 0x08, 0x53, 0x74, 0x72, 0x61, 0x74,
	0x65, 0x67, 0x79, 0x12, 0x18, 0x0a, 0x14, 0x53, 0x54, 0x52, 0x41, 0x54, 0x45, 0x47, 0x59, 0x5f,
	0x55, 0x4e, 0x53, 0x50, 0x45, 0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12, 0x15, 0x0a,
	0x11, 0x53, 0x54, 0x52, 0x41, 0x54, 0x45, 0x47, 0x59, 0x5f, 0x53, 0x45, 0x4d, 0x41, 0x4e, 0x54,
	0x49, 0x43, 0x10, 0x01, 0x12, 0x14, 0x0a, 0x10, 0x53, 0x54, 0x52, 0x41, 0x54, 0x45, 0x47, 0x59,
	0x5f, 0x4b, 0x45, 0x59, 0x57, 0x4f, 0x52, 0x44, 0x10, 0x02, 0x12, 0x13, 0x0a, 0x0f, 0x53, 0x54,
	0x52, 0x41, 0x54, 0x45, 0x47, 0x59, 0x5f, 0x48, 0x59, 0x42, 0x52, 0x49, 0x44, 0x10, 0x03, 0x12,
	0x15, 0x0a, 0x11, 0x53, 0x54, 0x52, 0x41, 0x54, 0x45, 0x47, 0x59, 0x5f, 0x41, 0x44, 0x41, 0x50,
	0x54, 0x49, 0x56, 0x45, 0x10, 0x04, 0x12, 0x12, 0x0a, 0x0e, 0x53, 0x54, 0x52, 0x41, 0x54, 0x45,
	0x47, 0x59, 0x5f, 0x47, 0x52, 0x41, 0x50, 0x48, 0x10, 0x05, 0x2a, 0x4a, 0x0a, 0x04, 0x4d, 0x6f,
	0x64, 0x65, 0x12, 0x14, 0x0a, 0x10, 0x4d, 0x4f, 0x44, 0x45, 0x5f, 0x55, 0x4e, 0x53, 0x50, 0x45,
	0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12, 0x17, 0x0a, 0x13, 0x4d, 0x4f, 0x44, 0x45,
	0x5f, 0x52, 0x45, 0x54, 0x52, 0x49, 0x45, 0x56, 0x41, 0x4c, 0x5f, 0x4f, 0x4e, 0x4c, 0x59, 0x10,
	0x01, 0x12, 0x13, 0x0a, 0x0f, 0x4d, 0x4f, 0x44, 0x45, 0x5f, 0x47, 0x45, 0x4e, 0x45, 0x52, 0x41,
	0x54, 0x49, 0x4f, 0x4e, 0x10, 0x02, 0x2a, 0x45, 0x0a, 0x06, 0x46, 0x75, 0x73, 0x69, 0x6f, 0x6e,
	0x12, 0x16, 0x0a, 0x12, 0x46, 0x55, 0x53, 0x49, 0x4f, 0x4e, 0x5f, 0x55, 0x4e, 0x53, 0x50, 0x45,
	0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12, 0x0e, 0x0a, 0x0a, 0x46, 0x55, 0x53, 0x49,
	0x4f, 0x4e, 0x5f, 0x52, 0x52, 0x46, 0x10, 0x01, 0x12, 0x13, 0x0a, 0x0f, 0x46, 0x55, 0x53, 0x49,
	0x4f, 0x4e, 0x5f, 0x57, 0x45, 0x49, 0x47, 0x48, 0x54, 0x45, 0x44, 0x10, 0x02, 0x2a, 0xab, 0x01,
	0x0a, 0x0d, 0x53, 0x65, 0x72, 0x76, 0x69, 0x6e, 0x67, 0x53, 0x74, 0x61, 0x74, 0x75, 0x73, 0x12,
	0x1e, 0x0a, 0x1a, 0x53, 0x45, 0x52, 0x56, 0x49, 0x4e, 0x47, 0x5f, 0x53, 0x54, 0x41, 0x54, 0x55,
	0x53, 0x5f, 0x55, 0x4e, 0x53, 0x50, 0x45, 0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12,
	0x1a, 0x0a, 0x16, 0x53, 0x45, 0x52, 0x56, 0x49, 0x4e, 0x47, 0x5f, 0x53, 0x54, 0x41, 0x54, 0x55,
	0x53, 0x5f, 0x53, 0x45, 0x52, 0x56, 0x49, 0x4e, 0x47, 0x10, 0x01, 0x12, 0x1b, 0x0a, 0x17, 0x53,
	0x45, 0x52, 0x56, 0x49, 0x4e, 0x47, 0x5f, 0x53, 0x54, 0x41, 0x54, 0x55, 0x53, 0x5f, 0x44, 0x45,
	0x47, 0x52, 0x41, 0x44, 0x45, 0x44, 0x10, 0x02, 0x12, 0x1e, 0x0a, 0x1a, 0x53, 0x45, 0x52, 0x56,
	0x49, 0x4e, 0x47, 0x5f, 0x53, 0x54, 0x41, 0x54, 0x55, 0x53, 0x5f, 0x4e, 0x4f, 0x54, 0x5f, 0x53,
	0x45, 0x52, 0x56, 0x49, 0x4e, 0x47, 0x10, 0x03, 0x12, 0x21, 0x0a, 0x1d, 0x53, 0x45, 0x52, 0x56,
	0x49, 0x4e, 0x47, 0x5f, 0x53, 0x54, 0x41, 0x54, 0x55, 0x53, 0x5f, 0x4e, 0x4f, 0x54, 0x5f, 0x43,
	0x4f, 0x4e, 0x46, 0x49, 0x47, 0x55, 0x52, 0x45, 0x44, 0x10, 0x04, 0x2a, 0x47, 0x0a, 0x06, 0x41,
	0x63, 0x63, 0x65, 0x73, 0x73, 0x12, 0x16, 0x0a, 0x12, 0x41, 0x43, 0x43, 0x45, 0x53, 0x53, 0x5f,
	0x55, 0x4e, 0x53, 0x50, 0x45, 0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12, 0x11, 0x0a,
	0x0d, 0x41, 0x43, 0x43, 0x45, 0x53, 0x53, 0x5f, 0x50, 0x55, 0x42, 0x4c, 0x49, 0x43, 0x10, 0x01,
	0x12, 0x12, 0x0a, 0x0e, 0x41, 0x43, 0x43, 0x45, 0x53, 0x53, 0x5f, 0x50, 0x52, 0x49, 0x56, 0x41,
	0x54, 0x45, 0x10, 0x02, 0x2a, 0x5b, 0x0a, 0x05, 0x52, 0x6f, 0x75, 0x74, 0x65, 0x12, 0x15, 0x0a,
	0x11, 0x52, 0x4f, 0x55, 0x54, 0x45, 0x5f, 0x55, 0x4e, 0x53, 0x50, 0x45, 0x43, 0x49, 0x46, 0x49,
	0x45, 0x44, 0x10, 0x00, 0x12, 0x12, 0x0a, 0x0e, 0x52, 0x4f, 0x55, 0x54, 0x45, 0x5f, 0x52, 0x45,
	0x54, 0x52, 0x49, 0x45, 0x56, 0x45, 0x10, 0x01, 0x12, 0x0e, 0x0a, 0x0a, 0x52, 0x4f, 0x55, 0x54,
	0x45, 0x5f, 0x54, 0x4f, 0x4f, 0x4c, 0x10, 0x02, 0x12, 0x17, 0x0a, 0x13, 0x52, 0x4f, 0x55, 0x54,
	0x45, 0x5f, 0x44, 0x49, 0x52, 0x45, 0x43, 0x54, 0x5f, 0x41, 0x4e, 0x53, 0x57, 0x45, 0x52, 0x10,
	0x03, 0x2a, 0x91, 0x01, 0x0a, 0x0f, 0x45, 0x6e, 0x74, 0x69, 0x74, 0x79, 0x4d, 0x61, 0x74, 0x63,
	0x68, 0x4b, 0x69, 0x6e, 0x64, 0x12, 0x21, 0x0a, 0x1d, 0x45, 0x4e, 0x54, 0x49, 0x54, 0x59, 0x5f,
	0x4d, 0x41, 0x54, 0x43, 0x48, 0x5f, 0x4b, 0x49, 0x4e, 0x44, 0x5f, 0x55, 0x4e, 0x53, 0x50, 0x45,
	0x43, 0x49, 0x46, 0x49, 0x45, 0x44, 0x10, 0x00, 0x12, 0x1b, 0x0a, 0x17, 0x45, 0x4e, 0x54, 0x49,
	0x54, 0x59, 0x5f, 0x4d, 0x41, 0x54, 0x43, 0x48, 0x5f, 0x4b, 0x49, 0x4e, 0x44, 0x5f, 0x45, 0x58,
	0x41, 0x43, 0x54, 0x10, 0x01, 0x12, 0x21, 0x0a, 0x1d, 0x45, 0x4e, 0x54, 0x49, 0x54, 0x59, 0x5f,
	0x4d, 0x41, 0x54, 0x43, 0x48, 0x5f, 0x4b, 0x49, 0x4e, 0x44, 0x5f, 0x43, 0x41, 0x53, 0x45, 0x5f,
	0x46, 0x4f, 0x4c, 0x44, 0x45, 0x44, 0x10, 0x02, 0x12, 0x1b, 0x0a, 0x17, 0x45, 0x4e, 0x54, 0x49,
	0x54, 0x59, 0x5f, 0x4d, 0x41, 0x54, 0x43, 0x48, 0x5f, 0x4b, 0x49, 0x4e, 0x44, 0x5f, 0x46, 0x55,
	0x5a, 0x5a, 0x59, 0x10, 0x03, 0x32, 0xf4, 0x03, 0x0a, 0x10, 0x52, 0x65, 0x74, 0x72, 0x69, 0x65,
	0x76, 0x61, 0x6c, 0x53, 0x65, 0x72, 0x76, 0x69, 0x63, 0x65, 0x12, 0x40, 0x0a, 0x05, 0x51, 0x75,
	0x65, 0x72, 0x79, 0x12, 0x1a, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e,
	0x76, 0x31, 0x2e, 0x51, 0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x1a,
	0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x51,
	0x75, 0x65, 0x72, 0x79, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x43, 0x0a, 0x06,
	0x53, 0x65, 0x61, 0x72, 0x63, 0x68, 0x12, 0x1b, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76,
	0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x65, 0x61, 0x72, 0x63, 0x68, 0x52, 0x65, 0x71, 0x75,
	0x65, 0x73, 0x74, 0x1a, 0x1c, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e,
	0x76, 0x31, 0x2e, 0x53, 0x65, 0x61, 0x72, 0x63, 0x68, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73,
	0x65, 0x12, 0x43, 0x0a, 0x06, 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68, 0x12, 0x1b, 0x2e, 0x72, 0x65,
	0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x48, 0x65, 0x61, 0x6c, 0x74,
	0x68, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x1a, 0x1c, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69,
	0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x48, 0x65, 0x61, 0x6c, 0x74, 0x68, 0x52, 0x65,
	0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x5e, 0x0a, 0x0f, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74,
	0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x12, 0x24, 0x2e, 0x72, 0x65, 0x74, 0x72,
	0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x49, 0x6e, 0x67, 0x65, 0x73, 0x74, 0x44,
	0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x1a,
	0x25, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x49,
	0x6e, 0x67, 0x65, 0x73, 0x74, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52, 0x65,
	0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x5e, 0x0a, 0x0f, 0x44, 0x65, 0x6c, 0x65, 0x74, 0x65,
	0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x12, 0x24, 0x2e, 0x72, 0x65, 0x74, 0x72,
	0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x44, 0x65, 0x6c, 0x65, 0x74, 0x65, 0x44,
	0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x1a,
	0x25, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x44,
	0x65, 0x6c, 0x65, 0x74, 0x65, 0x44, 0x6f, 0x63, 0x75, 0x6d, 0x65, 0x6e, 0x74, 0x73, 0x52, 0x65,
	0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x12, 0x54, 0x0a, 0x0b, 0x53, 0x74, 0x72, 0x65, 0x61, 0x6d,
	0x51, 0x75, 0x65, 0x72, 0x79, 0x12, 0x20, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61,
	0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x72, 0x65, 0x61, 0x6d, 0x51, 0x75, 0x65, 0x72, 0x79,
	0x52, 0x65, 0x71, 0x75, 0x65, 0x73, 0x74, 0x1a, 0x21, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65,
	0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31, 0x2e, 0x53, 0x74, 0x72, 0x65, 0x61, 0x6d, 0x51, 0x75, 0x65,
	0x72, 0x79, 0x52, 0x65, 0x73, 0x70, 0x6f, 0x6e, 0x73, 0x65, 0x30, 0x01, 0x42, 0x69, 0x0a, 0x10,
	0x64, 0x65, 0x76, 0x2e, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2e, 0x76, 0x31,
	0x50, 0x01, 0x5a, 0x53, 0x67, 0x69, 0x74, 0x68, 0x75, 0x62, 0x2e, 0x63, 0x6f, 0x6d, 0x2f, 0x72,
	0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2d, 0x70, 0x6c, 0x61, 0x74, 0x66, 0x6f, 0x72,
	0x6d, 0x2f, 0x72, 0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2d, 0x73, 0x65, 0x72, 0x76,
	0x69, 0x63, 0x65, 0x2f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x73, 0x2f, 0x67, 0x6f, 0x2f, 0x72,
	0x65, 0x74, 0x72, 0x69, 0x65, 0x76, 0x61, 0x6c, 0x2f, 0x76, 0x31, 0x3b, 0x72, 0x65, 0x74, 0x72,
	0x69, 0x65, 0x76, 0x61, 0x6c, 0x76, 0x31, 0x62, 0x06, 0x70, 0x72, 0x6f, 0x74, 0x6f, 0x33,
}

var (
	file_retrieval_v1_retrieval_proto_rawDescOnce sync.Once
	file_retrieval_v1_retrieval_proto_rawDescData = file_retrieval_v1_retrieval_proto_rawDesc
)

func file_retrieval_v1_retrieval_proto_rawDescGZIP() []byte {
	file_retrieval_v1_retrieval_proto_rawDescOnce.Do(func() {
		file_retrieval_v1_retrieval_proto_rawDescData = protoimpl.X.CompressGZIP(file_retrieval_v1_retrieval_proto_rawDescData)
	})
	return file_retrieval_v1_retrieval_proto_rawDescData
}

var file_retrieval_v1_retrieval_proto_enumTypes = make([]protoimpl.EnumInfo, 7)
var file_retrieval_v1_retrieval_proto_msgTypes = make([]protoimpl.MessageInfo, 34)
var file_retrieval_v1_retrieval_proto_goTypes = []interface{}{
	(Strategy)(0),                   // 0: retrieval.v1.Strategy
	(Mode)(0),                       // 1: retrieval.v1.Mode
	(Fusion)(0),                     // 2: retrieval.v1.Fusion
	(ServingStatus)(0),              // 3: retrieval.v1.ServingStatus
	(Access)(0),                     // 4: retrieval.v1.Access
	(Route)(0),                      // 5: retrieval.v1.Route
	(EntityMatchKind)(0),            // 6: retrieval.v1.EntityMatchKind
	(*QueryFilters)(nil),            // 7: retrieval.v1.QueryFilters
	(*QueryRequest)(nil),            // 8: retrieval.v1.QueryRequest
	(*ChildChunk)(nil),              // 9: retrieval.v1.ChildChunk
	(*DocumentMetadata)(nil),        // 10: retrieval.v1.DocumentMetadata
	(*Context)(nil),                 // 11: retrieval.v1.Context
	(*StageMetric)(nil),             // 12: retrieval.v1.StageMetric
	(*Metrics)(nil),                 // 13: retrieval.v1.Metrics
	(*QueryResponse)(nil),           // 14: retrieval.v1.QueryResponse
	(*SearchRequest)(nil),           // 15: retrieval.v1.SearchRequest
	(*SearchResult)(nil),            // 16: retrieval.v1.SearchResult
	(*SearchResponse)(nil),          // 17: retrieval.v1.SearchResponse
	(*HealthRequest)(nil),           // 18: retrieval.v1.HealthRequest
	(*ComponentHealth)(nil),         // 19: retrieval.v1.ComponentHealth
	(*HealthResponse)(nil),          // 20: retrieval.v1.HealthResponse
	(*DocumentInput)(nil),           // 21: retrieval.v1.DocumentInput
	(*IngestDocumentsRequest)(nil),  // 22: retrieval.v1.IngestDocumentsRequest
	(*IngestedDocument)(nil),        // 23: retrieval.v1.IngestedDocument
	(*IngestError)(nil),             // 24: retrieval.v1.IngestError
	(*IngestDocumentsResponse)(nil), // 25: retrieval.v1.IngestDocumentsResponse
	(*DeleteDocumentsRequest)(nil),  // 26: retrieval.v1.DeleteDocumentsRequest
	(*DeleteDocumentsResponse)(nil), // 27: retrieval.v1.DeleteDocumentsResponse
	(*ToolCall)(nil),                // 28: retrieval.v1.ToolCall
	(*RouteDecision)(nil),           // 29: retrieval.v1.RouteDecision
	(*EntityMatch)(nil),             // 30: retrieval.v1.EntityMatch
	(*GraphHop)(nil),                // 31: retrieval.v1.GraphHop
	(*GraphTrace)(nil),              // 32: retrieval.v1.GraphTrace
	(*ToolResult)(nil),              // 33: retrieval.v1.ToolResult
	(*AnswerSentence)(nil),          // 34: retrieval.v1.AnswerSentence
	(*Citation)(nil),                // 35: retrieval.v1.Citation
	(*Answer)(nil),                  // 36: retrieval.v1.Answer
	(*StreamQueryRequest)(nil),      // 37: retrieval.v1.StreamQueryRequest
	(*StreamQueryResponse)(nil),     // 38: retrieval.v1.StreamQueryResponse
	nil,                             // 39: retrieval.v1.DocumentMetadata.ExtraEntry
	nil,                             // 40: retrieval.v1.DocumentInput.MetadataEntry
}
var file_retrieval_v1_retrieval_proto_depIdxs = []int32{
	0,  // 0: retrieval.v1.QueryRequest.strategy:type_name -> retrieval.v1.Strategy
	1,  // 1: retrieval.v1.QueryRequest.mode:type_name -> retrieval.v1.Mode
	7,  // 2: retrieval.v1.QueryRequest.filters:type_name -> retrieval.v1.QueryFilters
	2,  // 3: retrieval.v1.QueryRequest.fusion:type_name -> retrieval.v1.Fusion
	39, // 4: retrieval.v1.DocumentMetadata.extra:type_name -> retrieval.v1.DocumentMetadata.ExtraEntry
	10, // 5: retrieval.v1.Context.metadata:type_name -> retrieval.v1.DocumentMetadata
	9,  // 6: retrieval.v1.Context.child_chunks:type_name -> retrieval.v1.ChildChunk
	12, // 7: retrieval.v1.Metrics.stages:type_name -> retrieval.v1.StageMetric
	0,  // 8: retrieval.v1.Metrics.strategy_used:type_name -> retrieval.v1.Strategy
	29, // 9: retrieval.v1.Metrics.route:type_name -> retrieval.v1.RouteDecision
	32, // 10: retrieval.v1.Metrics.graph:type_name -> retrieval.v1.GraphTrace
	11, // 11: retrieval.v1.QueryResponse.contexts:type_name -> retrieval.v1.Context
	13, // 12: retrieval.v1.QueryResponse.metrics:type_name -> retrieval.v1.Metrics
	36, // 13: retrieval.v1.QueryResponse.answer:type_name -> retrieval.v1.Answer
	16, // 14: retrieval.v1.SearchResponse.results:type_name -> retrieval.v1.SearchResult
	3,  // 15: retrieval.v1.ComponentHealth.status:type_name -> retrieval.v1.ServingStatus
	3,  // 16: retrieval.v1.HealthResponse.status:type_name -> retrieval.v1.ServingStatus
	19, // 17: retrieval.v1.HealthResponse.components:type_name -> retrieval.v1.ComponentHealth
	4,  // 18: retrieval.v1.DocumentInput.access:type_name -> retrieval.v1.Access
	40, // 19: retrieval.v1.DocumentInput.metadata:type_name -> retrieval.v1.DocumentInput.MetadataEntry
	21, // 20: retrieval.v1.IngestDocumentsRequest.documents:type_name -> retrieval.v1.DocumentInput
	23, // 21: retrieval.v1.IngestDocumentsResponse.documents:type_name -> retrieval.v1.IngestedDocument
	24, // 22: retrieval.v1.IngestDocumentsResponse.errors:type_name -> retrieval.v1.IngestError
	5,  // 23: retrieval.v1.RouteDecision.route:type_name -> retrieval.v1.Route
	28, // 24: retrieval.v1.RouteDecision.tool_calls:type_name -> retrieval.v1.ToolCall
	6,  // 25: retrieval.v1.EntityMatch.kind:type_name -> retrieval.v1.EntityMatchKind
	30, // 26: retrieval.v1.GraphTrace.entities:type_name -> retrieval.v1.EntityMatch
	31, // 27: retrieval.v1.GraphTrace.hops:type_name -> retrieval.v1.GraphHop
	34, // 28: retrieval.v1.Answer.sentences:type_name -> retrieval.v1.AnswerSentence
	35, // 29: retrieval.v1.Answer.citations:type_name -> retrieval.v1.Citation
	5,  // 30: retrieval.v1.Answer.route:type_name -> retrieval.v1.Route
	33, // 31: retrieval.v1.Answer.tool_results:type_name -> retrieval.v1.ToolResult
	8,  // 32: retrieval.v1.StreamQueryRequest.query:type_name -> retrieval.v1.QueryRequest
	12, // 33: retrieval.v1.StreamQueryResponse.stage:type_name -> retrieval.v1.StageMetric
	14, // 34: retrieval.v1.StreamQueryResponse.response:type_name -> retrieval.v1.QueryResponse
	8,  // 35: retrieval.v1.RetrievalService.Query:input_type -> retrieval.v1.QueryRequest
	15, // 36: retrieval.v1.RetrievalService.Search:input_type -> retrieval.v1.SearchRequest
	18, // 37: retrieval.v1.RetrievalService.Health:input_type -> retrieval.v1.HealthRequest
	22, // 38: retrieval.v1.RetrievalService.IngestDocuments:input_type -> retrieval.v1.IngestDocumentsRequest
	26, // 39: retrieval.v1.RetrievalService.DeleteDocuments:input_type -> retrieval.v1.DeleteDocumentsRequest
	37, // 40: retrieval.v1.RetrievalService.StreamQuery:input_type -> retrieval.v1.StreamQueryRequest
	14, // 41: retrieval.v1.RetrievalService.Query:output_type -> retrieval.v1.QueryResponse
	17, // 42: retrieval.v1.RetrievalService.Search:output_type -> retrieval.v1.SearchResponse
	20, // 43: retrieval.v1.RetrievalService.Health:output_type -> retrieval.v1.HealthResponse
	25, // 44: retrieval.v1.RetrievalService.IngestDocuments:output_type -> retrieval.v1.IngestDocumentsResponse
	27, // 45: retrieval.v1.RetrievalService.DeleteDocuments:output_type -> retrieval.v1.DeleteDocumentsResponse
	38, // 46: retrieval.v1.RetrievalService.StreamQuery:output_type -> retrieval.v1.StreamQueryResponse
	41, // [41:47] is the sub-list for method output_type
	35, // [35:41] is the sub-list for method input_type
	35, // [35:35] is the sub-list for extension type_name
	35, // [35:35] is the sub-list for extension extendee
	0,  // [0:35] is the sub-list for field type_name
}

func init() { file_retrieval_v1_retrieval_proto_init() }
func file_retrieval_v1_retrieval_proto_init() {
	if File_retrieval_v1_retrieval_proto != nil {
		return
	}
	if !protoimpl.UnsafeEnabled {
		file_retrieval_v1_retrieval_proto_msgTypes[0].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*QueryFilters); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[1].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*QueryRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[2].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*ChildChunk); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[3].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*DocumentMetadata); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[4].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*Context); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[5].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*StageMetric); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[6].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*Metrics); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[7].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*QueryResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[8].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*SearchRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[9].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*SearchResult); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[10].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*SearchResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[11].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*HealthRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[12].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*ComponentHealth); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[13].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*HealthResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[14].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*DocumentInput); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[15].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*IngestDocumentsRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[16].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*IngestedDocument); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[17].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*IngestError); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[18].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*IngestDocumentsResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[19].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*DeleteDocumentsRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[20].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*DeleteDocumentsResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[21].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*ToolCall); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[22].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*RouteDecision); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[23].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*EntityMatch); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[24].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*GraphHop); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[25].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*GraphTrace); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[26].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*ToolResult); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[27].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*AnswerSentence); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[28].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*Citation); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[29].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*Answer); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[30].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*StreamQueryRequest); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
		file_retrieval_v1_retrieval_proto_msgTypes[31].Exporter = func(v interface{}, i int) interface{} {
			switch v := v.(*StreamQueryResponse); i {
			case 0:
				return &v.state
			case 1:
				return &v.sizeCache
			case 2:
				return &v.unknownFields
			default:
				return nil
			}
		}
	}
	file_retrieval_v1_retrieval_proto_msgTypes[1].OneofWrappers = []interface{}{}
	file_retrieval_v1_retrieval_proto_msgTypes[31].OneofWrappers = []interface{}{
		(*StreamQueryResponse_Stage)(nil),
		(*StreamQueryResponse_AnswerDelta)(nil),
		(*StreamQueryResponse_Response)(nil),
	}
	type x struct{}
	out := protoimpl.TypeBuilder{
		File: protoimpl.DescBuilder{
			GoPackagePath: reflect.TypeOf(x{}).PkgPath(),
			RawDescriptor: file_retrieval_v1_retrieval_proto_rawDesc,
			NumEnums:      7,
			NumMessages:   34,
			NumExtensions: 0,
			NumServices:   1,
		},
		GoTypes:           file_retrieval_v1_retrieval_proto_goTypes,
		DependencyIndexes: file_retrieval_v1_retrieval_proto_depIdxs,
		EnumInfos:         file_retrieval_v1_retrieval_proto_enumTypes,
		MessageInfos:      file_retrieval_v1_retrieval_proto_msgTypes,
	}.Build()
	File_retrieval_v1_retrieval_proto = out.File
	file_retrieval_v1_retrieval_proto_rawDesc = nil
	file_retrieval_v1_retrieval_proto_goTypes = nil
	file_retrieval_v1_retrieval_proto_depIdxs = nil
}
