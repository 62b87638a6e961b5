package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// defaultSubgroup is the subgroup every group has, declared or not.
const defaultSubgroup = "default"

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

// nodeRegistry is what admission needs of the store: the registry, and
// proposing a node's record and state.
type nodeRegistry interface {
	State() *raftstore.State
	Propose(ctx context.Context, p raftstore.Payload) (raftstore.Result, error)
}

// admission decides, on the leader, whether a joining node starts PASSIVE
// (its settings, group or subgroup do not fit), and holds it so.
type admission struct {
	self        string
	settings    Settings
	groups      map[string][]string
	knownGroups func() []string
	store       nodeRegistry
	log         hclog.Logger
}

// holdReasons says why a joining node must start PASSIVE: settings that
// differ from the leader's, or a group or subgroup the cluster does not
// know.
func (a *admission) holdReasons(req JoinRequest) []string {
	if req.ID == a.self {
		return nil // the leader is the reference
	}
	var out []string
	if req.Settings != nil && a.settings != nil {
		out = Settings(req.Settings).Diff(a.settings)
	}
	return append(out, a.groupReasons(req.Group, req.Subgroup)...)
}

// groupReasons names what this node's configuration does not know of a
// group and subgroup: a group that no policy of the active generation
// names and [groups] does not declare, a subgroup [groups] does not
// declare for its group (ONAP locks a PDP of an unknown group or subgroup
// until the PAP knows it). "default" needs no declaration.
func (a *admission) groupReasons(group, subgroup string) []string {
	if a.knownGroups == nil {
		return nil
	}
	var out []string
	subgroups, declared := a.groups[group]
	if groups := a.knownGroups(); groups != nil && !declared && !slices.Contains(groups, group) {
		out = append(out, fmt.Sprintf("group %q serves no policy of the active generation and [groups] does not declare it", group))
	}
	if subgroup != defaultSubgroup && !slices.Contains(subgroups, subgroup) {
		out = append(out, fmt.Sprintf("subgroup %q of group %q is not declared: add it to [groups.%s] subgroups (declared: %s)",
			subgroup, group, group, quoted(subgroups)))
	}
	return out
}

// HeldReasons says why a PASSIVE node is held: how its settings differ
// from the leader's (both from their last PDP_STATUS in v), a release
// that does not fit the voters' (version.go), and what this
// node's configuration does not know of its group and subgroup. Nil for a
// node that is not PASSIVE, or has nothing to fix.
func (c *Cluster) HeldReasons(n raftstore.Node, v View) []string {
	if n.State != raftstore.NodePassive {
		return nil
	}
	var out []string
	own, lead := v.Nodes[n.ID].Status, v.Nodes[v.Leader].Status
	if own != nil && lead != nil && own.Settings != nil && lead.Settings != nil {
		out = own.Settings.Diff(lead.Settings)
	}
	if skew := c.VersionSkew(n.ID, v.Nodes); skew != "" {
		out = append(out, skew)
	}
	return append(out, c.admit.groupReasons(n.Group, n.Subgroup)...)
}

// quoted lists ss quoted, or says there are none.
func quoted(ss []string) string {
	if len(ss) == 0 {
		return "none"
	}
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// holdNewNode registers a new node that must be held and sets it PASSIVE
// before it enters the raft configuration, so it never applies a log in
// which it is ACTIVE (and never fails a generation for the others). It
// reports whether it held the node.
func (a *admission) holdNewNode(ctx context.Context, req JoinRequest) (bool, error) {
	if _, known := a.store.State().Nodes[req.ID]; known {
		return false, nil
	}
	reasons := a.holdReasons(req)
	if len(reasons) == 0 {
		return false, nil
	}
	if _, err := a.store.Propose(ctx, &raftstore.UpsertNode{ID: req.ID, RaftAddr: req.RaftAddr, HTTPAddr: req.HTTPAddr,
		Group: req.Group, Subgroup: req.Subgroup, Voter: req.Voter}); err != nil {
		return false, err
	}
	if _, err := a.store.Propose(ctx, &raftstore.SetNodeState{ID: req.ID, State: raftstore.NodePassive}); err != nil {
		return false, err
	}
	a.log.Warn("node joins PASSIVE: set it ACTIVE once this is resolved", "node", req.ID, "reasons", reasons)
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
