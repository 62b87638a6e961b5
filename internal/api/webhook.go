package api

import (
	"context"
	"net/http"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// WebhookReceiver handles a GitHub delivery (webhook.Handler): it writes
// the answer of a delivery it handled and returns a refusal, with its
// code, for the API to answer as every error (AIP-193).
type WebhookReceiver interface {
	Receive(w http.ResponseWriter, r *http.Request) error
}

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

// webhooks serves GitHub's deliveries and the hand-off of the comment
// commands they carry to the leader.
type webhooks struct {
	*core
	webhook  WebhookReceiver
	commands CommandQueue
	// cluster is nil without a cluster: the hand-off then answers 404.
	cluster leaderCaller
}

// serveWebhook answers POST /v1/webhooks/github with the receiver
// (internal/webhook) when [github] is configured, else 404.
func (s *webhooks) serveWebhook(w http.ResponseWriter, r *http.Request) {
	if s.webhook == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s (the GitHub integration, [github], is not configured)", r.URL.Path))
		return
	}
	if err := s.webhook.Receive(w, r); err != nil {
		s.fail(w, r, err)
	}
}

// enqueueCommand is internal: a follower hands the leader a comment
// command. The leader queues it (202); a follower forwards it once.
func (s *webhooks) enqueueCommand(w http.ResponseWriter, r *http.Request) {
	if s.commands == nil || s.cluster == nil {
		s.fail(w, r, errorf(errs.NotFound, "no such resource: %s", r.URL.Path))
		return
	}
	if !s.allow(w, r, http.MethodPost) {
		return
	}
	if !s.fromPeer(w, r) {
		return
	}
	raw, ok := s.admitBody(w, r)
	if !ok {
		return
	}
	var cmd webhook.Command
	if err := decodeStrict(raw, &cmd); err != nil {
		s.fail(w, r, err)
		return
	}
	a, err := s.cluster.OnLeader(s.forwardedContext(r.Context(), r), 0, func(context.Context) error {
		return s.commands.EnqueueCommand(cmd)
	}, callOf(r, raw))
	switch {
	case err != nil:
		s.fail(w, r, err)
	case a != nil:
		writeAnswer(w, a)
	default:
		writeJSON(w, http.StatusAccepted, []byte("{}\n"))
	}
}
