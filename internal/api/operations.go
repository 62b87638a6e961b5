package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/preview"
)

// Paths of the long-running operations (AIP-151): the collection, each
// operation, and its custom methods "{id}:cancel" and "{id}:wait".
const (
	operationsList   = "/v1/operations"
	operationsPrefix = "/v1/operations/"
)

// Bounds of :wait. A waiter polls the replicated state in its own
// handler (no goroutine outlives the request), for at most maxWaitTimeout
// whatever it asks, well inside the server's write timeout.
const (
	defaultWaitTimeout = 30 * time.Second
	maxWaitTimeout     = 60 * time.Second
	waitPoll           = 100 * time.Millisecond
	// maxWaiters bounds the :wait calls a node holds open at once: each
	// holds a connection and a handler for up to maxWaitTimeout, and a
	// reader's token is all it takes to open one.
	maxWaiters = 256
)

// routeOperations handles GET /v1/operations, GET and DELETE
// /v1/operations/{id}, and POST /v1/operations/{id}:cancel or :wait.
// The route table (roles.go) admits reads for readers, :wait for readers
// too, cancel and delete for writers, as the methods that made them.
func (s *operations) routeOperations(w http.ResponseWriter, r *http.Request, p string) {
	if s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (%s)", r.URL.Path, withoutClusterMsg))
		return
	}
	if p == operationsList {
		if s.allow(w, r, http.MethodGet) {
			s.listOperations(w, r)
		}
		return
	}
	id, verb, _ := strings.Cut(strings.TrimPrefix(p, operationsPrefix), ":")
	if !validOperationID(id) {
		s.fail(w, r, errorf(errs.NotFound, "operation %q not found: an operation id is lower-case letters, digits and dashes, at most 64", id))
		return
	}
	name := "operations/" + id
	switch verb {
	case "":
		s.routeOperation(w, r, name)
	case "cancel":
		if s.allow(w, r, http.MethodPost) {
			s.writeOperation(w, r, func(ctx context.Context) (any, error) {
				_, err := s.experiments.CancelOperation(ctx, name)
				return struct{}{}, err // google.protobuf.Empty, as CancelOperation answers
			})
		}
	case "wait":
		if s.allow(w, r, http.MethodPost) {
			s.waitOperation(w, r, name)
		}
	default:
		s.fail(w, r, errorf(errs.NotFound, "no such method %q on operations: use cancel or wait", verb))
	}
}

// routeOperation handles GET and DELETE of one operation.
func (s *operations) routeOperation(w http.ResponseWriter, r *http.Request, name string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.getOperation(w, r, name)
	case http.MethodDelete:
		s.writeOperation(w, r, func(ctx context.Context) (any, error) {
			return struct{}{}, s.experiments.DeleteOperation(ctx, name) // google.protobuf.Empty
		})
	default:
		w.Header().Set("Allow", "GET, DELETE")
		s.fail(w, r, errMethod("method %s is not allowed here; use GET or DELETE", r.Method))
	}
}

// validOperationID reports whether id can name an operation: the
// leader names them with lower-case hex (preview.OperationID).
func validOperationID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// readOperation returns the operation called name from this node's
// replicated state.
func (s *operations) readOperation(name string) (*preview.Operation, bool, error) {
	doc, ok := s.cluster.State().Operations[strings.TrimPrefix(name, "operations/")]
	if !ok {
		return nil, false, nil
	}
	op, err := preview.DecodeOperation(doc.Data)
	return op, err == nil, err
}

// getOperation answers GET /v1/operations/{id} from the replicated state,
// so any node answers it.
func (s *operations) getOperation(w http.ResponseWriter, r *http.Request, name string) {
	op, ok, err := s.readOperation(name)
	if !ok && err == nil && s.askLeader(w, r, nil) {
		return
	}
	switch {
	case err != nil:
		s.fail(w, r, err)
	case !ok:
		s.fail(w, r, errorf(errs.NotFound, "operation %q not found", name))
	default:
		s.writeValue(w, r, apiv1.FromOperation(op))
	}
}

// askLeader forwards a read of something this node has not applied yet
// (just created on the leader) and reports whether it answered.
func (s *operations) askLeader(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	a, asked, err := s.cluster.ForwardRead(s.forwardedContext(r.Context(), r), callOf(r, raw))
	switch {
	case asked && err != nil:
		s.fail(w, r, err)
	case asked:
		writeAnswer(w, &a)
	}
	return asked
}

// listOperations answers GET /v1/operations?filter=&pageSize=&pageToken=.
func (s *operations) listOperations(w http.ResponseWriter, r *http.Request) {
	size, err := pageSizeParam(queryParam(r, "pageSize", "page_size"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := preview.ListOperations(s.cluster.State(), preview.OperationListRequest{
		Filter: r.URL.Query().Get("filter"), PageSize: size, PageToken: queryParam(r, "pageToken", "page_token")})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeValue(w, r, apiv1.FromOperationList(res))
}

// queryParam is the query parameter camel, or its proto3 spelling snake
// when camel is absent (both are accepted, as in request bodies).
func queryParam(r *http.Request, camel, snake string) string {
	q := r.URL.Query()
	if v := q.Get(camel); v != "" {
		return v
	}
	return q.Get(snake)
}

// pageSizeParam reads a pageSize parameter (AIP-158).
func pageSizeParam(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errorf(errs.InvalidArgument, "pageSize %q is not a number", v)
	}
	if n < 0 {
		return 0, errorf(errs.InvalidArgument, "pageSize must not be negative, not %d", n)
	}
	return n, nil
}

// writeOperation runs cancel or delete on the leader (forwarded from a
// follower), with the writer role the experiment methods need.
func (s *operations) writeOperation(w http.ResponseWriter, r *http.Request, run func(ctx context.Context) (any, error)) {
	if s.experiments == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (this node has no leader loop)", r.URL.Path))
		return
	}
	raw, ok := s.admitBody(w, r)
	if !ok {
		return
	}
	if err := decodeEmpty(raw); err != nil {
		s.fail(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), experimentWriteTimeout)
	defer cancel()
	s.leaderOnly(ctx, w, r, raw, run)
}

// waitRequest is google.longrunning.WaitOperationRequest.
type waitRequest struct {
	Name    string `json:"name"`
	Timeout string `json:"timeout"`
}

// waitOperation answers POST /v1/operations/{id}:wait: the operation once
// it is done, or as it is when the timeout (at most maxWaitTimeout)
// passes or the client goes away. It reads this node's replicated state,
// so any node answers. One this node does not know yet (just created on
// the leader) is waited for up to cluster.MaxCatchUp, then read from the leader
// once: a forwarded read is bounded by the cluster's forward timeout, so
// the wait itself is never forwarded.
func (s *operations) waitOperation(w http.ResponseWriter, r *http.Request, name string) {
	raw, admitted := s.admitBody(w, r)
	if !admitted {
		return
	}
	timeout, err := waitTimeout(raw)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if n := s.waiters.Add(1); n > maxWaiters {
		s.waiters.Add(-1)
		w.Header().Set("Retry-After", retryAfterSeconds)
		s.fail(w, r, errorf(errs.ResourceExhausted, "%d operations are being waited for on this node, its limit: retry later or poll GET /v1/%s", maxWaiters, name))
		return
	}
	defer s.waiters.Add(-1)
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	unknownUntil := time.Now().Add(min(timeout, cluster.MaxCatchUp))
	tick := time.NewTicker(waitPoll)
	defer tick.Stop()
	var (
		op       *preview.Operation
		ok       bool
		lastData []byte
	)
	for {
		// Decode only when the replicated record changed (a new slice
		// each Apply): a waiter's poll then costs a map lookup.
		doc, known := s.cluster.State().Operations[strings.TrimPrefix(name, "operations/")]
		if !known || !sameBytes(doc.Data, lastData) {
			op, ok, err = s.readOperation(name)
			lastData = doc.Data
		}
		switch {
		case err != nil:
			s.fail(w, r, err)
			return
		case !ok && time.Now().After(unknownUntil):
			s.readFromLeader(w, r, name)
			return
		case ok && op.Done:
			s.writeValue(w, r, apiv1.FromOperation(op))
			return
		}
		select {
		case <-ctx.Done():
			if op == nil {
				s.readFromLeader(w, r, name)
			} else {
				s.writeValue(w, r, apiv1.FromOperation(op)) // not done yet: AIP-151 answers it as it is
			}
			return
		case <-tick.C:
		}
	}
}

// readFromLeader answers with the leader's GET of operation name, or
// NOT_FOUND when no other node leads.
func (s *operations) readFromLeader(w http.ResponseWriter, r *http.Request, name string) {
	call := callOf(r, nil)
	call.Method, call.Path = http.MethodGet, "/v1/"+name
	a, asked, err := s.cluster.ForwardRead(s.forwardedContext(r.Context(), r), call)
	switch {
	case asked && err != nil:
		s.fail(w, r, err)
	case asked:
		writeAnswer(w, &a)
	default:
		s.fail(w, r, errorf(errs.NotFound, "operation %q not found", name))
	}
}

// waitTimeout reads the timeout of a :wait body: a protobuf Duration in
// JSON ("30s", "1.5s"), defaultWaitTimeout when absent.
func waitTimeout(raw []byte) (time.Duration, error) {
	var body waitRequest
	if err := decodeStrict(raw, &body); err != nil {
		return 0, err
	}
	if body.Timeout == "" {
		return defaultWaitTimeout, nil
	}
	num, ok := strings.CutSuffix(body.Timeout, "s")
	secs, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || secs != secs || secs <= 0 || secs > maxWaitTimeout.Seconds() {
		return 0, errorf(errs.InvalidArgument, "timeout %q must be a duration in seconds such as \"30s\", above 0s and at most %s",
			body.Timeout, maxWaitTimeout)
	}
	return time.Duration(secs * float64(time.Second)), nil
}

// sameBytes reports whether a and b are the same slice (not merely equal).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
