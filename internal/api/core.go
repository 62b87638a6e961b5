package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// core is what every handler of the API shares: the error answers
// (errors.go), the method check, the handlers' own role check against the
// route table (auth.go), the request and answer encodings and the one
// forwarder to the leader (forward.go). Each resource family's handler
// embeds it and holds its own small interfaces to the rest of the node,
// so that no handler reaches what its family does not need.
type core struct {
	log     hclog.Logger
	metrics *metrics
	maxBody int64
	bufs    sync.Pool
	// leader reaches the leader for the writes only it does; nil
	// without a cluster.
	leader leaderCaller
	// peerTLS: the node-only endpoints answer only on the node port
	// (fromPeer).
	peerTLS bool
}

// leaderCaller is the cluster as the forwarder sees it.
type leaderCaller interface {
	State() *raftstore.State
	OnLeader(ctx context.Context, wait time.Duration, local func(context.Context) error, call cluster.Call) (*cluster.Answer, error)
	forwardedWriter
}

func (s *core) getBuf() *bytes.Buffer {
	b := s.bufs.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func (s *core) putBuf(b *bytes.Buffer) {
	if b.Cap() <= pooledBufferMax {
		s.bufs.Put(b)
	}
}

// decodeJSON reads a bounded JSON body strictly: an unknown field or
// trailing data is a 400. An empty body decodes as {}.
func (s *core) decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	data, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeStrict(data, v)
}

// readBody reads a request body up to the configured limit.
func (s *core) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, err
		}
		return nil, errorf(errs.InvalidArgument, "reading the request body: %v", err)
	}
	return data, nil
}

// decodeStrict decodes one JSON object with no unknown fields and nothing
// after it; empty data decodes as {}.
func decodeStrict(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(errs.InvalidArgument, "request body: %v", err)
	}
	if dec.More() {
		return errorf(errs.InvalidArgument, "request body: data after the JSON object")
	}
	return nil
}

// allow answers 405 unless r uses method (or HEAD for GET).
func (s *core) allow(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method || (method == http.MethodGet && r.Method == http.MethodHead) {
		return true
	}
	w.Header().Set("Allow", method)
	s.fail(w, r, errMethod("method %s is not allowed here; use %s", r.Method, method))
	return false
}
