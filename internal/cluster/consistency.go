package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// maxSettings bounds the settings a join request may carry.
const maxSettings = 32

// Settings are a node's settings that change its decisions (merge default,
// engine limits), by name. Nodes that differ would compile one generation
// into different policies: the loader's etag check would leave the node
// behind on every generation (staging.go), or worse, two nodes would
// answer differently.
type Settings map[string]string

// Diff names every setting where s differs from ref ("" when equal).
func (s Settings) Diff(ref Settings) []string {
	keys := map[string]bool{}
	for k := range s {
		keys[k] = true
	}
	for k := range ref {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if s[k] != ref[k] {
			out = append(out, fmt.Sprintf("%s is %q on this node, %q on the leader", k, s[k], ref[k]))
		}
	}
	return out
}

// holdReasons says why a joining node must start PASSIVE: settings that
// differ from the leader's, or a group no policy of the active generation
// names (ONAP locks a PDP of an unknown group until the PAP knows it).
func (c *Cluster) holdReasons(req JoinRequest) []string {
	if req.ID == c.cfg.NodeID {
		return nil // the leader is the reference
	}
	var out []string
	if req.Settings != nil && c.cfg.Settings != nil {
		out = Settings(req.Settings).Diff(c.cfg.Settings)
	}
	if c.cfg.KnownGroups == nil {
		return out
	}
	if groups := c.cfg.KnownGroups(); groups != nil && !slices.Contains(groups, req.Group) {
		out = append(out, fmt.Sprintf("group %q serves no policy of the active generation", req.Group))
	}
	return out
}

// holdNewNode registers a new node that must be held and sets it PASSIVE
// before it enters the raft configuration, so it never applies a log in
// which it is ACTIVE (and never fails a generation for the others). It
// reports whether it held the node.
func (c *Cluster) holdNewNode(ctx context.Context, req JoinRequest) (bool, error) {
	if _, known := c.store.State().Nodes[req.ID]; known {
		return false, nil
	}
	reasons := c.holdReasons(req)
	if len(reasons) == 0 {
		return false, nil
	}
	if _, err := c.store.Propose(ctx, &raftstore.UpsertNode{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr,
		Group: req.Group, Subgroup: req.Subgroup, Voter: req.Voter}); err != nil {
		return false, err
	}
	if _, err := c.store.Propose(ctx, &raftstore.SetNodeState{ID: req.ID, State: raftstore.NodePassive}); err != nil {
		return false, err
	}
	c.log.Warn("node joins PASSIVE: set it ACTIVE once this is resolved", "node", req.ID, "reasons", reasons)
	return true, nil
}

// checkSettings bounds the settings of a join request.
func checkSettings(s map[string]string) error {
	if len(s) > maxSettings {
		return fmt.Errorf("%w: at most %d settings", ErrBadRequest, maxSettings)
	}
	for k, v := range s {
		if len(k) > maxScopeLen || len(v) > maxScopeLen {
			return fmt.Errorf("%w: a setting's name and value are at most %d bytes", ErrBadRequest, maxScopeLen)
		}
	}
	return nil
}
