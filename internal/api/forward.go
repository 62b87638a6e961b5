package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"

	"github.com/policyrollout/reconciler/internal/cluster"
)

// maxForwardedAnswer bounds what is read of the leader's answer.
const maxForwardedAnswer = 4 << 20

// leaderAddr is the HTTP address of the leader when it is another node.
func (s *Server) leaderAddr() (string, bool) {
	id := s.cluster.Leader()
	if id == "" || id == s.cluster.NodeID() {
		return "", false
	}
	n, ok := s.cluster.State().Nodes[id]
	return n.HTTPAddr, ok && n.HTTPAddr != ""
}

// forward sends a request that only the leader can serve to the same path
// on the leader, marked with cluster.ForwardedHeader so that it is never
// forwarded again, and copies the answer (status, AIP-193 error included)
// back to the client. It is for API calls whose work is not a raft command
// (the cluster layer forwards those); the deadline is the caller's.
func (s *Server) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string, body []byte) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		s.fail(w, r, errorf(kindInternal, "forward: %v", err))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cluster.ForwardedHeader, s.cluster.NodeID())
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	resp, err := s.fwdClient.Do(req)
	if err != nil {
		s.fail(w, r, errorf(kindUnavailable, "forwarding to the leader at %s failed: %v", addr, transportCause(err)))
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardedAnswer))
	if err != nil {
		s.fail(w, r, errorf(kindUnavailable, "reading the leader's answer from %s: %v", addr, err))
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}

// transportCause drops the "Post URL:" that net/http puts around transport
// errors; the message names the address already.
func transportCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
