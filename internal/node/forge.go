package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/forge"
	"github.com/policyrollout/reconciler/internal/github"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/preview"
	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/webhook"
)

// GitHub wiring ([github]): the leader loop's GitHub worker gets a forge
// client; every node serves the webhook, whose triggers and comment
// commands reach the leader (forwarded from a follower).
const (
	// forgeMaxWait is the longest one GitHub call waits out a rate limit
	// in the leader's GitHub worker; longer limits are retried by the
	// worker after GitHub's reset, so other work goes on meanwhile.
	forgeMaxWait = time.Second
	// handOffTimeout bounds how long a webhook's trigger or command keeps
	// trying to reach the leader.
	handOffTimeout = 15 * time.Second
)

// githubConfig is the leader loop's GitHub configuration, nil without
// [github]. The token is read from github.token_env and never logged.
func (m *Main) githubConfig() (*github.Config, error) {
	cfg := m.Config
	if !cfg.GitHub.Enabled() {
		return nil, nil
	}
	token := cfg.Secret(cfg.GitHub.TokenEnv)
	if token == "" {
		m.Logger.Named(logging.Forge).Warn("the GitHub token variable is empty; GitHub calls will fail",
			"variable", cfg.GitHub.TokenEnv)
	}
	client, err := forge.New(forge.Config{Repository: cfg.GitHub.Repository, APIURL: cfg.GitHub.APIURL,
		Token: token, Logger: m.Logger.Named(logging.Forge), MaxWait: forgeMaxWait})
	if err != nil {
		return nil, fmt.Errorf("[github]: %w", err)
	}
	return &github.Config{Forge: client, Summary: cfg.Preview.Summary, Stats: m.mergedPreviewStats,
		Thresholds: previewThresholds(cfg.Preview),
		Redactor:   preview.NewRedactor(previewRedact(cfg.Preview), cfg.Preview.Show)}, nil
}

// webhookHandler is the receiver of POST /v1/webhooks/github, nil
// without [github]. Without a secret it refuses every delivery (503).
func (m *Main) webhookHandler() api.WebhookReceiver {
	cfg := m.Config
	if !cfg.GitHub.Enabled() {
		return nil
	}
	h := &handOff{m: m, log: m.Logger.Named(logging.Webhook)}
	return webhook.New(webhook.Config{
		Secret:     []byte(cfg.Secret(cfg.GitHub.WebhookSecretEnv)),
		Branch:     cfg.Git.Branch,
		Repository: cfg.GitHub.Repository,
		Trigger:    h,
		Commands:   h,
		Logger:     h.log,
	})
}

// commandQueue is where comment commands are queued on this node: the
// GitHub worker (which answers NOT_LEADER where it is not running).
func (m *Main) commandQueue() api.CommandQueue {
	if m.github == nil {
		return nil
	}
	return m.github
}

// handOff passes what the webhook accepted to the leader without blocking
// the webhook's answer: a trigger through the cluster's reconcile
// forwarding, a command through the cluster's one way to the leader
// (OnLeader) to the internal enqueue endpoint.
type handOff struct {
	m   *Main
	log hclog.Logger
}

// Trigger implements webhook.Trigger.
func (h *handOff) Trigger(reason string) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
		defer cancel()
		if err := h.m.cluster.Reconcile(ctx); err != nil {
			h.log.Warn("cannot pass the webhook's trigger to the leader; the next poll catches up",
				"reason", reason, "error", err)
		}
	}()
}

// Enqueue implements webhook.Commands.
func (h *handOff) Enqueue(cmd webhook.Command) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), handOffTimeout)
		defer cancel()
		if err := h.enqueue(ctx, cmd); err != nil {
			h.log.Warn("cannot pass a comment command to the leader; it is dropped", "pull", cmd.PR,
				"verb", cmd.Verb, "error", err)
		}
	}()
}

// enqueue queues cmd here when this node leads, else on the leader,
// retrying while the leader changes.
func (h *handOff) enqueue(ctx context.Context, cmd webhook.Command) error {
	body, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	call := cluster.Call{Method: http.MethodPost, Path: api.WebhookCommandsPath, Body: body}
	local := func(context.Context) error { return h.m.github.EnqueueCommand(cmd) }
	for delay := 50 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		a, err := h.m.cluster.OnLeader(ctx, 0, local, call)
		if err == nil && a != nil {
			err = a.Err()
		}
		if err == nil || !errors.Is(err, raftstore.ErrNotLeader) && !errors.Is(err, cluster.ErrForward) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (%v)", err, ctx.Err())
		case <-time.After(delay):
		}
	}
}

// previewThresholds turns [preview.thresholds] into the thresholds of
// each named policy and "*" (0 means no limit).
func previewThresholds(p config.Preview) preview.ThresholdSet {
	if len(p.Thresholds) == 0 {
		return nil
	}
	limit := func(v float64) *float64 {
		if v <= 0 {
			return nil
		}
		return &v
	}
	out := preview.ThresholdSet{}
	for name := range p.Thresholds {
		a, d := p.ThresholdsFor(name)
		out[name] = preview.Thresholds{MaxAllowToDenyRatio: limit(a), MaxDenyToAllowRatio: limit(d)}
	}
	return out
}

// mergedPreviewStats is the cluster's merged preview stats as this node
// holds them (the leader's merge), nil without a preview runtime.
func (m *Main) mergedPreviewStats() []preview.Stats {
	if m.preview == nil {
		return nil
	}
	return m.preview.Stats()
}
