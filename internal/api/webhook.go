package api

import (
	"errors"
	"net/http"

	"github.com/policyrollout/reconciler/internal/auth"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// CommandQueue takes GitHub comment commands where the leader loop runs
// (reconcile.Loop); elsewhere it answers raftstore.ErrNotLeader and the
// API forwards the command to the leader.
type CommandQueue interface {
	EnqueueCommand(cmd webhook.Command) error
}

// WebhookCommandsPath is the internal endpoint through which a node hands
// a comment command its webhook received to the leader, which queues it.
// It needs the API token like the other cluster endpoints.
const WebhookCommandsPath = webhook.Path + ":enqueueCommand"

// serveWebhook answers POST /v1/webhooks/github with the receiver
// (internal/webhook) when [github] is configured, else 404.
func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhook == nil {
		s.fail(w, r, errorf(kindNotFound, "no such resource: %s (the GitHub integration, [github], is not configured)", r.URL.Path))
		return
	}
	s.webhook.ServeHTTP(w, r)
}

// enqueueCommand is internal: a follower hands the leader a comment
// command. The leader queues it (202); a follower forwards it once.
func (s *Server) enqueueCommand(w http.ResponseWriter, r *http.Request) {
	if s.commands == nil || s.cluster == nil {
		s.fail(w, r, errorf(kindNotFound, "no such resource: %s", r.URL.Path))
		return
	}
	if !s.allow(w, r, http.MethodPost) {
		return
	}
	if !s.fromPeer(w, r) {
		return
	}
	raw, ok := s.admitBody(w, r, auth.RoleAdmin)
	if !ok {
		return
	}
	var cmd webhook.Command
	if err := decodeStrict(raw, &cmd); err != nil {
		s.fail(w, r, err)
		return
	}
	err := s.commands.EnqueueCommand(cmd)
	switch {
	case err == nil:
		writeJSON(w, http.StatusAccepted, []byte("{}\n"))
	case errors.Is(err, raftstore.ErrNotLeader) && r.Header.Get(cluster.ForwardedHeader) == "":
		if addr, ok := s.leaderAddr(); ok {
			s.forward(r.Context(), w, r, addr, raw)
			return
		}
		s.fail(w, r, err)
	default:
		s.fail(w, r, err)
	}
}
