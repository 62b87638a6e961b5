package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/cluster"
)

// forwardedContext marks ctx when r was forwarded by another node, so the
// cluster layer never forwards it again.
func forwardedContext(ctx context.Context, r *http.Request) context.Context {
	if r.Header.Get(cluster.ForwardedHeader) != "" {
		return cluster.WithForwarded(ctx)
	}
	return ctx
}

// callOf is r as a call the leader can serve, with body raw.
func callOf(r *http.Request, raw []byte) cluster.Call {
	return cluster.Call{Method: r.Method, Path: r.URL.RequestURI(), Body: raw}
}

// writeAnswer copies the leader's answer (status, AIP-193 error
// included) back to the client.
func writeAnswer(w http.ResponseWriter, a *cluster.Answer) {
	if a.ContentType != "" {
		w.Header().Set("Content-Type", a.ContentType)
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// leaderOnly runs work only the leader can do through the cluster's one
// forwarder (cluster.OnLeader): here when this node leads, otherwise
// forwarded once to the leader, waiting up to leaderWait for one to
// exist. It writes the answer: run's value, its error, or the leader's
// answer. raw is the request body sent on when forwarding.
func (s *Server) leaderOnly(ctx context.Context, w http.ResponseWriter, r *http.Request, raw []byte,
	run func(context.Context) (any, error)) {
	var v any
	a, err := s.cluster.OnLeader(forwardedContext(ctx, r), leaderWait, func(ctx context.Context) error {
		var err error
		v, err = run(ctx)
		return err
	}, callOf(r, raw))
	switch {
	case err != nil:
		s.fail(w, r, err)
	case a != nil:
		writeAnswer(w, a)
	default:
		s.writeValue(w, r, v)
	}
}
