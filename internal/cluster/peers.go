package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/policyrollout/reconciler/internal/errs"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// ErrNotPeer means a node-to-node request did not come from the node it
// speaks for: a report, heartbeat or address change for node A sent with
// node B's certificate, or a node-only endpoint called without one.
var ErrNotPeer = errs.Sentinel(errs.PermissionDenied, "not the node this request speaks for")

// maxReportErrorBytes bounds the error text of one ReportFailed: every
// byte of it is replicated to every node and kept in the raft log. The
// node's own report is cut to it; a larger one from elsewhere is refused.
const maxReportErrorBytes = 16 << 10

type peerKey struct{}

// WithPeer marks ctx as serving a node's own call: node id, whose
// certificate the node-to-node port verified (see tlsconfig.Mux), acting
// for itself, with no caller's credential. A user's request a follower
// forwards is not marked: its caller's credential decides.
func WithPeer(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, peerKey{}, id)
}

// PeerFrom returns the verified node a request came from, if any.
func PeerFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(peerKey{}).(string)
	return id, ok && id != ""
}

type credentialKey struct{}

// WithCredential records the caller's Authorization header of a user
// request, which the forwarding layer passes on to the leader instead of
// the node's own token: the leader checks the caller, not the follower.
func WithCredential(ctx context.Context, authorization string) context.Context {
	if authorization == "" {
		return ctx
	}
	return context.WithValue(ctx, credentialKey{}, authorization)
}

// credential is the Authorization header to forward with a request.
func credential(ctx context.Context, nodeToken string) string {
	if a, _ := ctx.Value(credentialKey{}).(string); a != "" {
		return a
	}
	if nodeToken != "" {
		return "Bearer " + nodeToken
	}
	return ""
}

// checkSpeaker refuses, with peerTLS (Config.PeerTLS), a request that
// speaks for node id but did not come from it: the node's own certificate
// is the only thing that names it (no header a peer sends does). This node
// acting for itself is always allowed. Without mutual TLS there is no identity to
// check: such a cluster binds loopback only (config.CheckExposure).
func checkSpeaker(ctx context.Context, peerTLS bool, id, what string) error {
	if peerTLS && !IsLocal(ctx) {
		peer, ok := PeerFrom(ctx)
		if !ok {
			return fmt.Errorf("%w: a %s is accepted only from a node, on the node-to-node port with its certificate",
				ErrNotPeer, what)
		}
		if peer != id {
			return fmt.Errorf("%w: node %s sent a %s for node %s", ErrNotPeer, peer, what, id)
		}
	}
	return nil
}

// checkOwn refuses a node's own call (WithPeer: its certificate and no
// caller's credential) that names another node: a node joins and leaves
// only itself. A caller's credential (an admin's join or leave a
// follower forwarded) is checked by the API, not here.
func checkOwn(ctx context.Context, id, what string) error {
	if peer, ok := PeerFrom(ctx); ok && peer != id {
		return fmt.Errorf("%w: node %s sent a %s for node %s; a node certificate speaks for its own node only (an admin token may %s another)",
			ErrNotPeer, peer, what, id, what)
	}
	return nil
}

// IsMember reports whether node id is a current member: registered, or
// in the raft configuration (between the two steps of a join or a
// leave). The node port gives a stranger's certificate nothing but its
// own join.
func (c *Cluster) IsMember(id string) bool {
	if _, ok := c.store.State().Nodes[id]; ok || id == c.cfg.NodeID {
		return true
	}
	servers, err := c.store.Servers()
	if err != nil {
		return false
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	return false
}

// withoutCredential drops a caller's credential from ctx: a call this
// node makes on its own authority (the leader asking a node for its
// health) must not lend it.
func withoutCredential(ctx context.Context) context.Context {
	return context.WithValue(ctx, credentialKey{}, "")
}

type localKey struct{}

// withLocal marks ctx as this node acting for itself (its loader, its
// heartbeat loop, its registration), as opposed to serving a request.
func withLocal(ctx context.Context) context.Context {
	return context.WithValue(ctx, localKey{}, true)
}

// IsLocal reports whether ctx is this node acting for itself.
func IsLocal(ctx context.Context) bool {
	v, _ := ctx.Value(localKey{}).(bool)
	return v
}

// reportNode is the node a forwardable command speaks for.
func reportNode(cmd raftstore.Command) (string, error) {
	var v struct {
		NodeID string   `json:"nodeId"`
		Errors []string `json:"errors"`
	}
	if err := json.Unmarshal(cmd.Payload, &v); err != nil {
		return "", fmt.Errorf("%w: %s: %v", raftstore.ErrInvalidCommand, cmd.Type, err)
	}
	switch cmd.Type {
	case raftstore.TypeReportReady:
		return v.NodeID, nil
	case raftstore.TypeReportFailed:
		if n := errorBytes(v.Errors); n > maxReportErrorBytes {
			return "", fmt.Errorf("%w: a failure report carries %d bytes of errors; at most %d", ErrBadRequest, n,
				maxReportErrorBytes)
		}
		return v.NodeID, nil
	}
	return "", fmt.Errorf("%w: %s", ErrNotForwardable, cmd.Type)
}

// checkAddressChange refuses a join that would move a registered node to
// another HTTP address unless the node itself asks (with PeerTLS). Its
// raft address cannot change at all (MEMBERSHIP_CONFLICT).
func (m *members) checkAddressChange(ctx context.Context, req JoinRequest) error {
	old, ok := m.store.State().Nodes[req.ID]
	if !ok || old.State == raftstore.NodeTerminated || old.HTTPAddr == req.HTTPAddr {
		return nil
	}
	if err := checkSpeaker(ctx, m.peerTLS, req.ID, "change of its addresses"); err != nil {
		return fmt.Errorf("%w: node %s is registered at %s; only the node itself may move (or leave and join again)",
			err, req.ID, old.HTTPAddr)
	}
	return nil
}

func errorBytes(errs []string) int {
	n := 0
	for _, e := range errs {
		n += len(e)
	}
	return n
}

// capErrors cuts a node's own error list to maxReportErrorBytes, saying
// how much was left out: the first errors are the useful ones.
func capErrors(errs []string) []string {
	const note = "... (%d more errors not reported; run reconciler validate for all)"
	total := 0
	for i, e := range errs {
		if total+len(e) > maxReportErrorBytes-len(note)-20 {
			out := append([]string{}, errs[:i]...)
			if i == 0 {
				out = append(out, strings.ToValidUTF8(e[:maxReportErrorBytes/2], ""))
			}
			return append(out, fmt.Sprintf(note, len(errs)-len(out)))
		}
		total += len(e)
	}
	return errs
}
