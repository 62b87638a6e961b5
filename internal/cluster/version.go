package cluster

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/raftstore"
	"github.com/policyrollout/reconciler/internal/version"
)

// versions knows the release each member reported: from the leader's
// heartbeat table, or the leader's view on a follower.
type versions struct {
	self   string
	store  leaderCheck
	hb     *heartbeats
	view   *viewHolder
	status func() *NodeStatus // this node's own PDP_STATUS
}

// Version is the cluster version: the lowest release among the raft
// members, voters and read replicas alike (both apply the log), from the
// version in each one's last PDP_STATUS (this node's own now). A voter not heard from yet, or that reports no semantic version
// (1.0.0 reported "dev" or a commit), counts as version.Oldest, so a
// leader that just took over proposes nothing new until every voter has
// said what it runs. The leader's store checks every command against it
// (raftstore feature table); other nodes show the leader's view of it.
func (c *Cluster) Version() version.V {
	servers, err := c.store.Servers()
	if err != nil {
		return version.Must(version.Oldest)
	}
	return version.Lowest(c.versions.memberVersions(servers, c.versions.heard()))
}

// heard is the last PDP_STATUS of every node: the leader's own table, else
// the leader's view as the last heartbeat answer brought it.
func (vs *versions) heard() map[string]NodeView {
	if vs.store.IsLeader() {
		return vs.hb.snapshot()
	}
	return vs.view.load().Nodes
}

// memberVersions is the version each member reported, "" for none.
func (vs *versions) memberVersions(servers []raft.Server, heard map[string]NodeView) []string {
	var out []string
	for _, s := range servers {
		id := string(s.ID)
		switch st := heard[id].Status; {
		case id == vs.self:
			out = append(out, vs.ownVersion())
		case st == nil:
			out = append(out, "")
		default:
			out = append(out, st.Version)
		}
	}
	return out
}

// ownVersion is the release this node reports in its PDP_STATUS.
func (vs *versions) ownVersion() string {
	if s := vs.status(); s != nil && s.Version != "" {
		return s.Version
	}
	return version.Current
}

// VersionSkew says why node id must not serve beside the other members
// (version.Skew), "" when it may or has not said what it runs.
func (c *Cluster) VersionSkew(id string, heard map[string]NodeView) string {
	st := heard[id].Status
	if st == nil {
		return ""
	}
	servers, err := c.store.Servers()
	if err != nil {
		return ""
	}
	// The node itself counts toward the cluster version only when it is
	// not too new: a 2.0.0 voter would otherwise make the cluster 2.0.0
	// in its own eyes. Compare with the others.
	others := slices.DeleteFunc(slices.Clone(servers), func(s raft.Server) bool { return string(s.ID) == id })
	cluster := version.Lowest(c.versions.memberVersions(others, heard))
	if reason := version.Skew(version.Of(st.Version), cluster); reason != "" {
		return "version: " + reason
	}
	return ""
}

// holdSkewed, on the leader, sets PASSIVE every serving node whose
// release cannot serve beside the other members' (VersionSkew): a node too new
// may propose or forward what the others cannot apply, one too old may
// refuse what they write. The operator sets it ACTIVE once it runs a
// release that fits; until then the leader holds it again at each tick.
func (c *Cluster) holdSkewed(ctx context.Context) {
	if !c.store.IsLeader() {
		return
	}
	heard := c.hb.snapshot()
	st := c.store.State()
	for _, id := range slices.Sorted(maps.Keys(heard)) {
		n, ok := st.Nodes[id]
		if !ok || id == c.cfg.NodeID || n.State == raftstore.NodePassive || n.State == raftstore.NodeTerminated {
			continue
		}
		reason := c.VersionSkew(id, heard)
		if reason == "" {
			continue
		}
		if _, err := c.store.Propose(ctx, &raftstore.SetNodeState{ID: id, State: raftstore.NodePassive}); err != nil {
			c.log.Debug("cannot hold a node of another release PASSIVE yet", "node", id, "error", err)
			continue
		}
		c.log.Warn("node held PASSIVE: its release does not fit the cluster's", "node", id, "reason", reason,
			"cluster_version", c.Version().String())
	}
}
